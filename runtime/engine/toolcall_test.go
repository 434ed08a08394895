package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

const toolCallSrc = `
flow(name = "fan_exclusive", nodes = [
    fanout("fan", items = lambda ctx: [1, 2, 3], tool = "testkit.exclusive",
           args = lambda ctx, item: {"ms": 1}, width = 3, depth = 1, max_items = 3, at_most_once = True),
])

flow(name = "fan_flaky", nodes = [
    fanout("fan", items = lambda ctx: [1, 2], tool = "testkit.fail",
           args = lambda ctx, item: {"times": 2}, width = 2, depth = 1, max_items = 2, retries = 3),
])
`

// TestFanoutItemsCallLikeTaskNodes: a fan-out item's tool call is the same
// call as a task node's: a non-idempotent tool gets its durable started
// record and event per item, and a retryable failure is retried with the
// same events, each naming its item.
func TestFanoutItemsCallLikeTaskNodes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond}, toolCallSrc)
	ctx := context.Background()

	ex := b.waitTerminal(t, b.start(t, "fan_exclusive", `{}`, ""))
	if ex.Phase != store.PhaseCompleted {
		t.Fatalf("fan_exclusive %s %+v", ex.Phase, ex.Error)
	}
	evs, err := b.eng.Events(ctx, "alice", ex.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	items := map[any]bool{}
	for _, ev := range evs {
		if ev.Type == evToolStarted {
			items[ev.Detail["item"]] = true
		}
	}
	if len(items) != 3 {
		t.Errorf("tool_started for items %v, want one for each of 3 items", items)
	}
	if err := b.st.View(ctx, func(tx store.Tx) error {
		recs, err := tx.IdemListRun(ex.ID)
		if err != nil {
			return err
		}
		done := 0
		for _, r := range recs {
			if r.State == store.IdemDone {
				done++
			}
		}
		if done != 3 {
			t.Errorf("%d done records of %d, want 3: each call's result is recorded", done, len(recs))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	fl := b.waitTerminal(t, b.start(t, "fan_flaky", `{}`, ""))
	if fl.Phase != store.PhaseCompleted {
		t.Fatalf("fan_flaky %s %+v", fl.Phase, fl.Error)
	}
	if r := b.fanResult(t, fl.Output); len(r.Results) != 2 {
		t.Errorf("result %+v: both items succeed on their third try", r)
	}
	evs, err = b.eng.Events(ctx, "alice", fl.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	retries := map[any]int{}
	for _, ev := range evs {
		if ev.Type == evRetry {
			if ev.Detail["tool"] != "testkit.fail" {
				t.Errorf("retry event %v does not name its tool", ev.Detail)
			}
			retries[ev.Detail["item"]]++
		}
	}
	if len(retries) != 2 {
		t.Errorf("retries by item %v, want two retries for each of 2 items", retries)
	}
	for item, n := range retries {
		if n != 2 {
			t.Errorf("item %v retried %d times, want 2", item, n)
		}
	}
}

// TestFanoutItemsReportProgress: the running calls of fan-out items show
// their progress in the run's progress, each with its item.
func TestFanoutItemsReportProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, toolCallSrc+`
flow(name = "fan_slow", nodes = [
    fanout("fan", items = lambda ctx: [600000, 600000], tool = "testkit.sleep",
           args = lambda ctx, item: {"ms": item}, width = 2, depth = 1, max_items = 2),
])
`)
	ctx := context.Background()
	id := b.start(t, "fan_slow", `{}`, "")
	testutil.Eventually(t, waitTimeout, func() error {
		p := b.progress(t, id)
		if len(p.Items) != 2 {
			return fmt.Errorf("progress %+v: the two running item calls never reported", p)
		}
		for i, tp := range p.Items {
			if tp.Item == nil || *tp.Item != i || tp.Tool != "testkit.sleep" || tp.Node != "fan" || tp.Total != 600000 {
				t.Errorf("item progress %d: %+v", i, tp)
			}
		}
		return nil
	})
	if _, err := b.eng.Cancel(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCancelled {
		t.Fatalf("phase %s after cancel", run.Phase)
	}
}
