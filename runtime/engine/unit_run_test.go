package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

const unitSrc = `
flow(name = "echo", nodes = [task("e", tool = "kit.echo", args = lambda ctx: {"n": ctx.input["n"]})])

flow(name = "flaky", nodes = [
    task("call", tool = "kit.fail", args = lambda ctx: ctx.input, retries = 3, error = "fallback"),
    task("fallback", tool = "kit.echo", args = lambda ctx: {"fell_back": True}),
])

flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])

flow(name = "guarded", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]}, protected = True)])

flow(name = "send", nodes = [
    task("send", tool = "kit.send", args = lambda ctx: {"to": "a@b.c", "gate": ctx.input.get("gate", "")}, at_most_once = True),
])
`

// advanceUntil moves the fake clock forward by step until the run
// satisfies cond: for a run that parks (retries, waits) more than once.
func (b *testBundle) advanceUntil(t *testing.T, id string, step time.Duration, what string, cond func(*store.Run) bool) *store.Run {
	t.Helper()
	var run *store.Run
	testutil.Eventually(t, waitTimeout, func() error {
		r, err := b.eng.Get(context.Background(), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		if run = r; cond(r) {
			return nil
		}
		b.clock.Advance(step)
		return fmt.Errorf("run %s never became %s; last phase %s", id, what, r.Phase)
	})
	return run
}

// untilAfterRestart waits for the run to satisfy cond on an engine that
// has just replaced a dead one on the same unshared store. Its recovery
// took the dead holder's leases back at start, so the clock need not pass
// them; it moves by ticks for the scheduler, never by a third of lease in
// all, so a lease the new engine takes cannot run out before its renewer
// runs however slowly this machine schedules it.
func (b *testBundle) untilAfterRestart(t *testing.T, id string, lease time.Duration, cond func(*store.Run) bool) *store.Run {
	t.Helper()
	var run *store.Run
	moved := time.Duration(0)
	testutil.Eventually(t, waitTimeout, func() error {
		r, err := b.eng.Get(context.Background(), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		if run = r; cond(r) {
			return nil
		}
		if moved+b.tick < lease/3 {
			b.clock.Advance(b.tick)
			moved += b.tick
		}
		return fmt.Errorf("run %s never got there after the restart; last phase %s", id, r.Phase)
	})
	return run
}

// A retryable failure parks the task for an exponential backoff with full
// jitter, capped, or for what the tool asked; the next try comes only when
// the clock has moved past it.
func TestUnitRetryBackoff(t *testing.T) {
	t.Parallel()
	const base, maxBackoff = time.Second, 4 * time.Second
	b := setupUnit(t, Config{RetryBase: base, RetryMax: maxBackoff}, unitSrc)
	id := b.start(t, "flaky", `{"times": 2}`, "")
	for try := 1; try <= 2; try++ {
		b.wait(t, id, "parked for a retry", func(*store.Run) bool { return count(b.events(t, id), evRetry) == try })
		// Parked: the clock has not moved, so no further try can have begun.
		wait := b.parkedUntil(t, id).Sub(b.clock.Now())
		if ceil := min(base<<(try-1), maxBackoff); wait <= 0 || wait > ceil {
			t.Fatalf("try %d parked for %v, want within (0, %v]", try, wait, ceil)
		}
		if n := b.tools.Calls("kit.fail"); n != try {
			t.Fatalf("%d tries before the clock moved past try %d's backoff", n, try)
		}
		// Past the backoff; the scheduler sees the task due on its next tick.
		b.clock.Advance(wait + b.tick)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || strings.Contains(string(run.Output), "fell_back") {
		t.Fatalf("phase %s output %s, want completed through the tool", run.Phase, run.Output)
	}
	for _, ts := range b.eng.Stats().Types {
		if ts.Type == "kit.fail" && (ts.Attempts != 3 || ts.Units != 1 || ts.Amplification != 3) {
			t.Errorf("fail figures %+v, want 3 attempts for 1 unit", ts)
		}
	}

	// A tool's retry-after is honoured over a shorter backoff, and its
	// code names the retry.
	rated := b.start(t, "flaky", `{"times": 1, "code": "E_MODEL_RATE", "retry_after_ms": 3000}`, "")
	b.wait(t, rated, "parked for a retry", func(*store.Run) bool { return count(b.events(t, rated), evRetry) == 1 })
	if wait := b.parkedUntil(t, rated).Sub(b.clock.Now()); wait != 3*time.Second {
		t.Fatalf("parked for %v, want the 3s the tool asked for", wait)
	}
	evs, err := b.eng.Events(context.Background(), "alice", rated, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == evRetry && (ev.Detail["code"] != "E_MODEL_RATE" || ev.Detail["backoff_ms"] != float64(3000)) {
			t.Errorf("retry event %v: want the tool's code and its 3000ms", ev.Detail)
		}
	}
	b.clock.Advance(3*time.Second + b.tick)
	if run := b.waitTerminal(t, rated); run.Phase != store.PhaseCompleted {
		t.Fatalf("rated: %s %+v", run.Phase, run.Error)
	}
}

// Every try failing dead-letters the task with each try's error, and the
// node takes its error wire.
func TestUnitRetriesExhaustedDeadLetters(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{RetryBase: time.Second, RetryMax: 4 * time.Second}, unitSrc)
	id := b.start(t, "flaky", `{"times": 10}`, "")
	run := b.advanceUntil(t, id, 4*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), "fell_back") {
		t.Fatalf("phase %s output %s, want completed through the error wire", run.Phase, run.Output)
	}
	if n := b.tools.Calls("kit.fail"); n != 4 {
		t.Errorf("%d tries, want 4 (the first and 3 retries)", n)
	}
	dl, err := b.eng.Ops().DeadLetters(context.Background(), "alice", 0)
	if err != nil || len(dl) != 1 {
		t.Fatalf("dead letters %d (%v), want 1", len(dl), err)
	}
	if dl[0].RunID != id || dl[0].Node != "call" || len(dl[0].Errors) != 4 {
		t.Errorf("dead letter %+v: want run %s node call with 4 attempts' errors", dl[0], id)
	}
	if evs := b.events(t, id); count(evs, evRetry) != 3 || count(evs, evDeadLettered) != 1 {
		t.Errorf("timeline %v: want 3 retries and one dead letter", evs)
	}
	if other, _ := b.eng.Ops().DeadLetters(context.Background(), "bob", 0); len(other) != 0 {
		t.Errorf("bob sees %d of alice's dead letters", len(other))
	}
}

// A task that waits past the queue timeout for a slot is dropped, and its
// run fails with the reason; it never ran.
func TestUnitQueueDeadlineDrops(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Workers: 1, QueueTimeout: 2 * time.Second}, unitSrc)
	blocker := b.start(t, "held", `{"gate": "blocker"}`, "")
	b.kitIs(t, "the blocker running", func(k *kit) bool { return k.blocked == 1 })
	late := b.start(t, "send", `{}`, "")
	// Queued behind the blocker until the queue deadline passes, which
	// it does only when the clock is moved.
	b.clock.Advance(2*time.Second + time.Millisecond)
	run := b.waitTerminal(t, late)
	wantFailed(t, run, CodeQueueTimeout)
	if evs := b.events(t, late); count(evs, evDropped) != 1 || count(evs, evLeased) != 0 {
		t.Errorf("timeline %v: want one dropped event and no lease", evs)
	}
	if n := b.sends(); n != 0 {
		t.Errorf("the dropped run sent %d times", n)
	}
	if st := b.eng.Stats(); st.Refusals[CodeQueueTimeout] != 1 {
		t.Errorf("refusals %v: the drop must be counted by reason", st.Refusals)
	}
	b.kit.open("blocker")
	if run := b.waitTerminal(t, blocker); run.Phase != store.PhaseCompleted {
		t.Fatalf("blocker %s %+v", run.Phase, run.Error)
	}
}

// The queue deadline counts the time a task waits for a slot on a running
// engine: a task queued when the daemon stopped is not dropped at the next
// start because the daemon was down longer than the deadline (an upgrade,
// say); it waits the full deadline again, then runs or is dropped.
func TestUnitDowntimeIsNotQueueTime(t *testing.T) {
	t.Parallel()
	const qt = 2 * time.Second
	b := setupUnit(t, Config{Workers: 1, QueueTimeout: qt}, unitSrc)
	b.start(t, "held", `{"gate": "blocker"}`, "")
	b.kitIs(t, "the blocker running", func(k *kit) bool { return k.blocked == 1 })
	late := b.start(t, "send", `{}`, "")

	// The daemon stops with the task queued, and stays down an hour.
	if err := b.mem.Close(); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Stop(stopped)
	b.clock.Advance(time.Hour)
	mem, err := b.mem.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	b.eng, b.st = openEngine(t, Config{Store: mem, Tools: b.tools, Clock: b.clock, Workers: 2, QueueTimeout: qt}, ""), mem

	run := b.waitTerminal(t, late)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("the task queued over the downtime ended %s %+v: want it run, not dropped", run.Phase, run.Error)
	}
	b.kit.open("blocker")
}

func TestUnitCancelAnswers(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitSrc)
	ctx := context.Background()

	// Running: the tool call's context is cancelled; the run ends cancelled.
	id := b.start(t, "held", `{"gate": "never"}`, "")
	b.kitIs(t, "the call running", func(k *kit) bool { return k.blocked == 1 })
	a, err := b.eng.Cancel(ctx, "alice", id)
	if err != nil || a != CancelRequested {
		t.Fatalf("cancel running: %v %v", a, err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCancelled || run.Error == nil || run.Error.Code != CodeCancelled {
		t.Fatalf("phase %s error %+v, want cancelled", run.Phase, run.Error)
	}
	b.kitIs(t, "the call's cancel", func(k *kit) bool { return k.cancelled == 1 })
	b.cancelEnded(t, id)
}

func TestUnitCancelQueuedRunNeverWorks(t *testing.T) {
	t.Parallel()
	// One slot, held: the second run stays queued.
	b := setupUnit(t, Config{Workers: 1}, unitSrc)
	ctx := context.Background()
	blocker := b.start(t, "held", `{"gate": "blocker"}`, "")
	b.kitIs(t, "the blocker running", func(k *kit) bool { return k.blocked == 1 })
	queued := b.start(t, "send", `{}`, "")
	if a, err := b.eng.Cancel(ctx, "alice", queued); err != nil || a != CancelRequested {
		t.Fatalf("cancel queued: %v %v", a, err)
	}
	if run := b.waitTerminal(t, queued); run.Phase != store.PhaseCancelled {
		t.Fatalf("phase %s", run.Phase)
	}
	if evs := b.events(t, queued); count(evs, evLeased) != 0 {
		t.Errorf("a cancelled queued run was leased: %v", evs)
	}
	b.kit.open("blocker")
	b.waitTerminal(t, blocker)
	if n := b.sends(); n != 0 {
		t.Errorf("the cancelled run sent %d times", n)
	}
}

// A non-idempotent call gets its durable started record and event before
// the call and its done record after, and runs once.
func TestUnitNonIdempotentToolRunsOnce(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitSrc)
	id := b.start(t, "send", `{}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"sent_to":"a@b.c"`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
	if n := b.sends(); n != 1 {
		t.Fatalf("sent %d times, want 1", n)
	}
	if evs := b.events(t, id); count(evs, evToolStarted) != 1 {
		t.Errorf("want one durable tool_started before the call, timeline %v", evs)
	}
	err := b.mem.View(context.Background(), func(tx store.Tx) error {
		rec, err := tx.IdemGet(id + "/send/1")
		if err != nil {
			return err
		}
		if rec.State != store.IdemDone || !strings.Contains(string(rec.Result), "a@b.c") {
			t.Errorf("record %+v: want the call's result recorded", rec)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The engine dies (its store goes away under it) while a non-idempotent
// call is in the tool: the next engine on the same data rescues the task
// and, finding the started record without a result, ends the node with
// E_OUTCOME_UNKNOWN instead of calling again.
func TestUnitCrashAfterStartedSaysOutcomeUnknown(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setupUnit(t, Config{LeaseTimeout: lease}, unitSrc)
	ctx := context.Background()
	id := b.start(t, "send", `{"gate": "held"}`, "")
	b.kitIs(t, "the send in the tool", func(k *kit) bool { return k.blocked == 1 })

	// The crash: the store is gone before the call's answer can be
	// written, and the engine is stopped without a grace period; nothing
	// it tries to write afterwards lands.
	if err := b.mem.Close(); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	b.eng.Stop(stopped)
	if n := b.sends(); n != 1 {
		t.Fatalf("%d sends before the crash, want 1", n)
	}

	mem, err := b.mem.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	next := openEngine(t, Config{Store: mem, Tools: b.tools, Clock: b.clock, LeaseTimeout: lease}, "")
	b.eng, b.st = next, mem
	run := b.untilAfterRestart(t, id, lease, func(r *store.Run) bool { return r.Phase.Terminal() })
	wantFailed(t, run, CodeOutcomeUnknown)
	if n := b.sends(); n != 1 || b.tools.Calls("kit.send") != 1 {
		t.Fatalf("%d sends over %d calls after the restart: a non-idempotent call must never be made twice", n, b.tools.Calls("kit.send"))
	}
	if evs := b.events(t, id); count(evs, evToolStarted) != 1 || count(evs, evLeased) != 2 {
		t.Errorf("timeline %v: want one tool_started and two leases (before and after the crash)", evs)
	}
}
