package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// builtinTools are the server's own tools: a flow of one of these names
// is not offered.
var builtinTools = map[string]bool{CancelRunTool: true, WaitRunTool: true, ApproveTool: true, RejectTool: true}

// Bounds of what a decision shows and takes.
const (
	// maxShownBytes bounds what an elicitation quotes of what the wait
	// shows (the flow's request, an agent's proposed call).
	maxShownBytes = 2048
	// maxReasonBytes bounds a rejection's reason taken from a client.
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
		Description: "Approve an open human wait of a weir run (the wait id or node a call answered), then wait for the run as its call does. " +
			"payload, if given, becomes the waiting node's result.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"run_id":{"type":"string"},"wait":{"type":"string","description":"the wait's id or node"},"payload":{}},"required":["run_id","wait"],"additionalProperties":false}`),
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
	var in struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.RunID == "" {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, `want {"run_id": "..."}`), nil
	}
	return s.follow(ctx, req, in.RunID), nil
}

// decideTool is the handler of ApproveTool (approve) or RejectTool. The
// wait is looked up among the run's open waits (its descendants' too),
// so a child run's wait is decided on the child, and the call follows
// the run it was given.
func (s *Server) decideTool(approve bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			RunID   string          `json:"run_id"`
			Wait    string          `json:"wait"`
			Payload json.RawMessage `json:"payload"`
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
		if res := s.decide(ctx, w, approve, in.Payload, in.Reason); res != nil {
			return withRun(res, in.RunID), nil
		}
		return s.follow(ctx, req, in.RunID), nil
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

// canElicit says whether the call's client can be asked for a decision
// now: it declared elicitation (form), and its session can take a
// request from the server (a stateless one cannot).
func (s *Server) canElicit(req *mcp.CallToolRequest) bool {
	if s.o.Stateless || req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil &&
		(ip.Capabilities.Elicitation.Form != nil || ip.Capabilities.Elicitation.URL == nil)
}

func waitKey(w apitypes.HumanWait) string { return w.RunID + "/" + w.ID }

// nextToAsk is the first open decision of ws not decided already.
func nextToAsk(ws []apitypes.HumanWait, decided map[string]bool) (apitypes.HumanWait, bool) {
	for _, w := range ws {
		if w.NeedsDecision() && !decided[waitKey(w)] {
			return w, true
		}
	}
	return apitypes.HumanWait{}, false
}

// decisionSchema is the form an elicitation asks for: flat, primitive
// properties only, as the spec allows.
var decisionSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"decision":{"type":"string","title":"Decision","enum":["approve","reject"]},` +
	`"reason":{"type":"string","title":"Reason (for a rejection)"}},"required":["decision"]}`)

// elicit asks the person for w's decision, until deadline at most, and
// applies it. nil means decided (the run goes on); otherwise the answer
// the call gives: the waiting result when nobody decided (dismissed,
// unanswered, or the client failed to ask), or the daemon's refusal.
func (s *Server) elicit(ctx context.Context, req *mcp.CallToolRequest, deadline time.Time, v *apitypes.Run, ws []apitypes.HumanWait, w apitypes.HumanWait) *mcp.CallToolResult {
	ectx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	res, err := req.Session.Elicit(ectx, &mcp.ElicitParams{Mode: "form", Message: elicitMessage(w), RequestedSchema: decisionSchema})
	if err != nil {
		if ctx.Err() == nil {
			s.o.Logger.Info("asking for a decision by elicitation", "run", w.RunID, "wait", w.ID, "error", err.Error())
		}
		return waiting(v, ws)
	}
	var out *mcp.CallToolResult
	switch res.Action {
	case "accept":
		d, _ := res.Content["decision"].(string)
		reason, _ := res.Content["reason"].(string)
		switch d {
		case "approve":
			out = s.decide(ctx, w, true, nil, "")
		case "reject":
			out = s.decide(ctx, w, false, nil, reason)
		default:
			return waiting(v, ws)
		}
	case "decline":
		out = s.decide(ctx, w, false, nil, reasonDeclined)
	default: // cancel: dismissed, nothing decided
		return waiting(v, ws)
	}
	if out != nil {
		return withRun(out, v.ID)
	}
	return nil
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
		list = append(list, map[string]any{"run_id": w.RunID, "wait": w.ID, "kind": w.Kind, "flow": w.Flow, "node": w.Node, "until": w.Until})
		lines = append(lines, fmt.Sprintf("  call %s or %s with {\"run_id\": %q, \"wait\": %q}, or run: weir run approve %s %s [--payload JSON]   or   weir run reject %s %s --reason TEXT   (before %s)",
			ApproveTool, RejectTool, v.ID, w.ID, w.RunID, w.Node, w.RunID, w.Node, w.Until.Format(time.RFC3339)))
	}
	text := fmt.Sprintf("run %s is waiting for a human decision; it goes on once someone decides:\n%s\nRead %s%s for its state.",
		v.ID, strings.Join(lines, "\n"), RunURIPrefix, v.ID)
	return result(map[string]any{"run_id": v.ID, "phase": v.Phase, "waits": list}, text, false)
}
