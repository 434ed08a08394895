package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

const unitWaitSrc = `
flow(name = "child_echo", nodes = [
    task("c", tool = "kit.echo", args = lambda ctx: {"got": ctx.input["v"]}),
])

flow(name = "parent", nodes = [
    subflow("call", flow = "child_echo", args = lambda ctx: {"v": ctx.input["v"]}, next = "done"),
    task("done", tool = "kit.echo", args = lambda ctx: {"child": ctx.results["call"]}),
])

flow(name = "approval", nodes = [
    wait("approve", timeout = "1h", next = "after", error = "denied"),
    task("after", tool = "kit.echo", args = lambda ctx: {"payload": ctx.results["approve"]}),
    task("denied", tool = "kit.echo", args = lambda ctx: {"denied": True}),
])

flow(name = "quick_timeout", nodes = [
    wait("approve", timeout = "1s", next = "after", error = "late"),
    task("after", tool = "kit.echo"),
    task("late", tool = "kit.echo", args = lambda ctx: {"late": True}),
])

flow(name = "parent_waits", nodes = [
    subflow("call", flow = "approval", next = "done"),
    task("done", tool = "kit.echo", args = lambda ctx: {"child": ctx.results["call"]}),
])
`

func TestUnitSubflowChildOutputReachesParent(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitWaitSrc)
	id := b.start(t, "parent", `{"v": "x"}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"child":{"got":"x"}`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
	kids, _ := b.eng.List(context.Background(), "alice", store.RunListParams{ParentRunID: id})
	if len(kids) != 1 || kids[0].Depth != 1 || kids[0].Owner != "alice" || len(kids[0].Ancestors) != 1 || kids[0].Ancestors[0] != "parent" {
		t.Fatalf("child runs %+v: want one at depth 1 owned by alice with ancestors [parent]", kids)
	}
}

// A parent parked on a suspended child is woken by the child's end: the
// clock never moves in this test, so neither a tick's look at parked
// tasks nor the fallback clock can have resumed it.
func TestUnitSubflowChildWakesParent(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitWaitSrc)
	ctx := context.Background()
	id := b.start(t, "parent_waits", `{}`, "")
	waits := b.oneHumanWait(t, id, "waiting on its child", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	if waits[0].RunID == id {
		t.Fatalf("waits %+v: want the child's", waits)
	}
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: waits[0].RunID, Node: "approve", Approve: true, Payload: json.RawMessage(`{"yes":true}`)}); err != nil {
		t.Fatal(err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"yes":true`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
	if now := b.clock.Now(); !now.Equal(unitEpoch) {
		t.Fatalf("the clock moved to %v", now)
	}
}

func TestUnitWaitApproveRejectTimeout(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitWaitSrc)
	ctx := context.Background()
	waiting := func(id string) {
		b.wait(t, id, "waiting", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	}

	approved := b.start(t, "approval", `{}`, "")
	waiting(approved)
	if err := b.eng.Decide(ctx, DecideParams{Owner: "mallory", RunID: approved, Node: "approve", Approve: true}); ErrorCode(err) != CodeNotFound {
		t.Fatalf("foreign approval: %v, want %s", err, CodeNotFound)
	}
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: approved, Node: "nope", Approve: true}); ErrorCode(err) != CodeNotWaiting || !strings.Contains(err.Error(), "its open waits: approve@1 (node approve)") {
		t.Fatalf("wrong node: %v, want %s listing the open waits", err, CodeNotWaiting)
	}
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: approved, Node: "approve", Approve: true, Payload: json.RawMessage(`{"ok": 1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: approved, Node: "approve", Reason: "changed my mind"}); ErrorCode(err) != CodeAlreadyDecided {
		t.Fatalf("second decision: %v, want %s", err, CodeAlreadyDecided)
	}
	run := b.waitTerminal(t, approved)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"payload":{"ok":1}`) {
		t.Fatalf("approved: %s %s %+v", run.Phase, run.Output, run.Error)
	}
	// The wait was decided: so says a decision after the run went on,
	// by node or by wait id.
	for _, target := range []string{"approve", "approve@1"} {
		if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: approved, Node: target, Approve: true}); ErrorCode(err) != CodeAlreadyDecided {
			t.Fatalf("decision on a finished run (%s): %v, want %s", target, err, CodeAlreadyDecided)
		}
	}

	rejected := b.start(t, "approval", `{}`, "")
	waiting(rejected)
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: rejected, Node: "approve", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	if run := b.waitTerminal(t, rejected); !strings.Contains(string(run.Output), `"denied":true`) {
		t.Fatalf("rejected: %s %s", run.Phase, run.Output)
	}

	late := b.start(t, "quick_timeout", `{}`, "")
	waiting(late)
	b.clock.Advance(time.Second + b.tick)
	run = b.waitTerminal(t, late)
	if !strings.Contains(string(run.Output), `"late":true`) {
		t.Fatalf("timeout: %s %s", run.Phase, run.Output)
	}
	if code := b.failCode(t, late); code != CodeWaitTimeout {
		t.Errorf("timeout code %q, want %s", code, CodeWaitTimeout)
	}
}

// Stop closes admission at once, lets held work drain until its context
// ends, then interrupts unprotected work and gives its task back with its
// record written, and waits for protected work however long it takes; a
// new engine on the same store resumes what was given back.
func TestUnitStopDrainsGivesBackAndNeverKillsProtected(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitSrc)
	ctx := context.Background()
	plain := b.start(t, "held", `{"gate": "plain"}`, "")
	guarded := b.start(t, "guarded", `{"gate": "guarded"}`, "")
	b.kitIs(t, "both calls running", func(k *kit) bool { return k.blocked == 2 })

	grace, endGrace := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); b.eng.Stop(grace) }()
	b.wait(t, plain, "admission closed", func(*store.Run) bool { return b.eng.Health(ctx).Admission == CodeDraining })
	if _, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "held", Input: []byte(`{"gate":""}`)}); ErrorCode(err) != CodeDraining {
		t.Fatalf("a start after Stop: %v, want %s", err, CodeDraining)
	}
	// The grace ends: the plain call is interrupted and given back; the
	// protected one runs on, and Stop waits for it.
	endGrace()
	b.wait(t, plain, "given back", func(*store.Run) bool { return count(b.events(t, plain), "drained") == 1 })
	b.kit.read(func() {
		if b.kit.cancelled != 1 || b.kit.blocked != 1 {
			t.Errorf("%d calls cancelled, %d still running: want the plain one cancelled, the protected one running", b.kit.cancelled, b.kit.blocked)
		}
	})
	select {
	case <-stopped:
		t.Fatal("Stop returned while protected work was running")
	default:
	}
	b.kit.open("guarded")
	<-stopped
	if g, _ := b.eng.Get(ctx, "alice", guarded); g.Phase != store.PhaseCompleted {
		t.Fatalf("protected run %s %+v: it must never be killed", g.Phase, g.Error)
	}
	p, _ := b.eng.Get(ctx, "alice", plain)
	if p.Phase.Terminal() || p.Attempt != 2 {
		t.Fatalf("drained run %s attempt %d: want it unfinished, given back with attempt 2", p.Phase, p.Attempt)
	}
	err := b.mem.View(ctx, func(tx store.Tx) error {
		queued, leased, err := tx.TaskCount()
		if err == nil && (queued != 1 || leased != 0) {
			t.Errorf("after the drain: %d queued, %d leased tasks; want the one given back queued and no lease left", queued, leased)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// The next engine on the same store resumes it.
	b.kit.open("plain")
	b.eng = openEngine(t, Config{Store: b.mem, Tools: b.tools, Clock: b.clock}, "")
	if run := b.waitTerminal(t, plain); run.Phase != store.PhaseCompleted {
		t.Fatalf("resumed run %s %+v", run.Phase, run.Error)
	}
}

// TestOpenWaitsHint: a decision that names no open wait is told the
// closest open node or wait id and the run's open waits.
func TestOpenWaitsHint(t *testing.T) {
	t.Parallel()
	open := []*waitState{{ID: "approve@1", Node: "approve"}, {ID: "review@2", Node: "review"}}
	for _, tc := range []struct {
		open   []*waitState
		target string
		want   string
	}{
		{nil, "approve", "; the run has no decision open"},
		{open, "aprove", `(did you mean "approve"?); its open waits: approve@1 (node approve), review@2 (node review)`},
		{open, "review@1", `(did you mean "review@2"?); its open waits: approve@1`},
		{open, "ship", "; its open waits: approve@1 (node approve), review@2 (node review)"},
	} {
		got := openWaitsHint(tc.open, tc.target)
		if !strings.Contains(got, tc.want) || (!strings.Contains(tc.want, "did you mean") && strings.Contains(got, "did you mean")) {
			t.Errorf("openWaitsHint(%d open, %q) = %q, want %q", len(tc.open), tc.target, got, tc.want)
		}
	}
}

// Only an agent's approval shows a digest: a decision naming one on a
// person's wait is refused and leaves the wait open.
func TestUnitDigestOnAHumanWaitIsRefused(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, `flow(name = "asks", nodes = [wait("ok", timeout = "1h", next = "done"), task("done", tool = "kit.echo", args = {"x": 1})])`)
	id := b.start(t, "asks", `{}`, "")
	b.wait(t, id, "waiting", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	err := b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: "ok", Approve: true, Digest: "abc"})
	if codeOf(err) != CodeBadRequest || !strings.Contains(err.Error(), "only an agent's approval has a digest") {
		t.Fatalf("a digest on a human wait: %v, want %s", err, CodeBadRequest)
	}
	if err := b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: "ok", Approve: true}); err != nil {
		t.Fatalf("the wait was not left open: %v", err)
	}
	if r := b.waitTerminal(t, id); r.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s", r.Phase)
	}
}
