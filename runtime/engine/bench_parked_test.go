package engine

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// BenchmarkParkedWaits parks runs on 30-day human waits (100,000 by
// default; WEIR_BENCH_PARKED changes it), then reports the Go heap they
// cost (they live in the store, not in memory), and the restart: reopening
// the store, recovering, and serving (one approved run finishing).
func BenchmarkParkedWaits(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("WEIR_BENCH_PARKED")); err == nil && v > 0 {
		n = v
	}
	src := `flow(name = "park", nodes = [wait("w", timeout = "30d", next = "t"), task("t", tool = "testkit.echo")])`
	for b.Loop() {
		bd := setup(b, Config{MaxQueued: n + 1}, src)
		ctx := context.Background()
		ids := bd.submitAll(b, n, "park", `{}`)
		// Every run parked: nothing queued, nothing held.
		for {
			var queued, leased int
			_ = bd.st.View(ctx, func(tx store.Tx) error {
				var err error
				queued, leased, err = tx.TaskCount()
				return err
			})
			if leased == 0 && bd.eng.queued.len() == 0 {
				ready := 0
				_ = bd.st.View(ctx, func(tx store.Tx) error {
					ts, err := tx.TaskListReady(time.Now(), 1)
					ready = len(ts)
					return err
				})
				if ready == 0 && queued == n {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		runtime.GC()
		if path := os.Getenv("WEIR_BENCH_HEAPPROFILE"); path != "" {
			// What holds the heap while the runs are parked.
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")

		// Restart: stop, close the store, reopen, recover, serve.
		if err := bd.eng.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		bd.st.Close()
		start := time.Now()
		st, err := badgerstore.Open(filepath.Join(bd.dataDir, "store"), badgerstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		eng, err := Open(Config{Store: st, Tools: bd.host})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			b.Fatal(err)
		}
		recovered := time.Since(start)
		if err := eng.Decide(ctx, DecideParams{Owner: "alice", RunID: ids[n/2], Node: "w", Approve: true}); err != nil {
			b.Fatal(err)
		}
		for {
			r, err := eng.Get(ctx, "alice", ids[n/2])
			if err != nil {
				b.Fatal(err)
			}
			if r.Phase == store.PhaseCompleted {
				break
			}
			time.Sleep(time.Millisecond)
		}
		serving := time.Since(start)
		b.ReportMetric(recovered.Seconds()*1000, "recover-ms")
		b.ReportMetric(serving.Seconds()*1000, "restart-to-served-ms")
		b.ReportMetric(float64(n), "parked")
		eng.Stop(ctx)
		// setup's cleanup stops bd.eng again and closes the store it has.
		bd.eng, bd.st = eng, st
	}
}
