package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// opsStub answers the recovery operations as the daemon does for one
// run, run_1: its wait x@1.unknown.1 is answered once; a fork from send
// (an at-most-once task) is refused without allow_effects; the dead
// letter t-dead is redriven, any other named one is not dead, and all
// matches manyDead of them.
type opsStub struct {
	calls    []string // each operation as asked: "resolve RUN WAIT HAPPENED RESULT REASON", ...
	resolved bool
}

const manyDead = 250

func (d *daemonStub) opsCalls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ops.calls)
}

func (d *daemonStub) Resolve(_ context.Context, runID, waitID string, happened bool, result json.RawMessage, reason string) (*apitypes.ResolveResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ops.calls = append(d.ops.calls, fmt.Sprintf("resolve %s %s %v %s %s", runID, waitID, happened, result, reason))
	switch {
	case runID != "run_1":
		return nil, &client.Error{Code: apitypes.CodeNotFound, Class: apitypes.ClassProtocol, Message: "no run " + runID, HTTPStatus: http.StatusNotFound}
	case d.ops.resolved:
		return nil, &client.Error{Code: apitypes.CodeAlreadyDecided, Class: apitypes.ClassProtocol,
			Message: "wait " + waitID + " of run " + runID + " was answered before", HTTPStatus: http.StatusConflict}
	}
	d.ops.resolved = true
	return &apitypes.ResolveResponse{RunID: runID, Node: "x", Wait: waitID, Happened: happened}, nil
}

func (d *daemonStub) Redrive(_ context.Context, req apitypes.RedriveRequest) (*apitypes.RedriveResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, _ := json.Marshal(req)
	d.ops.calls = append(d.ops.calls, "redrive "+string(b))
	res := &apitypes.RedriveResponse{Results: []apitypes.RedriveResult{}}
	if req.All {
		for i := range manyDead {
			res.Results = append(res.Results, apitypes.RedriveResult{TaskID: fmt.Sprintf("t-%d", i), Redriven: i%2 == 0,
				Error: &apitypes.ErrorBody{Code: apitypes.CodeQueueFull, Message: strings.Repeat("the queue is full ", 50)}})
			if i%2 == 0 {
				res.Results[i].Error = nil
			}
		}
		res.More = true
		return res, nil
	}
	if len(req.TaskIDs) == 0 {
		return nil, &client.Error{Code: apitypes.CodeBadRequest, Class: apitypes.ClassProtocol, Message: "name the dead letters", HTTPStatus: http.StatusBadRequest}
	}
	for _, id := range req.TaskIDs {
		r := apitypes.RedriveResult{TaskID: id, RunID: "run_1", Node: "x", Wait: "x@1.exhausted.1", Redriven: id == "t-dead"}
		if !r.Redriven {
			r.Error = &apitypes.ErrorBody{Code: "E_NOT_DEAD", Message: "task " + id + " is not dead-lettered"}
		}
		res.Results = append(res.Results, r)
	}
	return res, nil
}

func (d *daemonStub) Fork(_ context.Context, id string, req apitypes.ForkRequest) (*apitypes.ForkResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, _ := json.Marshal(req)
	d.ops.calls = append(d.ops.calls, "fork "+id+" "+string(b))
	if strings.HasPrefix(req.From, "send") && !req.AllowEffects {
		return nil, &client.Error{Code: apitypes.CodeForkEffects, Class: apitypes.ClassProtocol, HTTPStatus: http.StatusConflict,
			Message: "the fork would call at-most-once tools again: send (testkit.once, f.star:2:5); allow it with allow_effects"}
	}
	copied := make([]string, 300)
	for i := range copied {
		copied[i] = fmt.Sprintf("n%d", i)
	}
	return &apitypes.ForkResult{RunID: "run_2", ForkedFrom: apitypes.ForkRef{RunID: id, Node: "send", Visit: 1}, Version: "v1",
		Copied: copied, Reruns: []string{"send", "after"},
		Effects: []apitypes.EffectSite{{Flow: "f", Node: "send", Kind: "task", Tool: "testkit.once", Pos: "f.star:2:5"}}}, nil
}

func (d *daemonStub) RunBudgetAdd(_ context.Context, runID string, req apitypes.BudgetAddRequest) (*apitypes.BudgetAddResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, _ := json.Marshal(req)
	d.ops.calls = append(d.ops.calls, "budget "+runID+" "+string(b))
	if req.Add > 1000 {
		return nil, &client.Error{Code: apitypes.CodeOwnerBudget, Class: apitypes.ClassProtocol, HTTPStatus: http.StatusTooManyRequests,
			Message: `owner "alice" has spent 49000 of its budget_per_hour 50000`}
	}
	return &apitypes.BudgetAddResponse{RunID: runID, Before: 10, Budget: 10 + req.Add, Wait: "a@1.budget.1"}, nil
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// toolError is the code and message of a tool's error answer.
func toolError(t *testing.T, res *mcp.CallToolResult) (string, string) {
	t.Helper()
	em, _ := structuredOf(t, res)["error"].(map[string]any)
	if !res.IsError || em == nil {
		t.Fatalf("not an error: %+v", structuredOf(t, res))
	}
	code, _ := em["code"].(string)
	msg, _ := em["message"].(string)
	return code, msg
}

// The three operations are listed with input schemas that require what
// each needs.
func TestOpsToolsAreListed(t *testing.T) {
	t.Parallel()
	cs := connect(t, New(&daemonStub{}, Options{}))
	want := map[string][]string{ResolveTool: {"run_id", "wait", "happened"}, RedriveTool: nil, ForkTool: {"run_id", "from"}, RaiseBudgetTool: {"run_id", "add"}}
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		req, ok := want[tl.Name]
		if !ok {
			continue
		}
		delete(want, tl.Name)
		b, _ := json.Marshal(tl.InputSchema)
		var schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil || !slices.Equal(schema.Required, req) || len(schema.Properties) == 0 {
			t.Errorf("%s: schema %s (%v), want required %v", tl.Name, b, err, req)
		}
		if tl.Description == "" || tl.Annotations == nil || tl.Annotations.DestructiveHint == nil {
			t.Errorf("%s: no description or destructive hint: %+v", tl.Name, tl)
		}
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v", want)
	}
}

// resolve_outcome passes the answer, its result and reason to the
// daemon's Resolve; a second answer is the daemon's E_ALREADY_DECIDED
// with its message; a call that does not say happened is refused
// before the daemon is asked.
func TestResolveOutcomeTool(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	cs := connect(t, New(d, Options{}))
	args := map[string]any{"run_id": "run_1", "wait": "x@1.unknown.1", "happened": true, "result": map[string]any{"id": "msg-42"}, "reason": "in the outbox"}
	res := call(t, cs, ResolveTool, args)
	m := structuredOf(t, res)
	if res.IsError || m["run_id"] != "run_1" || m["wait"] != "x@1.unknown.1" || m["node"] != "x" || m["happened"] != true {
		t.Fatalf("resolve: %+v", m)
	}
	if !strings.Contains(textOf(res), "happened") || !strings.Contains(textOf(res), WaitRunTool) {
		t.Errorf("resolve's text %q", textOf(res))
	}
	if got := d.opsCalls(); !slices.Equal(got, []string{`resolve run_1 x@1.unknown.1 true {"id":"msg-42"} in the outbox`}) {
		t.Errorf("the daemon was asked %q", got)
	}
	res = call(t, cs, ResolveTool, map[string]any{"run_id": "run_1", "wait": "x@1.unknown.1", "happened": false})
	if code, msg := toolError(t, res); code != apitypes.CodeAlreadyDecided || msg != "wait x@1.unknown.1 of run run_1 was answered before" ||
		structuredOf(t, res)["run_id"] != "run_1" {
		t.Errorf("a second answer: %s %q", code, msg)
	}
	res = call(t, cs, ResolveTool, map[string]any{"run_id": "run_9", "wait": "x@1.unknown.1", "happened": false})
	if code, _ := toolError(t, res); code != apitypes.CodeNotFound {
		t.Errorf("another's run: %s", code)
	}
	n := len(d.opsCalls())
	for _, bad := range []map[string]any{{"run_id": "run_1", "wait": "x@1.unknown.1"}, {"wait": "x@1.unknown.1", "happened": true},
		{"run_id": "run_1", "wait": "x@1.unknown.1", "happened": "yes"}} {
		if code, _ := toolError(t, call(t, cs, ResolveTool, bad)); code != apitypes.CodeBadInput {
			t.Errorf("%v: %s, want %s", bad, code, apitypes.CodeBadInput)
		}
	}
	if len(d.opsCalls()) != n {
		t.Errorf("bad calls reached the daemon: %q", d.opsCalls()[n:])
	}
}

// redrive passes the selectors to the daemon's Redrive and answers per
// task; an answer of many results is bounded (listed and quoted) with
// its counts whole; a request refused whole is the tool's error.
func TestRedriveTool(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	cs := connect(t, New(d, Options{}))
	res := call(t, cs, RedriveTool, map[string]any{"task_ids": []string{"t-dead", "t-live"}, "reason": "upstream fixed", "request_id": "r-1"})
	m := structuredOf(t, res)
	if res.IsError || m["redriven"] != 1.0 || m["refused"] != 1.0 || m["more"] != false {
		t.Fatalf("redrive: %+v", m)
	}
	if text := textOf(res); text != "1 redriven, 1 refused: t-live E_NOT_DEAD: task t-live is not dead-lettered" {
		t.Errorf("redrive's text %q", text)
	}
	if got := d.opsCalls(); !slices.Equal(got, []string{`redrive {"task_ids":["t-dead","t-live"],"reason":"upstream fixed","request_id":"r-1"}`}) {
		t.Errorf("the daemon was asked %q", got)
	}

	res = call(t, cs, RedriveTool, map[string]any{"all": true, "since": "1h"})
	m = structuredOf(t, res)
	listed, _ := m["results"].([]any)
	if res.IsError || m["redriven"] != float64(manyDead/2) || m["refused"] != float64(manyDead/2) || m["more"] != true ||
		len(listed) != maxListed || m["results_omitted"] != float64(manyDead-maxListed) {
		t.Fatalf("redrive all: %d listed, %+v", len(listed), m["results_omitted"])
	}
	if text := textOf(res); len(text) > 8<<10 || !strings.Contains(text, "and 105 more") || !strings.HasSuffix(text, "(more dead letters match: call again)") {
		t.Errorf("redrive all's text (%d bytes): %.300q", len(text), text)
	}

	if code, msg := toolError(t, call(t, cs, RedriveTool, map[string]any{})); code != apitypes.CodeBadRequest || msg != "name the dead letters" {
		t.Errorf("a redrive naming nothing: %s %q", code, msg)
	}
	if code, _ := toolError(t, call(t, cs, RedriveTool, map[string]any{"task_ids": "t-dead"})); code != apitypes.CodeBadInput {
		t.Errorf("task_ids not a list: %s", code)
	}
}

// fork_run passes the fork point, input, leave and request id to the
// daemon's Fork; E_FORK_EFFECTS comes back as the tool's error with the
// daemon's message naming each call; a fork made answers the new run,
// its lists bounded and its counts whole.
func TestForkRunTool(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	cs := connect(t, New(d, Options{}))
	res := call(t, cs, ForkTool, map[string]any{"run_id": "run_1", "from": "send@1", "reason": "again"})
	if code, msg := toolError(t, res); code != apitypes.CodeForkEffects || !strings.Contains(msg, "send (testkit.once, f.star:2:5)") {
		t.Errorf("a fork with effects: %s %q", code, msg)
	}
	res = call(t, cs, ForkTool, map[string]any{"run_id": "run_1", "from": "send@1", "input": map[string]any{"amount": 40},
		"allow_effects": true, "reason": "fixed amount", "request_id": "f-1", "version": "pinned"})
	m := structuredOf(t, res)
	copied, _ := m["copied"].([]any)
	counts, _ := m["counts"].(map[string]any)
	from, _ := m["forked_from"].(map[string]any)
	if res.IsError || m["run_id"] != "run_2" || from["run_id"] != "run_1" || from["visit"] != 1.0 || len(copied) != maxListed ||
		counts["copied"] != 300.0 || counts["effects"] != 1.0 {
		t.Fatalf("fork: %+v", m)
	}
	if text := textOf(res); !strings.Contains(text, "run run_2 forked from run run_1 at send@1") || !strings.Contains(text, "send (testkit.once, f.star:2:5)") {
		t.Errorf("fork's text %q", text)
	}
	want := []string{
		`fork run_1 {"from":"send@1","reason":"again"}`,
		`fork run_1 {"from":"send@1","input":{"amount":40},"version":"pinned","allow_effects":true,"request_id":"f-1","reason":"fixed amount"}`,
	}
	if got := d.opsCalls(); !slices.Equal(got, want) {
		t.Errorf("the daemon was asked\n%q\nwant\n%q", got, want)
	}
	for _, bad := range []map[string]any{{"run_id": "run_1"}, {"from": "send"}, {"run_id": "run_1", "from": "send", "allow_effects": "yes"}} {
		if code, _ := toolError(t, call(t, cs, ForkTool, bad)); code != apitypes.CodeBadInput {
			t.Errorf("%v: %s", bad, code)
		}
	}
	if n := len(d.opsCalls()); n != 2 {
		t.Errorf("bad forks reached the daemon: %q", d.opsCalls()[2:])
	}
}

// opsWait is w made a wait of kind (unknown or exhausted), as the daemon
// lists it.
func opsWait(w apitypes.HumanWait, kind string) apitypes.HumanWait {
	w.Kind, w.ID = kind, w.ID+"."+kind+".1"
	w.Shown = json.RawMessage(`{"tool":"testkit.once","arguments":{},"key":"run_1/send/1"}`)
	switch kind {
	case apitypes.WaitExhausted:
		w.Shown = json.RawMessage(`{"task":"t-dead","tool":"testkit.fail","tries":2}`)
	case apitypes.WaitApproval:
		// An agent's proposed call: its id places the call, and it shows
		// the digest of its arguments.
		w.ID = w.Node + "@1.1.0"
		w.Shown = json.RawMessage(`{"tool":"mail.send","arguments":{"to":"ann"},"digest":"d-1","turn":1,"call":0}`)
		w.Digest = "d-1"
	}
	return w
}

// A call whose run parks on an unknown or an exhausted wait answers at
// once with the tool that ends it (resolve_outcome, redrive) and the
// command, whether or not its client can be asked for decisions: neither
// is a decision to elicit, and the run cannot go on by itself.
func TestCallNamesTheOpsToolOfAWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, tool, says string
	}{
		{apitypes.WaitUnknown, ResolveTool, `"wait": "send@1.unknown.1", "happened": true`},
		{apitypes.WaitExhausted, RedriveTool, `{"task_ids": ["t-dead"]}`},
	} {
		for _, elicit := range []bool{false, true} {
			t.Run(fmt.Sprint(tc.kind, " elicitation ", elicit), func(t *testing.T) {
				t.Parallel()
				d := &daemonStub{waitAt: "send", waitKind: tc.kind}
				d.setFlows(objectFlow("f", `{}`))
				var o *mcp.ClientOptions
				if elicit {
					o = &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						t.Error("a wait that is no decision was elicited")
						return &mcp.ElicitResult{Action: "cancel"}, nil
					}}
				}
				cs := clientOf(t, New(d, Options{Poll: time.Millisecond}), o)
				res := call(t, cs, "f", map[string]any{})
				m := structuredOf(t, res)
				waits, _ := m["waits"].([]any)
				var w map[string]any
				if len(waits) == 1 {
					w, _ = waits[0].(map[string]any)
				}
				if res.IsError || m["phase"] != string(apitypes.PhaseWaiting) || w["kind"] != tc.kind || w["tool"] != tc.tool {
					t.Fatalf("the answer: %+v", m)
				}
				if text := textOf(res); !strings.Contains(text, tc.tool) || !strings.Contains(text, tc.says) || strings.Contains(text, ApproveTool) {
					t.Errorf("the answer's text %q", text)
				}
			})
		}
	}
}

// raise_budget passes the raise to the daemon's RunBudgetAdd and says the
// budget wait goes on; the daemon's refusal is the tool's error; a raise
// that is not a positive integer is refused before the daemon is asked.
func TestRaiseBudgetTool(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	cs := connect(t, New(d, Options{}))
	res := call(t, cs, RaiseBudgetTool, map[string]any{"run_id": "run_1", "add": 5, "reason": "worth it", "request_id": "r-1"})
	if m := structuredOf(t, res); res.IsError || m["budget"] != 15.0 || m["wait"] != "a@1.budget.1" || !strings.Contains(textOf(res), "goes on") {
		t.Fatalf("raise: %+v %q", m, textOf(res))
	}
	res = call(t, cs, RaiseBudgetTool, map[string]any{"run_id": "run_1", "add": 5000})
	if code, msg := toolError(t, res); code != apitypes.CodeOwnerBudget || !strings.Contains(msg, "budget_per_hour") {
		t.Errorf("a raise past the owner's window: %s %q", code, msg)
	}
	for _, bad := range []map[string]any{{"run_id": "run_1", "add": 0}, {"run_id": "run_1", "add": -3}, {"add": 5}, {"run_id": "run_1", "add": "5"}} {
		if code, _ := toolError(t, call(t, cs, RaiseBudgetTool, bad)); code != apitypes.CodeBadInput {
			t.Errorf("raise %v: %s, want %s", bad, code, apitypes.CodeBadInput)
		}
	}
	if got := d.opsCalls(); !slices.Equal(got, []string{`budget run_1 {"add":5,"reason":"worth it","request_id":"r-1"}`, `budget run_1 {"add":5000}`}) {
		t.Errorf("the daemon was asked %q", got)
	}
}
