package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/sdk/chat"
)

// runawayWaitOf waits until run id is parked on its one open decision, a
// runaway wait with id want, and returns it with its diagnosis.
func (b *agentBundle) runawayWaitOf(t *testing.T, id, want string) (HumanWait, runawayDiagnosis) {
	t.Helper()
	ws := b.openDecisionsOf(t, id, 1)
	if ws[0].ID != want || ws[0].Kind != WaitRunaway || !ws[0].NeedsDecision() {
		t.Fatalf("open decision %+v, want the runaway wait %s", ws[0], want)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		return b.st.View(context.Background(), func(tx store.Tx) error {
			tasks, err := tx.TaskListByRun(id)
			if err != nil {
				return err
			}
			if len(tasks) != 1 || tasks[0].Leased || tasks[0].WaitKind != WaitRunaway {
				return fmt.Errorf("run %s's tasks %+v, want its step parked on its runaway wait", id, tasks)
			}
			return nil
		})
	})
	var d runawayDiagnosis
	if err := json.Unmarshal(ws[0].Shown, &d); err != nil {
		t.Fatalf("shown %s: %v", ws[0].Shown, err)
	}
	return ws[0], d
}

// sameCalls is n turns that each ask for kv.get of key k, then an answer.
func sameCalls(n int) []chat.Response {
	return append(kvTurns(n, use(100, 10)), answer("done", use(10, 1)))
}

// TestAgentRunawayParksAtTheRepeatLimit: an agent that makes the same
// call answered alike parks on a runaway wait at the 5th by default
// (the model was asked 5 turns, not a 6th) and at the 3rd when the node
// says repeat_limit = 3. The wait shows the repeated call, the count
// against the limit, the turns it spans and the tokens spent since; the
// run's events record it.
func TestAgentRunawayParksAtTheRepeatLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flow  string
		limit int
	}{{"looping", 5}, {"looping3", 3}} {
		t.Run(tc.flow, func(t *testing.T) {
			t.Parallel()
			m := newFakeModel(sameCalls(8)...)
			b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
			id := b.submit(t, tc.flow, `{}`)
			_, d := b.runawayWaitOf(t, id, "a@1.runaway.1")
			if n := len(m.asked()); n != tc.limit {
				t.Errorf("the model was asked %d turns, want %d", n, tc.limit)
			}
			if n := m.called("kv.get"); n != tc.limit {
				t.Errorf("kv.get ran %d times, want %d", n, tc.limit)
			}
			want := runawayDiagnosis{Why: runawayRepeat, Tool: "kv.get", Arguments: json.RawMessage(`{"key":"k"}`),
				Digest: ProposalDigest(json.RawMessage(`{"key":"k"}`)), ResultDigest: ProposalDigest(json.RawMessage(`{"value":"v-k"}`)),
				Count: tc.limit, Limit: tc.limit, FirstTurn: 1, LastTurn: tc.limit,
				InputTokens: 100 * int64(tc.limit), OutputTokens: 10 * int64(tc.limit)}
			d.CostSince = 0
			if string(mustJSON(d)) != string(mustJSON(want)) {
				t.Errorf("diagnosis\n %s\nwant\n %s", mustJSON(d), mustJSON(want))
			}
			if evs := b.events(t, id, evRunaway); len(evs) != 1 || evs[0].Detail["wait"] != "a@1.runaway.1" {
				t.Errorf("runaway events %+v", evs)
			}
			run, err := b.eng.Get(context.Background(), "alice", id)
			if err != nil || run.Phase != store.PhaseWaiting {
				t.Errorf("run %+v %v, want waiting", run, err)
			}
		})
	}
}

// TestAgentRunawayChangingResultDoesNotCount: the same call answered
// with a different result each time (a counter that moves) is the agent
// rightly reading again something that changes: seven of them do not
// trip the guard, and the agent answers.
func TestAgentRunawayChangingResultDoesNotCount(t *testing.T) {
	t.Parallel()
	var script []chat.Response
	for i := range 7 {
		script = append(script, askTools(use(10, 1), tc(fmt.Sprint("c", i), "kv.tick", `{"key":"k"}`)))
	}
	m := newFakeModel(append(script, answer("moved", use(10, 1)))...)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	r := resultOf(t, b.run(t, "looping", `{}`))
	if r.Answer != "moved" || r.Turns != 8 || m.called("kv.tick") != 7 {
		t.Errorf("result %+v, kv.tick ran %d times; want the answer after 7 reads", r, m.called("kv.tick"))
	}
}

// TestAgentRunawayErrorsInARow: three calls in a row that end with the
// same error code trip the guard by default, whatever their arguments.
func TestAgentRunawayErrorsInARow(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "kv.fail", `{"n":1}`)),
		askTools(use(10, 1), tc("c2", "kv.fail", `{"n":2}`)),
		askTools(use(10, 1), tc("c3", "kv.fail", `{"n":3}`)),
		answer("never", use(10, 1)),
	)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "looping", `{}`)
	_, d := b.runawayWaitOf(t, id, "a@1.runaway.1")
	if d.Why != runawayErrors || d.ErrorCode != "E_KV_DOWN" || d.Count != 3 || d.Limit != 3 || d.FirstTurn != 1 || d.LastTurn != 3 || string(d.Arguments) != `{"n":3}` {
		t.Errorf("diagnosis %+v", d)
	}
	if n := len(m.asked()); n != 3 {
		t.Errorf("the model was asked %d turns, want 3", n)
	}
}

// TestAgentRunawayResumeWithNote: a note that is not {"note": TEXT} is
// refused and leaves the wait open; the approval with a note resumes the
// loop: the model's next request ends with the note, the guard counts
// afresh (four more identical calls do not trip it again), and the agent
// answers. A second decision is E_ALREADY_DECIDED.
func TestAgentRunawayResumeWithNote(t *testing.T) {
	t.Parallel()
	m := newFakeModel(sameCalls(10)...)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "looping", `{}`)
	b.runawayWaitOf(t, id, "a@1.runaway.1")
	resume := func(payload string) error {
		return b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: "a@1.runaway.1", Approve: true, Payload: json.RawMessage(payload)})
	}
	if err := resume(`{"notes":"x"}`); codeOf(err) != CodeBadRequest {
		t.Fatalf("a payload that is not a note: %v, want %s", err, CodeBadRequest)
	}
	if err := resume(`{"note":"` + strings.Repeat("n", maxRunawayNoteBytes+1) + `"}`); codeOf(err) != CodeBadRequest {
		t.Fatalf("a note past maxRunawayNoteBytes: %v, want %s", err, CodeBadRequest)
	}
	if err := b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: "a", Approve: true, Respond: true}); codeOf(err) != CodeBadRequest {
		t.Fatalf("a response on a runaway wait: %v, want %s", err, CodeBadRequest)
	}
	b.runawayWaitOf(t, id, "a@1.runaway.1")
	if err := resume(`{"note":"The key k will not change; stop reading it."}`); err != nil {
		t.Fatalf("resuming: %v", err)
	}
	// Four more identical calls after the resume, then the 5th since it
	// trips the guard again, on a new wait.
	b.runawayWaitOf(t, id, "a@1.runaway.2")
	reqs := m.asked()
	if len(reqs) != 10 {
		t.Fatalf("the model was asked %d turns, want 10", len(reqs))
	}
	after := reqs[5].Messages
	if last := after[len(after)-1]; last.Role != chat.RoleUser || last.Content != "The key k will not change; stop reading it." {
		t.Errorf("the 6th request ends with %+v, want the note", last)
	}
	if turns := b.turns(t, id); turns[4].Note == "" || turns[5].Note != "" {
		t.Errorf("the note is journaled on turn %d, want on turn 5", len(turns))
	}
	if err := b.decide(id, "a@1.runaway.2", true, ""); err != nil {
		t.Fatalf("resuming again: %v", err)
	}
	r := resultOf(t, b.terminal(t, id))
	if r.Answer != "done" || r.Turns != 11 {
		t.Errorf("result %+v", r)
	}
	if err := resume(""); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("a second decision: %v, want %s", err, CodeAlreadyDecided)
	}
}

// TestAgentRunawayReject: rejecting the runaway wait ends the node with
// E_AGENT_RUNAWAY, carrying the reason.
func TestAgentRunawayReject(t *testing.T) {
	t.Parallel()
	m := newFakeModel(sameCalls(8)...)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "looping", `{}`)
	b.runawayWaitOf(t, id, "a@1.runaway.1")
	if err := b.decide(id, "a", false, "looping for nothing"); err != nil {
		t.Fatal(err)
	}
	run := b.terminal(t, id)
	if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeAgentRunaway || !strings.Contains(run.Error.Message, "looping for nothing") {
		t.Errorf("run %s %+v, want failed with %s and the reason", run.Phase, run.Error, CodeAgentRunaway)
	}
}

// TestAgentRunawayFail: on_runaway = "fail" takes the error wire with
// E_AGENT_RUNAWAY at the 5th identical call, naming the call and the
// count, and opens no wait.
func TestAgentRunawayFail(t *testing.T) {
	t.Parallel()
	m := newFakeModel(sameCalls(8)...)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "looping_fail", `{}`)
	if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeAgentRunaway ||
		!strings.Contains(run.Error.Message, `kv.get {"key":"k"} was answered the same 5 times (repeat_limit 5)`) {
		t.Fatalf("run %s %+v, want failed with %s", run.Phase, run.Error, CodeAgentRunaway)
	}
	if n := len(m.asked()); n != 5 {
		t.Errorf("the model was asked %d turns, want 5", n)
	}
	if evs := b.events(t, run.ID, evRunaway); len(evs) != 1 || evs[0].Detail["wait"] != nil {
		t.Errorf("runaway events %+v, want one without a wait", evs)
	}
}

// TestAgentRunawayCountsFromTheJournal: the engine stops (as a kill -9
// would) once the 4th identical call's end is journaled and the 5th turn
// was asked (its answer held back: the turn waits for its retry), and a
// new engine over the same data parks at the 5th identical call, not at
// the 9th: the counts are read from the turn records.
func TestAgentRunawayCountsFromTheJournal(t *testing.T) {
	t.Parallel()
	m := newFakeModel(sameCalls(12)...)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	asked5 := make(chan struct{})
	m.onTurn = func() {
		if len(m.requests) == 5 {
			m.rateLimited = 1 // the 5th turn's answer waits for its retry
			close(asked5)
		}
	}
	id := b.submit(t, "looping", `{}`)
	<-asked5
	testutil.Eventually(t, 30*time.Second, func() error {
		return b.st.View(context.Background(), func(tx store.Tx) error {
			tasks, err := tx.TaskListByRun(id)
			if err != nil {
				return err
			}
			if len(tasks) != 1 || tasks[0].Leased {
				return fmt.Errorf("tasks %+v, want the step waiting for its retry", tasks)
			}
			return nil
		})
	})
	b.crash(t)
	b2 := b.reopen(t)
	// The clock has not moved: the retry is not due yet.
	if n, turns := m.called("kv.get"), len(b2.turns(t, id)); n != 4 || turns != 4 {
		t.Fatalf("kv.get ran %d times and %d turns are journaled at the crash, want 4 and 4", n, turns)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		b2.clock.Advance(time.Second) // past the retry's backoff
		if n := m.called("kv.get"); n != 5 {
			return fmt.Errorf("kv.get ran %d times", n)
		}
		return nil
	})
	_, d := b2.runawayWaitOf(t, id, "a@1.runaway.1")
	if d.Count != 5 || d.LastTurn != 5 {
		t.Errorf("diagnosis %+v, want the 5th call in turn 5", d)
	}
	if n := m.called("kv.get"); n != 5 {
		t.Errorf("kv.get ran %d times, want 5", n)
	}
	if n := len(m.asked()); n != 6 {
		t.Errorf("the model was asked %d times, want 6 (the 5th turn twice, no 6th)", n)
	}
}

// TestAgentRunawayRegistration: repeat_limit = 0, error_limit = 1 and an
// on_runaway that is neither "ask" nor "fail" are refused at
// registration at their argument's line; a string where a number is
// wanted at the agent's call, as any parameter of the wrong type.
func TestAgentRunawayRegistration(t *testing.T) {
	t.Parallel()
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), newFakeModel())
	for _, tc := range []struct{ arg, want string }{
		{`repeat_limit = 0`, `r.star:3:`},
		{`repeat_limit = "5"`, `r.star:2:5:`},
		{`error_limit = 1`, `r.star:3:`},
		{`on_runaway = "stop"`, `r.star:3:`},
	} {
		src := "flow(name = \"r\", nodes = [\n" +
			"    agent(\"a\", model = \"small\", prompt = \"Go\", tools = [\"kv.get\"], max_turns = 3,\n" +
			"          " + tc.arg + "),\n])\n"
		res, err := b.eng.Register(context.Background(), []SourceFile{{Path: "r.star", Src: src}})
		if err == nil && len(res.Diagnostics) == 0 {
			t.Errorf("%s was registered", tc.arg)
			continue
		}
		got := fmt.Sprint(err, res.Diagnostics)
		if !strings.Contains(got, tc.want) || !strings.Contains(got, strings.Fields(tc.arg)[0]) {
			t.Errorf("%s: %s, want a refusal at %s naming it", tc.arg, got, tc.want)
		}
	}
}

// TestDetectRunaway covers the guard's decision over journaled turns
// without an engine: what counts, what does not, and what trips first.
func TestDetectRunaway(t *testing.T) {
	t.Parallel()
	type call struct {
		tool, args, result, code, edited string
		pending                          bool
	}
	turns := func(calls ...call) []*store.AgentTurn {
		var out []*store.AgentTurn
		for i, c := range calls {
			msg := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{tc("c", c.tool, c.args)}}
			ac := store.AgentCall{ID: "c", Tool: c.tool, Done: !c.pending}
			switch {
			case c.pending:
			case c.code != "":
				ac.Error = &store.RunError{Code: c.code}
			default:
				ac.Result = json.RawMessage(c.result)
			}
			if c.edited != "" {
				ac.Edited = json.RawMessage(c.edited)
			}
			out = append(out, &store.AgentTurn{Turn: i + 1, Response: mustJSON(msg), Calls: []store.AgentCall{ac},
				Usage: store.AgentUsage{InputTokens: 10, OutputTokens: 1}})
		}
		return out
	}
	same := call{tool: "kv.get", args: `{"key":"k"}`, result: `{"v":1}`}
	spelt := call{tool: "kv.get", args: `{ "key" : "k" }`, result: `{"v": 1}`} // the same, canonically
	fail := func(code string) call { return call{tool: "kv.fail", args: `{}`, code: code} }
	rep := func(c call, n int) []call {
		var out []call
		for range n {
			out = append(out, c)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		calls []call
		want  string // why:count:first:last, "" for no trip
	}{
		{"four alike", rep(same, 4), ""},
		{"five alike, however spelt", append(rep(same, 3), spelt, spelt), "repeat:5:1:5"},
		{"results that change", []call{same, {tool: "kv.get", args: `{"key":"k"}`, result: `{"v":2}`}, same, {tool: "kv.get", args: `{"key":"k"}`, result: `{"v":3}`}, same, {tool: "kv.get", args: `{"key":"k"}`, result: `{"v":4}`}}, ""},
		{"other arguments", []call{same, same, same, same, {tool: "kv.get", args: `{"key":"j"}`, result: `{"v":1}`}}, ""},
		{"an edit counts as what ran", append(rep(same, 4), call{tool: "kv.get", args: `{"key":"x"}`, edited: `{"key":"k"}`, result: `{"v":1}`}), "repeat:5:1:5"},
		{"a pending call does not count", append(rep(same, 4), call{tool: "kv.get", args: `{"key":"k"}`, pending: true}), ""},
		{"three errors in a row", []call{fail("E1"), fail("E2"), fail("E2"), fail("E2")}, "errors:3:2:4"},
		{"a result breaks the row", []call{fail("E1"), fail("E1"), same, fail("E1")}, ""},
		{"refusals neither count nor break", []call{fail("E1"), fail(CodeBudgetExhausted), fail(CodeRejected), fail("E1"), fail("E1")}, "errors:3:1:5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := detectRunaway(turns(tt.calls...), 5, 3)
			got := ""
			if d != nil {
				got = fmt.Sprintf("%s:%d:%d:%d", d.Why, d.Count, d.FirstTurn, d.LastTurn)
				if want := int64(10 * (d.LastTurn - d.FirstTurn + 1)); d.InputTokens != want {
					t.Errorf("input tokens since %d, want %d", d.InputTokens, want)
				}
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAgentRunawayCancel: a run parked on its runaway wait is cancelled
// like any parked run, and the model is not asked again.
func TestAgentRunawayCancel(t *testing.T) {
	t.Parallel()
	m := newFakeModel(sameCalls(8)...)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "looping", `{}`)
	b.runawayWaitOf(t, id, "a@1.runaway.1")
	if _, err := b.eng.Cancel(context.Background(), "alice", id); err != nil {
		t.Fatal(err)
	}
	if run := b.terminal(t, id); run.Phase != store.PhaseCancelled {
		t.Errorf("run %s %+v, want cancelled", run.Phase, run.Error)
	}
	if n := len(m.asked()); n != 5 {
		t.Errorf("the model was asked %d turns, want 5", n)
	}
}

// BenchmarkDetectRunaway is the guard's cost before one model turn of a
// 100-turn visit whose turns each made one call answered differently (so
// nothing trips and every call is read).
func BenchmarkDetectRunaway(b *testing.B) {
	var turns []*store.AgentTurn
	for i := range 100 {
		msg := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{tc("c", "kv.get", fmt.Sprintf(`{"key":"k%d","opts":{"deep":true}}`, i%3))}}
		turns = append(turns, &store.AgentTurn{Turn: i + 1, Response: mustJSON(msg),
			Calls: []store.AgentCall{{ID: "c", Tool: "kv.get", Done: true, Result: mustJSON(map[string]any{"value": i, "pad": strings.Repeat("x", 200)})}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if d := detectRunaway(turns, 5, 3); d != nil {
			b.Fatal(d)
		}
	}
}
