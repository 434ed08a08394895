package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// BenchmarkDispatch compares a dispatch pass in the fair order with one in
// global FIFO order (the listing oldest first, offered as listed), each
// over its own copy of one memstore queue: two owners with 2,000 tasks
// each, 16 slots, every slot freed between passes. The two passes take
// turns, so a noisy machine slows both alike; the figures are per
// dispatched task, fifo-ns/task and fair-ns/task.
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	var bundles [2]*fairBundle
	for i := range bundles {
		bundles[i] = setupFair(b, 16, nil)
		bundles[i].queue(b, "heavy", 2000, 0)
		bundles[i].queue(b, "light", 2000, 0)
	}
	fifo, fair := bundles[0], bundles[1]
	var spent [2]time.Duration
	var started [2]int
	b.ResetTimer()
	for range b.N {
		for i, f := range bundles {
			n0 := len(f.eng.started)
			t0 := time.Now()
			if f == fair {
				f.d.RunOnce(ctx)
			} else {
				fifoPass(ctx, fifo.eng)
			}
			spent[i] += time.Since(t0)
			started[i] += len(f.eng.started) - n0
			// Put the started tasks back, so the queue stays as long.
			if err := f.eng.lease(ctx); err != nil {
				b.Fatal(err)
			}
			requeue(b, f, f.eng.running)
			f.eng.running = nil
		}
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(max(started[0], 1)), "fifo-ns/task")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(max(started[1], 1)), "fair-ns/task")
}

// fifoPass is the pass before the fair order: one page, oldest first.
func fifoPass(ctx context.Context, f *fakeEngine) {
	if err := f.lease(ctx); err != nil {
		return
	}
	var tasks []*store.Task
	_ = f.st.View(ctx, func(tx store.Tx) error {
		var err error
		tasks, err = tx.TaskListReady(f.clk.Now(), f.FreeSlots())
		return err
	})
	for _, t := range tasks {
		if f.Offer(ctx, t) == NoSlot {
			return
		}
	}
}

// requeue puts the tasks named back in the queue, unleased.
func requeue(b *testing.B, f *fairBundle, ids []string) {
	if err := f.eng.st.Update(context.Background(), func(tx store.Tx) error {
		for _, id := range ids {
			tk, err := tx.TaskGet(id)
			if err != nil {
				return err
			}
			tk.Leased = false
			tk.ReadyAt = f.t0.Add(time.Hour / 2)
			if err := tx.TaskPut(tk); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}
