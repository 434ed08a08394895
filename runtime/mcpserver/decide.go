package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// builtinTools are the server's own tools: a flow of one of these names
// is not offered.
var builtinTools = map[string]bool{CancelRunTool: true, WaitRunTool: true, ApproveTool: true, RejectTool: true,
	ResolveTool: true, RedriveTool: true, ForkTool: true, RaiseBudgetTool: true}

// Bounds of what a decision shows and takes.
const (
	// maxShownBytes bounds what an elicitation quotes of what the wait
	// shows (the flow's request, an agent's proposed call).
	maxShownBytes = 2048
	// maxReasonBytes bounds a rejection's reason taken from a client:
	// engine.MaxDecisionReasonBytes, past which the daemon refuses it.
	maxReasonBytes = 4096
)

// Reasons recorded for a rejection that came without one.
const (
	reasonDeclined = "declined in the MCP client"
	reasonRejected = "rejected in the MCP client"
)

func (s *Server) addDecisionTools() {
	s.mcp.AddTool(&mcp.Tool{
		Name: WaitRunTool,
		Description: "Wait for a weir run by id, as the call that started it does: answers its output or error, how to decide a human wait, " +
			"or, after the follow bound, that it still works (call again).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"run_id":{"type":"string"}},"required":["run_id"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, s.waitRun)
	s.mcp.AddTool(&mcp.Tool{
		Name: ApproveTool,
		Description: "Approve an open human wait of a weir run (its wait id or node), then wait for the run. " +
			"payload: the wait node's result, or an agent's call's edited arguments; result: answers an agent's call in the tool's place.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"run_id":{"type":"string"},"wait":{"type":"string","description":"the wait's id or node"},"payload":{},"result":{}},"required":["run_id","wait"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, s.decideTool(true))
	s.mcp.AddTool(&mcp.Tool{
		Name:        RejectTool,
		Description: "Reject an open human wait of a weir run (the wait id or node a call answered), then wait for the run as its call does.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"run_id":{"type":"string"},"wait":{"type":"string","description":"the wait's id or node"},"reason":{"type":"string"}},"required":["run_id","wait"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, s.decideTool(false))
}

func (s *Server) waitRun(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if req.Params.RequestState != "" {
		return s.resume(ctx, req), nil
	}
	var in struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.RunID == "" {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, `want {"run_id": "..."}`), nil
	}
	return s.follow(ctx, req, in.RunID, nil), nil
}

// decideTool is the handler of ApproveTool (approve) or RejectTool. The
// wait is looked up among the run's open waits (its descendants' too),
// so a child run's wait is decided on the child, and the call follows
// the run it was given.
func (s *Server) decideTool(approve bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			return s.resume(ctx, req), nil
		}
		var in struct {
			RunID   string          `json:"run_id"`
			Wait    string          `json:"wait"`
			Payload json.RawMessage `json:"payload"`
			Result  json.RawMessage `json:"result"`
			Reason  string          `json:"reason"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.RunID == "" || in.Wait == "" {
			return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, `want {"run_id": "...", "wait": "..."}`), nil
		}
		ws, err := s.d.RunWaits(ctx, in.RunID)
		if err != nil {
			return withRun(apiRefusal(err), in.RunID), nil
		}
		w, ok := findWait(ws, in.Wait)
		if !ok {
			return withRun(refused(apitypes.CodeNotWaiting, apitypes.ClassProtocol,
				fmt.Sprintf("run %s has no open decision %q", in.RunID, escape.Cut(in.Wait, 200))), in.RunID), nil
		}
		if len(in.Payload) == 0 || string(in.Payload) == "null" {
			in.Payload = nil
		}
		if approve && len(in.Result) > 0 && string(in.Result) != "null" {
			// An answer in the tool's place: checked, and refused on a
			// wait that is not an agent's proposed call, by the daemon.
			if _, err := s.d.RunRespond(ctx, w.RunID, w.ID, in.Result, ""); err != nil {
				return withRun(apiRefusal(err), in.RunID), nil
			}
			return s.follow(ctx, req, in.RunID, nil), nil
		}
		if res := s.decide(ctx, w, approve, in.Payload, in.Reason); res != nil {
			return withRun(res, in.RunID), nil
		}
		return s.follow(ctx, req, in.RunID, nil), nil
	}
}

// findWait is the open decision of ws named by its id or its node.
func findWait(ws []apitypes.HumanWait, name string) (apitypes.HumanWait, bool) {
	for _, w := range ws {
		if w.ID == name && w.NeedsDecision() {
			return w, true
		}
	}
	for _, w := range ws {
		if w.Node == name && w.NeedsDecision() {
			return w, true
		}
	}
	return apitypes.HumanWait{}, false
}

// decide approves or rejects w; nil when done, else the refusal.
func (s *Server) decide(ctx context.Context, w apitypes.HumanWait, approve bool, payload json.RawMessage, reason string) *mcp.CallToolResult {
	var err error
	if approve {
		_, err = s.d.RunApprove(ctx, w.RunID, w.ID, payload)
	} else {
		if reason == "" {
			reason = reasonRejected
		}
		_, err = s.d.RunReject(ctx, w.RunID, w.ID, escape.Cut(reason, maxReasonBytes))
	}
	if err != nil {
		return apiRefusal(err)
	}
	return nil
}

// canElicit says whether the call's client can be asked for a decision:
// it declared elicitation (form), and it can be asked in this call: by
// an input request (2026-07-28), or by a request from the server, which
// a stateless session cannot take.
func (s *Server) canElicit(req *mcp.CallToolRequest) bool {
	if req.Session == nil || s.o.Stateless && !supportsRoundTrips(req) {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil &&
		(ip.Capabilities.Elicitation.Form != nil || ip.Capabilities.Elicitation.URL == nil)
}

func waitKey(w apitypes.HumanWait) string { return w.RunID + "/" + w.ID }

// asked records what became of the waits asked of the person in one
// call (by waitKey): askDecided or askDismissed.
type asked map[string]string

const (
	askDecided   = "decided"
	askDismissed = "dismissed"
)

// supportsRoundTrips says whether the call's client speaks protocol
// 2026-07-28 or later, where a server asks for input by answering with
// input requests (SEP-2322) that the client fulfils and sends back with
// the call again: it cannot send the client a request mid-call.
func supportsRoundTrips(req *mcp.CallToolRequest) bool {
	ip := req.Session.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= "2026-07-28"
}

// ask is what follow does with a run parked on human waits ws: the
// waiting answer when the client cannot be asked, else the first open
// decision not asked yet is asked. res is the call's answer (nil: go
// on); decided says a decision was just made (read the run again at
// once). With nothing left to ask but decided waits still listed, both
// are zero: read the run again at the next poll.
func (s *Server) ask(ctx context.Context, req *mcp.CallToolRequest, deadline time.Time, v *apitypes.Run, ws []apitypes.HumanWait, a asked) (res *mcp.CallToolResult, decided bool) {
	if !s.canElicit(req) {
		return waiting(v, ws), false
	}
	var w apitypes.HumanWait
	found := false
	for _, x := range ws {
		if !x.NeedsDecision() {
			continue
		}
		switch a[waitKey(x)] {
		case askDismissed:
			// The person chose not to decide here: say how to.
			return waiting(v, ws), false
		case "":
			if !found {
				w, found = x, true
			}
		}
	}
	if !found {
		if slices.ContainsFunc(ws, settledByOps) {
			// Nothing to ask here, and a person must resolve or redrive:
			// say how rather than follow a run that cannot go on.
			return waiting(v, ws), false
		}
		return nil, false
	}
	if supportsRoundTrips(req) {
		return inputRequired(v.ID, w), false
	}
	ectx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ans, err := req.Session.Elicit(ectx, elicitParams(w))
	if err != nil {
		if ctx.Err() == nil {
			s.o.Logger.Info("asking for a decision by elicitation", "run", w.RunID, "wait", w.ID, "error", err.Error())
		}
		return waiting(v, ws), false
	}
	out, ok := s.applyAnswer(ctx, w, ans)
	if out != nil {
		return withRun(out, v.ID), false
	}
	if !ok {
		return waiting(v, ws), false
	}
	a[waitKey(w)] = askDecided
	return nil, true
}

func elicitParams(w apitypes.HumanWait) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "form", Message: elicitMessage(w), RequestedSchema: decisionSchema}
}

// inputKey names the one input request a waiting call answers with.
const inputKey = "decision"

// roundTrip is the state a call that asked for a decision carries to
// its next round (the client echoes it): the run the call follows and
// the wait asked. It names nothing the caller could not name in
// approve_wait: the daemon checks the caller owns the run.
type roundTrip struct {
	Run     string `json:"run"`
	WaitRun string `json:"wait_run"`
	Wait    string `json:"wait"`
}

// inputRequired answers a call on a 2026-07-28 client with the decision
// of w to ask; the client calls again with the answer (resume).
func inputRequired(run string, w apitypes.HumanWait) *mcp.CallToolResult {
	st, _ := json.Marshal(roundTrip{Run: run, WaitRun: w.RunID, Wait: w.ID})
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputKey: elicitParams(w)}, RequestState: string(st)}
}

// maxRequestState bounds the request state a client sends back.
const maxRequestState = 1024

// resume is the next round of a call that asked for a decision: the
// person's answer is applied to the wait asked (if it is still open) and
// the call follows its run on, as before it asked.
func (s *Server) resume(ctx context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
	var st roundTrip
	if len(req.Params.RequestState) > maxRequestState || json.Unmarshal([]byte(req.Params.RequestState), &st) != nil || st.Run == "" || st.WaitRun == "" || st.Wait == "" {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, "requestState is not one this server gave")
	}
	a := asked{}
	ws, err := s.d.RunWaits(ctx, st.Run)
	if err != nil {
		return withRun(apiRefusal(err), st.Run)
	}
	for _, w := range ws {
		if w.RunID != st.WaitRun || w.ID != st.Wait || !w.NeedsDecision() {
			continue
		}
		// Still open: nobody decided it elsewhere meanwhile.
		ans, _ := req.Params.InputResponses[inputKey].(*mcp.ElicitResult)
		out, ok := s.applyAnswer(ctx, w, ans)
		if out != nil {
			return withRun(out, st.Run)
		}
		a[waitKey(w)] = askDecided
		if !ok {
			a[waitKey(w)] = askDismissed
		}
	}
	return s.follow(ctx, req, st.Run, a)
}

// applyAnswer applies the person's answer to w. decided is false when
// nothing was decided (the form dismissed, or no answer); out is the
// daemon's refusal, if any.
func (s *Server) applyAnswer(ctx context.Context, w apitypes.HumanWait, ans *mcp.ElicitResult) (out *mcp.CallToolResult, decided bool) {
	if ans == nil {
		return nil, false
	}
	switch ans.Action {
	case "accept":
		d, _ := ans.Content["decision"].(string)
		reason, _ := ans.Content["reason"].(string)
		switch d {
		case "approve":
			return s.decide(ctx, w, true, nil, ""), true
		case "reject":
			return s.decide(ctx, w, false, nil, reason), true
		}
		return nil, false
	case "decline":
		return s.decide(ctx, w, false, nil, reasonDeclined), true
	}
	return nil, false // cancel: dismissed, nothing decided
}

func elicitMessage(w apitypes.HumanWait) string {
	msg := fmt.Sprintf("weir run %s (flow %s) waits at %s for your decision", w.RunID, w.Flow, w.Node)
	if w.Kind == apitypes.WaitApproval {
		msg = fmt.Sprintf("weir run %s (flow %s): an agent at %s proposes a tool call; approve it?", w.RunID, w.Flow, w.Node)
	}
	if len(w.Shown) > 0 {
		msg += ":\n" + escape.Cut(string(w.Shown), maxShownBytes)
	}
	return msg
}

func waiting(v *apitypes.Run, ws []apitypes.HumanWait) *mcp.CallToolResult {
	var lines []string
	list := make([]map[string]any, 0, len(ws))
	for _, w := range ws {
		tool, line := howToEnd(v.ID, w)
		entry := map[string]any{"run_id": w.RunID, "wait": w.ID, "kind": w.Kind, "flow": w.Flow, "node": w.Node, "until": w.Until, "tool": tool}
		if w.Digest != "" {
			entry["digest"] = w.Digest // the proposal an agent's approval shows
		}
		list = append(list, entry)
		lines = append(lines, line)
	}
	text := fmt.Sprintf("run %s is waiting for a person; it goes on once someone decides:\n%s\nRead %s%s for its state.",
		v.ID, strings.Join(lines, "\n"), RunURIPrefix, v.ID)
	return result(map[string]any{"run_id": v.ID, "phase": v.Phase, "waits": list}, text, false)
}

// settledByOps says whether w ends by an operation on the run (an unknown
// outcome resolved, an exhausted task redriven, a budget raised) rather
// than a decision.
func settledByOps(w apitypes.HumanWait) bool {
	return w.Kind == apitypes.WaitUnknown || w.Kind == apitypes.WaitExhausted || w.Kind == apitypes.WaitBudget
}

// howToEnd names the tool that ends the wait w of run id and says how,
// by that tool and by the CLI.
func howToEnd(id string, w apitypes.HumanWait) (string, string) {
	until := w.Until.Format(time.RFC3339)
	switch w.Kind {
	case apitypes.WaitUnknown:
		return ResolveTool, fmt.Sprintf("  the outcome of a call is unknown: look where its effect would be, then call %s with {\"run_id\": %q, \"wait\": %q, \"happened\": true, \"result\": ...} or \"happened\": false, or run: weir run resolve %s %s --happened [--result JSON] | --not-happened   (before %s)",
			ResolveTool, w.RunID, w.ID, w.RunID, w.ID, until)
	case apitypes.WaitExhausted:
		var shown struct{ Task string }
		_ = json.Unmarshal(w.Shown, &shown)
		return RedriveTool, fmt.Sprintf("  a task used up its tries: fix the cause, then call %s with {\"task_ids\": [%q]}, or run: weir deadletter redrive %s",
			RedriveTool, shown.Task, shown.Task)
	case apitypes.WaitBudget:
		return RaiseBudgetTool, fmt.Sprintf("  the run's budget cannot cover its agent's next turn (%s): its owner calls %s with {\"run_id\": %q, \"add\": N}, or runs: weir run budget %s --add N",
			escape.Cut(string(w.Shown), maxShownBytes), RaiseBudgetTool, w.RunID, w.RunID)
	}
	return ApproveTool, fmt.Sprintf("  call %s or %s with {\"run_id\": %q, \"wait\": %q}, or run: weir run approve %s %s [--payload JSON]   or   weir run reject %s %s --reason TEXT   (before %s)",
		ApproveTool, RejectTool, id, w.ID, w.RunID, w.Node, w.RunID, w.Node, until)
}

// decisionSchema is the form an elicitation asks for: flat, primitive
// properties only, as the spec allows.
var decisionSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"decision":{"type":"string","title":"Decision","enum":["approve","reject"]},` +
	`"reason":{"type":"string","title":"Reason (for a rejection)"}},"required":["decision"]}`)
