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

// A fan-out that says on_exhausted = "park": item 0 of two fails its
// first ctx.input["times"] tries (retries = 1: two tries a drive).
const unitRedriveItemSrc = `
flow(name = "fan_parks", nodes = [
    fanout("f", items = lambda ctx: [{"times": ctx.input["times"]}, {"times": 0}], tool = "kit.fail", args = lambda ctx, item: item,
           retries = 1, width = 2, depth = 1, max_items = 2, on_exhausted = "park", next = "after"),
    task("after", tool = "kit.echo", args = lambda ctx: {"got": ctx.results["f"]["results"]}),
])
`

// An item that used up its tries on a fan-out that parks is dead-lettered
// and parks, in flight, on NODE@VISIT.ITEM.exhausted.N, which the run's
// waits show with its task; the cohort stays open and time does not end
// the wait. A redrive sends the task back with its tries counted afresh
// and the same idempotency key: the item publishes, the run completes,
// and the timeline says who redrove which item.
func TestUnitRedriveParkedItem(t *testing.T) {
	t.Parallel()
	// The clock moves by the hour below: a queue deadline is not what is
	// tested (a task the ticks wake between two moves must not be dropped).
	b := setupUnit(t, Config{RetryBase: time.Second, RetryMax: 4 * time.Second, QueueTimeout: 1000 * time.Hour}, unitRedriveItemSrc)
	ctx := context.Background()
	id := b.start(t, "fan_parks", `{"times": 3}`, "")
	const wait = "f@1.0.exhausted.1"
	var human []HumanWait
	b.advanceUntil(t, id, 4*time.Second, "parked on item 0's exhaustion", func(r *store.Run) bool {
		var err error
		human, err = b.eng.HumanWaits(ctx, "alice", id)
		return err == nil && len(human) == 1 && human[0].ID == wait
	})
	dl := deadLetterOf(t, b, id)
	if dl.Node != "f" || dl.Tool != "kit.fail" || len(dl.Errors) != 2 || human[0].Kind != WaitExhausted || !strings.Contains(string(human[0].Shown), dl.TaskID) {
		t.Fatalf("dead letter %+v, wait %+v %s", dl, human[0], human[0].Shown)
	}
	testutil.Eventually(t, waitTimeout, func() error {
		run, err := b.eng.Get(ctx, "alice", id)
		if err != nil {
			return err
		}
		all, err := b.eng.Waits(ctx, run)
		if err != nil || len(all) != 2 || all[0].ID != wait || all[1].Kind != WaitCohort {
			return fmt.Errorf("waits %+v (%v), want %s and the cohort", all, err, wait)
		}
		return nil
	})
	if v := b.cohort(t, id); v.State != string(store.CohortOpen) || v.InFlight != 1 || v.Failed != 0 {
		t.Fatalf("cohort %+v while item 0 is parked: want open with it in flight", v)
	}
	// A day passes an hour at a time (a parked step may come due, find
	// the item still parked and park again).
	idle := func() {
		t.Helper()
		testutil.Eventually(t, waitTimeout, func() error {
			if h := b.eng.Health(ctx); h.Queued != 0 || h.Held != 0 {
				return fmt.Errorf("health %+v: want nothing queued or held", h)
			}
			return nil
		})
	}
	idle()
	for range 24 {
		b.clock.Advance(time.Hour)
		idle()
	}
	if r, err := b.eng.Get(ctx, "alice", id); err != nil || r.Phase != store.PhaseWaiting {
		t.Fatalf("after a day: %+v %v, want waiting", r, err)
	}
	if h, err := b.eng.HumanWaits(ctx, "alice", id); err != nil || len(h) != 1 || h[0].ID != wait || b.tools.Calls("kit.fail") != 3 {
		t.Fatalf("after a day: waits %+v (%v), %d calls; want %s still open after 3", h, err, b.tools.Calls("kit.fail"), wait)
	}

	res := b.redriveOne(t, RedriveParams{TaskIDs: []string{dl.TaskID}, Reason: "fixed the upstream"})
	if !res.Redriven || res.Err != nil || res.RunID != id || res.Wait != wait {
		t.Fatalf("redrive: %+v", res)
	}
	done := b.advanceUntil(t, id, 4*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	if done.Phase != store.PhaseCompleted || !strings.Contains(string(done.Output), `"got":[{"tries":4},{"tries":1}]`) {
		t.Fatalf("phase %s output %s error %+v: want completed, item 0 on its 4th try", done.Phase, done.Output, done.Error)
	}
	b.kit.read(func() {
		if len(b.kit.fails) != 2 {
			t.Errorf("kit.fail saw %d idempotency keys, want one per item across the redrive: %v", len(b.kit.fails), b.kit.fails)
		}
	})
	evs := b.detailsOf(t, id, evRedriven)
	if len(evs) != 1 || evs[0]["by"] != "alice" || evs[0]["wait"] != wait || evs[0]["item"] != float64(0) || evs[0]["reason"] != "fixed the upstream" {
		t.Errorf("redriven events %v", evs)
	}
	if again := b.redriveOne(t, RedriveParams{TaskIDs: []string{dl.TaskID}}); again.Redriven || again.Err == nil || again.Err.Code != CodeNotFound {
		t.Fatalf("second redrive: %+v, want E_NOT_FOUND", again)
	}
}

// Without on_exhausted = "park" the item is dead-lettered and fails, as
// before, and its dead letter cannot be redriven (the run went on).
func TestUnitExhaustedItemFailsWithoutPark(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{RetryBase: time.Second, RetryMax: 4 * time.Second}, strings.Replace(unitRedriveItemSrc, `on_exhausted = "park", `, "", 1))
	id := b.start(t, "fan_parks", `{"times": 3}`, "")
	done := b.advanceUntil(t, id, 4*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	if done.Phase != store.PhaseCompleted || !strings.Contains(string(done.Output), `"got":[{"tries":1}]`) {
		t.Fatalf("phase %s output %s: want completed with item 1 alone", done.Phase, done.Output)
	}
	if n := b.tools.Calls("kit.fail"); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}
