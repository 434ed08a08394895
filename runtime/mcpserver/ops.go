package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// The recovery operations (DESIGN §12, operations on runs), offered as
// tools so that an agent or a person in an MCP client settles what went
// wrong where they already look: each is one call of the daemon's Go
// client, exactly the CLI's, and the daemon's refusal (its code and
// message) is the tool's error.
const (
	// ResolveTool answers a run's unknown wait: the call happened (with
	// its result) or did not (it is made once more).
	ResolveTool = "resolve_outcome"
	// RedriveTool sends dead letters back to the queue.
	RedriveTool = "redrive"
	// ForkTool starts a new run from a node visit of an ended run.
	ForkTool = "fork_run"
	// RaiseBudgetTool raises a run's budget: a run parked on a budget
	// wait goes on.
	RaiseBudgetTool = "raise_budget"
)

// maxListed bounds the entries of a list an operation's answer carries
// in its structured content (redrive results, a fork's copied nodes and
// reruns); the counts are always whole.
const maxListed = 100

const resolveSchema = `{"type":"object","properties":{` +
	`"run_id":{"type":"string"},` +
	`"wait":{"type":"string","description":"the unknown wait's id, NODE@VISIT.unknown.N"},` +
	`"happened":{"type":"boolean","description":"true: the call had its effect (the node goes on with result); false: it did not (the call is made once more)"},` +
	`"result":{"description":"the call's result when it happened (null when left out), checked against the tool's output schema"},` +
	`"reason":{"type":"string","description":"why: journaled on the run with who answered"}},` +
	`"required":["run_id","wait","happened"],"additionalProperties":false}`

const redriveSchema = `{"type":"object","properties":{` +
	`"task_ids":{"type":"array","items":{"type":"string"},"description":"dead letters by task id"},` +
	`"flow":{"type":"string","description":"every dead letter of this flow"},` +
	`"tool":{"type":"string","description":"every dead letter of this tool"},` +
	`"all":{"type":"boolean","description":"every dead letter of yours"},` +
	`"since":{"type":"string","description":"only those dead-lettered since: an RFC 3339 time or a duration back from now (1h)"},` +
	`"reason":{"type":"string"},` +
	`"request_id":{"type":"string","description":"the same id makes a retried redrive the same request"}},` +
	`"additionalProperties":false}`

const forkSchema = `{"type":"object","properties":{` +
	`"run_id":{"type":"string","description":"the run to fork"},` +
	`"from":{"type":"string","description":"the fork point: NODE (its latest visit) or NODE@VISIT"},` +
	`"input":{"description":"replaces the run's input (checked against the flow's input schema); left out: the run's"},` +
	`"version":{"type":"string","enum":["pinned","latest"],"description":"the flow version the fork runs (pinned: the run's)"},` +
	`"allow_effects":{"type":"boolean","description":"accept that at-most-once calls after the fork point are made again; without it such a fork is refused (E_FORK_EFFECTS names each)"},` +
	`"reason":{"type":"string"},` +
	`"request_id":{"type":"string","description":"the same id makes a retried fork return the same run"}},` +
	`"required":["run_id","from"],"additionalProperties":false}`

const raiseSchema = `{"type":"object","properties":{` +
	`"run_id":{"type":"string"},` +
	`"add":{"type":"integer","minimum":1,"description":"budget units to add: a positive integer, within your budget_per_hour"},` +
	`"reason":{"type":"string","description":"why: journaled on the run with who raised it"},` +
	`"request_id":{"type":"string","description":"the same id makes a retried raise the same request, never applied twice"}},` +
	`"required":["run_id","add"],"additionalProperties":false}`

func (s *Server) addOpsTools() {
	s.mcp.AddTool(&mcp.Tool{
		Name: ResolveTool,
		Description: "Settle the unknown outcome of a weir run's at-most-once call (a wait NODE@VISIT.unknown.N), once: " +
			"happened true puts the node on its ok wire with result, never calling again; false makes the call once more. Look where the effect would be first.",
		InputSchema: json.RawMessage(resolveSchema),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, s.resolveOutcome)
	s.mcp.AddTool(&mcp.Tool{
		Name: RedriveTool,
		Description: "Send weir dead letters back to the queue, tries counted afresh, same idempotency key: by task_ids, " +
			"or all of a flow, a tool or yours (since a time). Answers per task: redriven, or refused with a code.",
		InputSchema: json.RawMessage(redriveSchema),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, s.redrive)
	s.mcp.AddTool(&mcp.Tool{
		Name: ForkTool,
		Description: "Start a new weir run from a node visit of a run (NODE or NODE@VISIT), perhaps with a new input: work before it is copied, " +
			"never run again. Refused with E_FORK_EFFECTS naming each at-most-once call made again, unless allow_effects.",
		InputSchema: json.RawMessage(forkSchema),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, s.forkRun)
	s.mcp.AddTool(&mcp.Tool{
		Name: RaiseBudgetTool,
		Description: "Raise a weir run's budget by add units (its owner only, within the owner's budget_per_hour): a run parked on a budget wait " +
			"(NODE@VISIT.budget.N) goes on, spending no more than the new budget.",
		InputSchema: json.RawMessage(raiseSchema),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, s.raiseBudget)
}

func (s *Server) raiseBudget(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		RunID string `json:"run_id"`
		apitypes.BudgetAddRequest
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.RunID == "" || in.Add <= 0 {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, `want {"run_id": "...", "add": N}, N a positive integer`), nil
	}
	res, err := s.d.RunBudgetAdd(ctx, in.RunID, in.BudgetAddRequest)
	if err != nil {
		return withRun(apiRefusal(err), in.RunID), nil
	}
	text := fmt.Sprintf("run %s's budget raised from %d to %d", res.RunID, res.Before, res.Budget)
	if res.Existing {
		text = fmt.Sprintf("run %s's budget was raised before by the same request id (now %d); nothing changed", res.RunID, res.Budget)
	}
	if res.Wait != "" {
		text += fmt.Sprintf("; its budget wait %s goes on", res.Wait)
	}
	text += fmt.Sprintf(". Call %s with {\"run_id\": %q} to follow the run.", WaitRunTool, res.RunID)
	return result(map[string]any{"run_id": res.RunID, "before": res.Before, "budget": res.Budget, "wait": res.Wait, "existing": res.Existing}, text, false), nil
}

func (s *Server) resolveOutcome(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		RunID    string          `json:"run_id"`
		Wait     string          `json:"wait"`
		Happened *bool           `json:"happened"`
		Result   json.RawMessage `json:"result"`
		Reason   string          `json:"reason"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.RunID == "" || in.Wait == "" || in.Happened == nil {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, `want {"run_id": "...", "wait": "...", "happened": true|false}`), nil
	}
	res, err := s.d.Resolve(ctx, in.RunID, in.Wait, *in.Happened, in.Result, in.Reason)
	if err != nil {
		return withRun(apiRefusal(err), in.RunID), nil
	}
	what := "did not happen: the call is made once more"
	if res.Happened {
		what = "happened: the node goes on with the result"
	}
	return result(map[string]any{"run_id": res.RunID, "node": res.Node, "wait": res.Wait, "happened": res.Happened},
		fmt.Sprintf("run %s, wait %s resolved: the call %s. Call %s with {\"run_id\": %q} to follow the run.",
			res.RunID, res.Wait, what, WaitRunTool, res.RunID), false), nil
}

func (s *Server) redrive(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in apitypes.RedriveRequest
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, `want {"task_ids": [...]} or {"flow": "..."}, {"tool": "..."}, {"all": true}: `+err.Error()), nil
	}
	res, err := s.d.Redrive(ctx, in)
	if err != nil {
		return apiRefusal(err), nil
	}
	return redriveAnswer(res), nil
}

// redriveAnswer says per task what the redrive did: every count whole,
// the first maxListed results, and the first refusals in the text.
func redriveAnswer(res *apitypes.RedriveResponse) *mcp.CallToolResult {
	redriven := 0
	var refusals textbound.List
	for _, r := range res.Results {
		if r.Redriven {
			redriven++
		} else if r.Error != nil {
			refusals.Add(r.TaskID + " " + r.Error.Code + ": " + r.Error.Message)
		} else {
			refusals.Add(r.TaskID)
		}
	}
	listed := res.Results
	if len(listed) > maxListed {
		listed = listed[:maxListed]
	}
	refusedN := len(res.Results) - redriven
	text := fmt.Sprintf("%d redriven, %d refused", redriven, refusedN)
	if refusedN > 0 {
		text += ": " + refusals.Join("; ")
	}
	if res.More {
		text += " (more dead letters match: call again)"
	}
	return result(map[string]any{"redriven": redriven, "refused": refusedN, "more": res.More,
		"results": listed, "results_omitted": len(res.Results) - len(listed)}, text, false)
}

func (s *Server) forkRun(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		RunID string `json:"run_id"`
		apitypes.ForkRequest
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.RunID == "" || in.From == "" {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, `want {"run_id": "...", "from": "NODE" or "NODE@VISIT"}`), nil
	}
	if string(in.Input) == "null" {
		in.Input = nil
	}
	res, err := s.d.Fork(ctx, in.RunID, in.ForkRequest)
	if err != nil {
		return withRun(apiRefusal(err), in.RunID), nil
	}
	return forkAnswer(res), nil
}

// forkAnswer names the new run, where it began and, bounded, what it
// copied and what runs again.
func forkAnswer(res *apitypes.ForkResult) *mcp.CallToolResult {
	from := fmt.Sprintf("%s@%d", res.ForkedFrom.Node, res.ForkedFrom.Visit)
	text := fmt.Sprintf("run %s forked from run %s at %s", res.RunID, res.ForkedFrom.RunID, from)
	if res.Existing {
		text += " (made before by the same request id)"
	}
	if n := len(res.Effects); n > 0 {
		var sites textbound.List
		for _, e := range res.Effects {
			sites.Add(e.Node + " (" + e.Tool + ", " + e.Pos + ")")
		}
		text += fmt.Sprintf("; %d at-most-once calls run again: %s", n, sites.Join(", "))
	}
	text += fmt.Sprintf(". Call %s with {\"run_id\": %q} to follow it.", WaitRunTool, res.RunID)
	return result(map[string]any{"run_id": res.RunID, "existing": res.Existing, "forked_from": res.ForkedFrom, "version": res.Version,
		"copied": capList(res.Copied), "not_copied": capList(res.NotCopied), "reruns": capList(res.Reruns), "effects": capList(res.Effects),
		"counts": map[string]int{"copied": len(res.Copied), "not_copied": len(res.NotCopied), "reruns": len(res.Reruns), "effects": len(res.Effects)},
		"follow": map[string]any{"tool": WaitRunTool, "resource": RunURIPrefix + res.RunID}}, text, false)
}

// capList is the first maxListed entries of l (never nil: a client reads
// an empty list, not null).
func capList[T any](l []T) []T {
	if len(l) > maxListed {
		return l[:maxListed]
	}
	if l == nil {
		return []T{}
	}
	return l
}
