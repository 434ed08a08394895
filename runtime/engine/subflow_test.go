package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/store"
)

const subflowSrc = `
flow(name = "child_echo", nodes = [
    task("c", tool = "testkit.echo", args = lambda ctx: {"got": ctx.input["v"]}),
])

flow(name = "child_fails", nodes = [
    task("c", tool = "testkit.fail", args = lambda ctx: {"times": 5}),
])

flow(name = "parent_of_failure", nodes = [
    subflow("call", flow = "child_fails", next = "done", error = "handled"),
    task("done", tool = "testkit.echo"),
    task("handled", tool = "testkit.echo", args = lambda ctx: {"handled": True}),
])

flow(name = "approval", nodes = [
    wait("approve", timeout = "1h", next = "after", error = "denied"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.results["approve"]}),
    task("denied", tool = "testkit.echo", args = lambda ctx: {"denied": True}),
])

flow(name = "parent_waits", nodes = [
    subflow("call", flow = "approval", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"child": ctx.results["call"]}),
])

flow(name = "loop_inline", nodes = [
    subflow("call", flow = "child_echo", args = lambda ctx: {"v": 1}, next = "again", error = "out", max_visits = 3),
    branch("again", cond = lambda ctx: True, then = "call", otherwise = "out"),
    task("out", tool = "testkit.echo", args = lambda ctx: {"looped": True}),
])

flow(name = "loop_suspending", nodes = [
    subflow("call", flow = "approval", next = "again", error = "out", max_visits = 2),
    branch("again", cond = lambda ctx: True, then = "call", otherwise = "out"),
    task("out", tool = "testkit.echo", args = lambda ctx: {"looped": True}),
])
`

func TestSubflowChildErrorTakesErrorWire(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, subflowSrc)
	id := b.start(t, "parent_of_failure", `{}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"handled":true`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
}

// TestSubflowInLoopWithoutSuspending: a child that finishes within the
// parent's own step never goes through the queue, even in a loop.
func TestSubflowInLoopWithoutSuspending(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, subflowSrc)
	before := b.eng.Stats().Counts["dispatched"]
	id := b.start(t, "loop_inline", `{}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"looped":true`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
	st := b.eng.Stats()
	if got := st.Counts["dispatched"] - before; got != 1 {
		t.Errorf("the scheduler dispatched %d tasks, want 1 (the parent's first): inline children must not round-trip the queue", got)
	}
	if got := st.Counts["inline_children"]; got < 3 {
		t.Errorf("%d inline children, want 3", got)
	}
	kids, _ := b.eng.List(context.Background(), "alice", store.RunListParams{ParentRunID: id})
	if len(kids) != 3 {
		t.Errorf("%d children, want 3 (max_visits)", len(kids))
	}
	evs := b.events(t, id)
	if count(evs, evNodeFailed) != 1 {
		t.Errorf("timeline %v: want the fourth visit refused once (E_MAX_VISITS)", evs)
	}
}

// TestSubflowInLoopSuspendingOnWait: the child parks on a human wait; the
// parent is woken by the child's end each time round the loop.
func TestSubflowInLoopSuspendingOnWait(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, subflowSrc)
	ctx := context.Background()
	id := b.start(t, "loop_suspending", `{}`, "")
	for round := range 2 {
		waits := b.oneHumanWait(t, id, "waiting on a child's approval", nil)
		if waits[0].RunID == id || waits[0].Node != "approve" {
			t.Fatalf("round %d: waits %+v, want the child's approve node", round, waits)
		}
		if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: waits[0].RunID, Node: "approve", Approve: true, Payload: json.RawMessage(`{"round":` + string(rune('0'+round)) + `}`)}); err != nil {
			t.Fatal(err)
		}
		b.waitTerminal(t, waits[0].RunID)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"looped":true`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
}

func TestCancelParentCancelsWaitingChild(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, subflowSrc)
	ctx := context.Background()
	id := b.start(t, "parent_waits", `{}`, "")
	waits := b.oneHumanWait(t, id, "waiting", nil)
	if a, err := b.eng.Cancel(ctx, "alice", id); err != nil || a != CancelRequested {
		t.Fatalf("cancel: %v %v", a, err)
	}
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCancelled {
		t.Fatalf("parent %s", run.Phase)
	}
	if run := b.waitTerminal(t, waits[0].RunID); run.Phase != store.PhaseCancelled {
		t.Fatalf("child %s", run.Phase)
	}
}
