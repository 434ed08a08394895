package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// BenchmarkDispatch compares a dispatch pass in the fair order with one in
// global FIFO order (the listing oldest first, offered as listed), over
// the same memstore queue: two owners with 2,000 tasks each, 16 slots,
// every slot freed between passes. The figure is per dispatched task.
func BenchmarkDispatch(b *testing.B) {
	for _, order := range []string{"fifo", "fair"} {
		b.Run(order, func(b *testing.B) {
			f := setupFair(b, 16, map[string]int{"heavy": 1, "light": 1})
			f.queue(b, "heavy", 2000, 0)
			f.queue(b, "light", 2000, 0)
			ctx := context.Background()
			started := 0
			b.ResetTimer()
			for range b.N {
				n0 := len(f.eng.started)
				if order == "fair" {
					f.d.RunOnce(ctx)
				} else {
					fifoPass(ctx, f.eng)
				}
				started += len(f.eng.started) - n0
				b.StopTimer()
				// Put the finished tasks back, so the queue stays as long.
				if err := f.eng.lease(ctx); err != nil {
					b.Fatal(err)
				}
				requeue(b, f, f.eng.running)
				f.eng.running = nil
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(started, 1)), "ns/task")
		})
	}
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
