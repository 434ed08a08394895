package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

const forkSrc = `
flow(name = "chain", input = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}, nodes = [
    task("a", tool = "kit.fail", args = lambda ctx: {"times": 0}, next = "b"),
    task("b", tool = "kit.fail", args = lambda ctx: {"times": 0}, next = "c"),
    task("c", tool = "kit.echo", args = lambda ctx: {"a": ctx.results["a"]["tries"], "n": ctx.input["n"]}),
])

flow(name = "mailer", nodes = [
    task("a", tool = "kit.fail", args = lambda ctx: {"times": 0}, next = "send"),
    task("send", tool = "kit.send", args = lambda ctx: {"to": "x@y.z"}, at_most_once = True, next = "c"),
    task("c", tool = "kit.echo", args = lambda ctx: {"done": True}),
])
`

// calls is how many times kit.fail was called with the key of run's
// node's visit.
func (b *testBundle) calls(run, node string, visit int) int {
	var n int
	b.kit.read(func() { n = b.kit.fails[idemKey(run, node, visit)] })
	return n
}

func (b *testBundle) fork(t *testing.T, p ForkParams) (*ForkResult, error) {
	t.Helper()
	if p.Owner == "" {
		p.Owner = "alice"
	}
	return b.eng.Ops().Fork(context.Background(), p)
}

func (b *testBundle) finished(t *testing.T, flow, input string) string {
	t.Helper()
	id := b.start(t, flow, input, "")
	if r := b.waitTerminal(t, id); r.Phase != store.PhaseCompleted {
		t.Fatalf("source run %s: %s %+v", id, r.Phase, r.Error)
	}
	return id
}

// A fork at a middle node carries the results before it, never calls
// their tools again, runs the rest under its own keys, and records where
// it came from on both runs.
func TestUnitForkCopiesTheWorkBeforeThePoint(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	src := b.finished(t, "chain", `{"n": 1}`)
	res, err := b.fork(t, ForkParams{RunID: src, From: "b", Input: json.RawMessage(`{"n": 5}`), Reason: "new n", By: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Existing || res.From != (store.ForkRef{RunID: src, Node: "b", Visit: 1}) || !slices.Equal(res.Copied, []string{"a"}) ||
		!slices.Equal(res.Reruns, []string{"b", "c"}) || len(res.Effects) != 0 {
		t.Fatalf("answer %+v", res)
	}
	run := b.waitTerminal(t, res.RunID)
	if run.Phase != store.PhaseCompleted || string(run.Output) != `{"a":1,"n":5}` {
		t.Fatalf("fork %s %s %+v", run.Phase, run.Output, run.Error)
	}
	if a, bb := b.calls(res.RunID, "a", 1), b.calls(res.RunID, "b", 1); a != 0 || bb != 1 {
		t.Errorf("the fork called a %d times (copied: want 0) and b %d times (want 1)", a, bb)
	}
	if a := b.calls(src, "a", 1); a != 1 {
		t.Errorf("the source's a was called %d times, want 1", a)
	}
	if run.ForkedFrom == nil || *run.ForkedFrom != res.From || run.StartedBy != "fork:"+src+":b@1" || run.Owner != "alice" {
		t.Errorf("lineage %+v started by %q", run.ForkedFrom, run.StartedBy)
	}
	if evs := b.events(t, res.RunID); !slices.Contains(evs, evForked) {
		t.Errorf("fork timeline %v", evs)
	}
	if evs := b.events(t, src); evs[len(evs)-1] != evForkMade {
		t.Errorf("source timeline %v: want fork_made last", evs)
	}
	// The same request id is the same fork.
	first, err := b.fork(t, ForkParams{RunID: src, From: "c", RequestID: "retry-me"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.fork(t, ForkParams{RunID: src, From: "c@1", RequestID: "retry-me"})
	if err != nil || !again.Existing || again.RunID != first.RunID || again.From.Node != "c" {
		t.Fatalf("retry: %+v %v, first %s", again, err, first.RunID)
	}
	if _, err := b.fork(t, ForkParams{RunID: src, From: "c", RequestID: "retry-me", Input: json.RawMessage(`{"n": 9}`)}); ErrorCode(err) != CodeDedupConflict {
		t.Errorf("the same request id with another input: %v", err)
	}
}

// At-most-once calls after the point are refused unless allowed, and the
// answer names them; before the point they are copied, never repeated.
func TestUnitForkEffects(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	src := b.finished(t, "mailer", `{}`)
	_, err := b.fork(t, ForkParams{RunID: src, From: "a"})
	if ErrorCode(err) != CodeForkEffects || !strings.Contains(err.Error(), "mailer.send calls kit.send") || !strings.Contains(err.Error(), ".star:") {
		t.Fatalf("fork before the send: %v", err)
	}
	after, err := b.fork(t, ForkParams{RunID: src, From: "c"})
	if err != nil {
		t.Fatalf("fork after the send: %v", err)
	}
	b.waitTerminal(t, after.RunID)
	if n := b.sends(); n != 1 {
		t.Fatalf("sent %d times after a fork past the send, want 1", n)
	}
	allowed, err := b.fork(t, ForkParams{RunID: src, From: "a", AllowEffects: true})
	if err != nil || len(allowed.Effects) != 1 || allowed.Effects[0].Node != "send" || allowed.Effects[0].Tool != "kit.send" {
		t.Fatalf("allowed fork %+v %v", allowed, err)
	}
	if r := b.waitTerminal(t, allowed.RunID); r.Phase != store.PhaseCompleted {
		t.Fatalf("allowed fork %s %+v", r.Phase, r.Error)
	}
	if n := b.sends(); n != 2 {
		t.Fatalf("sent %d times, want 2: the allowed fork sends once more", n)
	}
}

// Bad requests are refused with a code and change nothing.
func TestUnitForkRefusals(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	src := b.finished(t, "chain", `{"n": 1}`)
	before := len(b.events(t, src))
	for _, tt := range []struct {
		name string
		p    ForkParams
		code string
		in   string
	}{
		{"another owner's run", ForkParams{Owner: "bob", RunID: src, From: "b"}, CodeNotFound, "retention"},
		{"no such run", ForkParams{RunID: "run_nope", From: "b"}, CodeNotFound, "run_nope"},
		{"no such node", ForkParams{RunID: src, From: "bb"}, CodeForkPoint, `did you mean "b"`},
		{"a visit never made", ForkParams{RunID: src, From: "b@2"}, CodeForkPoint, "reached node b 1 time"},
		{"a visit that is no number", ForkParams{RunID: src, From: "b@x"}, CodeForkPoint, "number"},
		{"no point", ForkParams{RunID: src}, CodeForkPoint, "name a node"},
		{"input failing the schema", ForkParams{RunID: src, From: "b", Input: json.RawMessage(`{"n": "five"}`)}, CodeBadInput, "chain"},
		{"input that is no JSON", ForkParams{RunID: src, From: "b", Input: json.RawMessage(`{`)}, CodeBadInput, "JSON"},
		{"a reserved request id", ForkParams{RunID: src, From: "b", RequestID: "fork:x"}, CodeBadRequestID, "reserved"},
		{"an unknown version", ForkParams{RunID: src, From: "b", Version: "newest"}, CodeBadRequest, "pinned"},
	} {
		_, err := b.fork(t, tt.p)
		if ErrorCode(err) != tt.code || !strings.Contains(err.Error(), tt.in) {
			t.Errorf("%s: %v, want %s mentioning %q", tt.name, err, tt.code, tt.in)
		}
	}
	if after := len(b.events(t, src)); after != before {
		t.Errorf("refusals changed the source's timeline: %d events, then %d", before, after)
	}
	runs, err := b.eng.List(context.Background(), "alice", store.RunListParams{})
	if err != nil || len(runs) != 1 {
		t.Errorf("runs after refusals: %d %v", len(runs), err)
	}
	audited := false
	for _, ev := range b.audit(t) {
		audited = audited || (ev.Detail["action"] == "fork" && ev.Detail["run"] == src)
	}
	if !audited {
		t.Error("bob's fork of alice's run was not audited")
	}
}

// A fork on the latest version runs it when the point and the copied
// results fit, and is refused naming what does not fit otherwise.
func TestUnitForkLatestVersion(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	src := b.finished(t, "chain", `{"n": 1}`)
	pinned := b.runRecord(t, src).Version
	b.register(t, strings.Replace(forkSrc, `{"a": ctx.results["a"]["tries"], "n": ctx.input["n"]}`, `{"v2": ctx.results["a"]["tries"]}`, 1))
	res, err := b.fork(t, ForkParams{RunID: src, From: "c", Version: ForkLatest})
	if err != nil || res.Version == pinned {
		t.Fatalf("latest fork %+v %v", res, err)
	}
	if r := b.waitTerminal(t, res.RunID); string(r.Output) != `{"v2":1}` {
		t.Fatalf("latest fork output %s %+v", r.Output, r.Error)
	}
	res, err = b.fork(t, ForkParams{RunID: src, From: "c"})
	if err != nil || res.Version != pinned {
		t.Fatalf("pinned fork %+v %v", res, err)
	}
	b.register(t, strings.Replace(forkSrc, `task("a", tool = "kit.fail", args = lambda ctx: {"times": 0}, next = "b")`, `task("a", tool = "kit.echo", next = "b")`, 1))
	_, err = b.fork(t, ForkParams{RunID: src, From: "c", Version: ForkLatest})
	if ErrorCode(err) != CodeForkPoint || !strings.Contains(err.Error(), `a: its result was made by tool "kit.fail"`) {
		t.Fatalf("incompatible latest: %v", err)
	}
}

// The plan follows the wires a loop took: a node that completed again
// after the point keeps only a later result, which is not copied.
func TestPlanForkLoops(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, `
flow(name = "loop", nodes = [
    task("a", tool = "kit.echo", next = "br", max_visits = 3),
    branch("br", cond = lambda ctx: False, then = "a", otherwise = "c"),
    task("c", tool = "kit.echo"),
])`)
	fe, err := b.eng.book.latest(context.Background(), "loop")
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ, node, wire string) *store.Event {
		e := &store.Event{Type: typ, Node: node}
		if wire != "" {
			e.Detail = map[string]any{"wire": wire}
		}
		return e
	}
	// a1 br1(->a) a2 br2(->c) c1
	evs := []*store.Event{ev(evNodeDone, "a", ""), ev(evNodeDone, "br", "a"), ev(evLeased, "", ""), ev(evNodeDone, "a", ""), ev(evNodeDone, "br", "c"), ev(evNodeDone, "c", "")}
	cont := &continuation{Results: map[string]json.RawMessage{"a": json.RawMessage(`2`), "c": json.RawMessage(`3`)}}
	for _, tt := range []struct {
		node             string
		visit            int
		copied, notCopid []string
		visits           map[string]int
	}{
		{"a", 1, nil, nil, map[string]int{"a": 1}},
		{"br", 1, nil, []string{"a"}, map[string]int{"a": 1, "br": 1}},
		{"a", 2, nil, []string{"a"}, map[string]int{"a": 2, "br": 1}},
		{"br", 2, []string{"a"}, nil, map[string]int{"a": 2, "br": 2}},
		{"c", 1, []string{"a"}, nil, map[string]int{"a": 2, "br": 2, "c": 1}},
	} {
		plan, err := planFork(fe.flow, cont, evs, tt.node, tt.visit)
		if err != nil {
			t.Errorf("%s@%d: %v", tt.node, tt.visit, err)
			continue
		}
		if !slices.Equal(plan.copied, tt.copied) || !slices.Equal(plan.notCopied, tt.notCopid) || !mapsEqual(plan.cont.Visits, tt.visits) || plan.cont.Node != tt.node {
			t.Errorf("%s@%d: copied %v not %v visits %v node %s", tt.node, tt.visit, plan.copied, plan.notCopied, plan.cont.Visits, plan.cont.Node)
		}
	}
	if _, err := planFork(fe.flow, cont, evs, "a", 3); ErrorCode(err) != CodeForkPoint {
		t.Errorf("a@3: %v", err)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A run's lineage is its family: the root source and its forks,
// transitively, whichever member is asked about; others' runs are not in it.
func TestUnitForkLineage(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	src := b.finished(t, "chain", `{"n": 1}`)
	other := b.finished(t, "chain", `{"n": 2}`)
	f1, err := b.fork(t, ForkParams{RunID: src, From: "b"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitTerminal(t, f1.RunID)
	f2, err := b.fork(t, ForkParams{RunID: f1.RunID, From: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{src, f2.RunID} {
		fam, err := b.eng.Ops().Lineage(context.Background(), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range fam {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, []string{src, f1.RunID, f2.RunID}) || slices.Contains(ids, other) {
			t.Errorf("lineage of %s: %v, want %v", id, ids, []string{src, f1.RunID, f2.RunID})
		}
	}
	if _, err := b.eng.Ops().Lineage(context.Background(), "bob", src); ErrorCode(err) != CodeNotFound {
		t.Errorf("bob's lineage of alice's run: %v", err)
	}
}

// A fork after an agent node copies its turns with its result: the fork
// never asks the model again for them, and shows them as its own. A fork
// at the agent asks anew, under its own run.
func TestUnitForkCopiesAgentTurns(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "kv.get", `{"key":"k"}`)),
		answer("k1", use(20, 2)),
		// The fork at the agent's own turns.
		answer("k2", use(30, 3)),
	)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	src := b.run(t, "agent_then", `{"suffix": ""}`)
	if src.Phase != store.PhaseCompleted || string(src.Output) != `{"value":"v-k1"}` {
		t.Fatalf("source %s %s %+v", src.Phase, src.Output, src.Error)
	}
	ops := b.eng.Ops()
	after, err := ops.Fork(context.Background(), ForkParams{Owner: "alice", RunID: src.ID, From: "after", Input: json.RawMessage(`{"suffix": "-x"}`)})
	if err != nil || !slices.Equal(after.Copied, []string{"a"}) {
		t.Fatalf("fork after the agent: %+v %v", after, err)
	}
	if run := b.terminal(t, after.RunID); run.Phase != store.PhaseCompleted || string(run.Output) != `{"value":"v-k1-x"}` {
		t.Fatalf("fork after the agent %s %s %+v", run.Phase, run.Output, run.Error)
	}
	if n := len(m.asked()); n != 2 {
		t.Fatalf("the model was asked %d turns, want the source's 2 only: the fork copies them", n)
	}
	srcTurns, forkTurns := b.turns(t, src.ID), b.turns(t, after.RunID)
	if len(srcTurns) != 2 || len(forkTurns) != 2 {
		t.Fatalf("turns: source %d, fork %d, want 2 each", len(srcTurns), len(forkTurns))
	}
	for i, ft := range forkTurns {
		if ft.RunID != after.RunID || string(ft.Response) != string(srcTurns[i].Response) {
			t.Errorf("fork turn %d %+v, want the source's under the fork's run", i, ft)
		}
	}
	at, err := ops.Fork(context.Background(), ForkParams{Owner: "alice", RunID: src.ID, From: "a", Input: json.RawMessage(`{"suffix": ""}`)})
	if err != nil || len(at.Copied) != 0 {
		t.Fatalf("fork at the agent: %+v %v", at, err)
	}
	if run := b.terminal(t, at.RunID); run.Phase != store.PhaseCompleted || string(run.Output) != `{"value":"v-k2"}` {
		t.Fatalf("fork at the agent %s %s %+v", run.Phase, run.Output, run.Error)
	}
	if n := len(m.asked()); n != 3 {
		t.Errorf("the model was asked %d turns, want one more for the fork at the agent", n)
	}
}
