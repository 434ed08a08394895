package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

func (b *bundle) register(t *testing.T, src string) {
	t.Helper()
	res, err := b.eng.Register(context.Background(), []SourceFile{{Path: "later.star", Src: src}})
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %v %s", err, res.Diagnostics)
	}
}

// runPastHold starts flow, lets it park at its "hold" wait, applies
// change (registrations the static check cannot relate to the parked
// run), approves the hold and returns the finished run.
func (b *bundle) runPastHold(t *testing.T, flow string, change func()) *store.Run {
	t.Helper()
	ctx := context.Background()
	id := b.start(t, flow, `{}`, "")
	b.wait(t, id, "waiting", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	change()
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: id, Node: "hold", Approve: true}); err != nil {
		t.Fatal(err)
	}
	return b.waitTerminal(t, id)
}

// The run-time limits hold where registration could not see the problem:
// flows registered one by one, a parent version pinned by a parked run.
func TestRuntimeDepthAndCycle(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, `
flow(name = "b", nodes = [task("t", tool = "testkit.echo")])
flow(name = "c", nodes = [task("t", tool = "testkit.echo")])
flow(name = "y", nodes = [task("t", tool = "testkit.echo")])
`)
	b.register(t, `flow(name = "a", max_depth = 1, nodes = [wait("hold", next = "call"), subflow("call", flow = "b")])`)
	b.register(t, `flow(name = "x", nodes = [wait("hold", next = "call"), subflow("call", flow = "y")])`)

	run := b.runPastHold(t, "a", func() {
		// b now calls c: a's chain becomes a -> b -> c, two deep.
		b.register(t, `flow(name = "b", nodes = [subflow("deeper", flow = "c")])`)
	})
	if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeRuntimeDepth {
		t.Errorf("depth: %s %+v, want failed with %s", run.Phase, run.Error, CodeRuntimeDepth)
	}

	run = b.runPastHold(t, "x", func() {
		// x's latest version calls nothing, so y may call x statically;
		// the parked run of the old x still calls y (and registration
		// says it could not go on under the new x).
		res, err := b.eng.Register(context.Background(), []SourceFile{{Path: "later.star", Src: `flow(name = "x", nodes = [task("t", tool = "testkit.echo")])`}})
		if err != nil || len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != CodeParkedIncompatible {
			t.Fatalf("register x: %v %s", err, res.Diagnostics)
		}
		b.register(t, `flow(name = "y", nodes = [subflow("back", flow = "x")])`)
	})
	if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeRuntimeCycle {
		t.Errorf("cycle: %s %+v, want failed with %s", run.Phase, run.Error, CodeRuntimeCycle)
	}
}

// A deleted child loses its reference but never the parent's wait: the
// parent's node takes its error wire with E_CHILD_VANISHED.
func TestVanishedChild(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, subflowSrc+`
flow(name = "parent_vanish", nodes = [
    subflow("call", flow = "approval", next = "done", error = "gone"),
    task("done", tool = "testkit.echo"),
    task("gone", tool = "testkit.echo", args = lambda ctx: {"gone": True}),
])
`)
	id := b.start(t, "parent_vanish", `{}`, "")
	waits := b.oneHumanWait(t, id, "waiting on its child", nil)
	child := waits[0].RunID
	b.vanish(t, child)
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v", run.Phase, run.Error)
	}
	if code := b.failCode(t, id); code != CodeChildVanished {
		t.Errorf("node failed with %q, want %s", code, CodeChildVanished)
	}
}

func TestFallbackClockOnlyShortens(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"", "24h0m0s"}, {"0", "24h0m0s"}, {"-5s", "24h0m0s"}, {"soon", "24h0m0s"}, {"48h", "24h0m0s"},
		{"2s", "2s"}, {"24h", "24h0m0s"},
	} {
		t.Setenv(FallbackEnv, tc.env)
		if got := subflowFallback().String(); got != tc.want {
			t.Errorf("%s=%q: %s, want %s", FallbackEnv, tc.env, got, tc.want)
		}
	}
}

func TestSubflowTimeoutCancelsChild(t *testing.T) {
	t.Parallel()
	fk := clock.NewFake(time.Now())
	b := setup(t, Config{Clock: fk}, subflowSrc+`
flow(name = "impatient", nodes = [
    subflow("call", flow = "approval", timeout = "300ms", next = "done", error = "gave_up"),
    task("done", tool = "testkit.echo"),
    task("gave_up", tool = "testkit.echo", args = lambda ctx: {"gave_up": True}),
])
`)
	ctx := context.Background()
	id := b.start(t, "impatient", `{}`, "")
	// Parked on its child, which waits for a person, until the node's
	// timeout passes: only when the clock is moved.
	b.wait(t, id, "waiting on its child", func(r *store.Run) bool {
		kids, _ := b.eng.List(ctx, "alice", store.RunListParams{ParentRunID: id})
		return r.Phase == store.PhaseWaiting && len(kids) == 1 && kids[0].Phase == store.PhaseWaiting
	})
	fk.Advance(300 * time.Millisecond)
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"gave_up":true`) {
		t.Fatalf("%s %s %+v", run.Phase, run.Output, run.Error)
	}
	kids, _ := b.eng.List(ctx, "alice", store.RunListParams{ParentRunID: id})
	if len(kids) != 1 || kids[0].Phase != store.PhaseCancelled {
		t.Fatalf("children %+v: want the overrunning child cancelled", kids)
	}
}
