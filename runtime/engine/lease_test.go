package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// leaseToTheDead makes the lease of the run's one task look as a dead
// holder's would at now: another holder's, expired a second ago.
func leaseToTheDead(tx store.Tx, runID string, now time.Time) error {
	tasks, err := tx.TaskListByRun(runID)
	if err != nil {
		return err
	}
	if len(tasks) != 1 {
		return fmt.Errorf("run %s has %d tasks, want 1", runID, len(tasks))
	}
	l, err := tx.LeaseGet(tasks[0].ID)
	if err != nil {
		return err
	}
	l.Holder, l.Deadline = "h_dead", now.Add(-time.Second)
	return tx.LeasePut(l)
}

// runningSleepy starts a sleepy run (400ms) under a one-second lease on
// a fake clock, and waits until it runs.
func runningSleepy(t *testing.T) (*bundle, *clock.Fake, string) {
	t.Helper()
	fk := clock.NewFake(time.Now())
	b := setup(t, Config{LeaseTimeout: time.Second, Clock: fk}, flowsSrc)
	id := b.start(t, "sleepy", `{"ms": 400}`, "")
	b.wait(t, id, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	return b, fk, id
}

// TestExpiredLeaseIsRescuedAndFenced takes a running task's lease away as a
// dead holder's would look (expired, another holder): the rescuer must make
// the task visible again with attempt + 1, a new worker must finish the
// run, and the first worker's late writes must be refused by the fence.
func TestExpiredLeaseIsRescuedAndFenced(t *testing.T) {
	t.Parallel()
	b, fk, id := runningSleepy(t)
	ctx := context.Background()

	err := b.st.Update(ctx, func(tx store.Tx) error { return leaseToTheDead(tx, id, fk.Now()) })
	if err != nil {
		t.Fatal(err)
	}
	// The rescuer looks on the scheduler's next tick; the live holder's
	// own lease never expires, since the clock moves no further.
	fk.Advance(100 * time.Millisecond)
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s error %+v", run.Phase, run.Error)
	}
	if run.Attempt != 2 {
		t.Errorf("attempt %d, want 2 after one rescue", run.Attempt)
	}
	evs := b.events(t, id)
	if count(evs, evExpired) != 1 || count(evs, evLeased) != 2 || count(evs, evCompleted) != 1 {
		t.Errorf("timeline %v: want one expired, two leased, one completed", evs)
	}
	// Both workers ran the sleep; only one result was recorded.
	if n := count(evs, evNodeDone); n != 1 {
		t.Errorf("%d node_completed events, want 1: the fenced worker's write must be refused", n)
	}
}

// TestLeaseRenewedWhileToolRuns keeps a call running for several lease
// timeouts: the renewer must keep the lease, so nothing expires.
func TestLeaseRenewedWhileToolRuns(t *testing.T) {
	t.Parallel()
	fk := clock.NewFake(time.Now())
	b := setup(t, Config{LeaseTimeout: 300 * time.Millisecond, Clock: fk}, flowsSrc)
	ctx := context.Background()
	services := fk.Tickers() // one per background service, made by Start
	id := b.start(t, "sleepy", `{"ms": 600000}`, "")
	b.wait(t, id, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	// The services' tickers and the renewer's.
	b.wait(t, id, "renewer started", func(*store.Run) bool { return fk.Tickers() == services+1 })
	// Five renewal periods, more than a lease timeout: each time the clock
	// moves, the renewer extends the lease before it can expire.
	for i := 1; i <= 5; i++ {
		fk.Advance(100 * time.Millisecond)
		b.wait(t, id, "renewed", func(*store.Run) bool { return count(b.events(t, id), evRenewed) >= i })
	}
	run, err := b.eng.Get(ctx, "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Phase != store.PhaseRunning || run.Attempt != 1 {
		t.Fatalf("phase %s attempt %d error %+v", run.Phase, run.Attempt, run.Error)
	}
	if evs := b.events(t, id); count(evs, evExpired) != 0 {
		t.Errorf("timeline %v: want renewals and no expiry", evs)
	}
	// Each renewal names the lease it renewed, as the lease's own event does.
	evs, err := b.eng.Events(ctx, "alice", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var task, holder any
	for _, e := range evs {
		switch e.Type {
		case evLeased:
			task, holder = e.Detail["task"], e.Detail["holder"]
		case evRenewed:
			if task == nil || e.Detail["task"] != task || e.Detail["holder"] != holder {
				t.Fatalf("renewal %d names task %v holder %v, want the lease's task %v holder %v", e.Seq, e.Detail["task"], e.Detail["holder"], task, holder)
			}
		}
	}
	if _, err := b.eng.Cancel(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	b.waitTerminal(t, id)
}

// A cancel recorded while another holder had the run (which then died)
// is honoured by the next holder: the run ends cancelled, its work is
// never resumed.
func TestCancelRecordedBeforeCrashIsHonoured(t *testing.T) {
	t.Parallel()
	b, fk, id := runningSleepy(t)
	ctx := context.Background()
	err := b.st.Update(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(id)
		if err != nil {
			return err
		}
		run.CancelRequested = true
		if err := tx.RunUpdate(run); err != nil {
			return err
		}
		return leaseToTheDead(tx, id, fk.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	// The rescuer looks on the scheduler's next tick; the live holder's
	// own lease never expires, since the clock moves no further.
	fk.Advance(100 * time.Millisecond)
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCancelled {
		t.Fatalf("%s %+v: the recorded cancel was not honoured", run.Phase, run.Error)
	}
	if evs := b.events(t, id); count(evs, evNodeDone) != 0 {
		t.Fatalf("timeline %v: the cancelled run resumed its work", evs)
	}
}

// A run cancelled with a non-idempotent call started and never recorded
// says E_OUTCOME_UNKNOWN: the effect may have happened.
func TestCancelWithStartedCallSaysOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Workers: 1}, flowsSrc)
	ctx := context.Background()
	blocker := b.start(t, "sleepy", `{"ms": 60000}`, "")
	b.wait(t, blocker, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	id := b.start(t, "mail", `{"body": "x"}`, "")
	// As a crashed holder would have left it: the send's started record.
	if err := b.st.Update(ctx, func(tx store.Tx) error {
		return tx.IdemPut(&store.Idem{Key: id + "/send/1", RunID: id, Node: "send", Tool: "mail.send", State: store.IdemStarted, StartedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Cancel(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCancelled || run.Error == nil || run.Error.Code != CodeOutcomeUnknown {
		t.Fatalf("%s %+v: want cancelled with %s", run.Phase, run.Error, CodeOutcomeUnknown)
	}
	b.eng.Cancel(ctx, "alice", blocker)
	b.waitTerminal(t, blocker)
}
