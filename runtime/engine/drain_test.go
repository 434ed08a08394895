package engine

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

const drainSrc = `
flow(name = "nap", nodes = [task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})])
flow(name = "guarded", nodes = [task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]}, protected = True)])
`

// TestStopDrainsGivesBackAndNeverKillsProtected: Stop closes admission at
// once, waits the grace, interrupts unprotected work and gives its task
// back with its record written, waits for protected work to finish, and a
// new engine on the same store resumes what was given back.
func TestStopDrainsGivesBackAndNeverKillsProtected(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, drainSrc)
	ctx := context.Background()
	plain := b.start(t, "nap", `{"ms": 1500}`, "")
	guarded := b.start(t, "guarded", `{"ms": 800}`, "")
	for _, id := range []string{plain, guarded} {
		b.wait(t, id, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	}
	grace, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := b.eng.Stop(grace); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "nap", Input: []byte(`{"ms":1}`)}); ErrorCode(err) != CodeDraining {
		t.Fatalf("a start after Stop: %v, want %s", err, CodeDraining)
	}
	// The protected run was let finish; the plain one was given back.
	g, _ := b.eng.Get(ctx, "alice", guarded)
	if g.Phase != store.PhaseCompleted {
		t.Fatalf("protected run %s %+v: it must never be killed", g.Phase, g.Error)
	}
	p, _ := b.eng.Get(ctx, "alice", plain)
	if p.Phase.Terminal() || p.Attempt != 2 {
		t.Fatalf("drained run %s attempt %d: want it unfinished, given back with attempt 2", p.Phase, p.Attempt)
	}
	if evs := b.events(t, plain); count(evs, "drained") != 1 {
		t.Fatalf("timeline %v: want one drained event", evs)
	}
	err := b.st.View(ctx, func(tx store.Tx) error {
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
	next, err := Open(Config{Store: b.st, Tools: b.host, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer next.Stop(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := next.Get(ctx, "alice", plain)
		if err != nil {
			t.Fatal(err)
		}
		if r.Phase == store.PhaseCompleted {
			break
		}
		if r.Phase.Terminal() || time.Now().After(deadline) {
			t.Fatalf("resumed run %s %+v", r.Phase, r.Error)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPruneRemovesOldFinishedRunsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, drainSrc+subflowSrc)
	ctx := context.Background()
	done := b.start(t, "nap", `{"ms": 1}`, "req-done")
	b.waitTerminal(t, done)
	waiting := b.start(t, "approval", `{}`, "")
	b.wait(t, waiting, "waiting", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })

	if n, err := b.eng.Prune(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("pruning runs younger than the age removed %d (%v)", n, err)
	}
	n, err := b.eng.pruneBefore(ctx, time.Now().Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the one finished run", n, err)
	}
	if _, err := b.eng.Get(ctx, "alice", done); ErrorCode(err) != CodeNotFound {
		t.Fatalf("the pruned run is still there: %v", err)
	}
	if _, err := b.eng.Get(ctx, "alice", waiting); err != nil {
		t.Fatalf("an unfinished run was pruned: %v", err)
	}
	// Its dedup key went with it: the request id is free again.
	res, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "nap", Input: []byte(`{"ms": 1}`), RequestID: "req-done"})
	if err != nil || res.Existing {
		t.Fatalf("resubmit after pruning: %+v %v, want a new run", res, err)
	}
	var evs []*store.Event
	_ = b.st.View(ctx, func(tx store.Tx) error {
		evs, err = tx.EventList(store.EventListParams{RunID: done})
		return err
	})
	if len(evs) != 0 {
		t.Errorf("%d events of the pruned run remain", len(evs))
	}
}
