package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// BenchmarkSubflowResume measures child finish → parent running over 1,000
// subflow calls whose child suspends on a human wait, so every resume goes
// through the child's announcement and the queue worker. The scheduler's
// timer is set to 10s: the latency must not depend on it.
func BenchmarkSubflowResume(b *testing.B) {
	const calls = 1000
	for b.Loop() {
		bd := setup(b, Config{Tick: 10 * time.Second}, subflowSrc)
		ctx := context.Background()
		ids := make([]string, calls)
		for i := range ids {
			ids[i] = bd.start(b, "parent_waits", `{}`, "")
		}
		// Wait until every child waits, then approve them four at a time:
		// the latency measured is the resume path's, not a burst's queue.
		children := make([]string, calls)
		for i, id := range ids {
			bd.wait(b, id, "waiting on its child", func(*store.Run) bool {
				waits, _ := bd.eng.HumanWaits(ctx, "alice", id)
				if len(waits) == 1 {
					children[i] = waits[0].RunID
				}
				return len(waits) == 1
			})
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < calls; i += 4 {
					if err := bd.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: children[i], Node: "approve", Approve: true}); err != nil {
						b.Error(err)
						return
					}
					for {
						r, err := bd.eng.Get(ctx, "alice", ids[i])
						if err != nil || r.Phase.Terminal() {
							break
						}
						time.Sleep(200 * time.Microsecond)
					}
				}
			}()
		}
		wg.Wait()
		lat := make([]time.Duration, 0, calls)
		for _, id := range ids {
			if r := bd.waitTerminal(b, id); r.Phase != store.PhaseCompleted {
				b.Fatalf("%s %+v", r.Phase, r.Error)
			}
			kids, _ := bd.eng.List(ctx, "alice", store.RunListParams{ParentRunID: id})
			childEvs, _ := bd.eng.Events(ctx, "alice", kids[0].ID, 0, 0)
			parentEvs, _ := bd.eng.Events(ctx, "alice", id, 0, 0)
			var done time.Time
			for _, e := range childEvs {
				if e.Type == evCompleted {
					done = e.At
				}
			}
			for _, e := range parentEvs {
				if e.Type == evLeased && !e.At.Before(done) {
					lat = append(lat, e.At.Sub(done))
					break
				}
			}
		}
		if len(lat) != calls {
			b.Fatalf("measured %d resumes of %d", len(lat), calls)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkFanout1000 fans 1,000 testkit.echo children out at width 64 and
// reports the time to close and the retry amplification factor.
func BenchmarkFanout1000(b *testing.B) {
	src := `flow(name = "wide", nodes = [
    fanout("fan", items = lambda ctx: list(range(1000)), tool = "testkit.echo",
           args = lambda ctx, item: {"i": item}, width = 64, depth = 1, max_items = 1000),
])`
	for b.Loop() {
		bd := setup(b, Config{}, src)
		start := time.Now()
		id := bd.start(b, "wide", `{}`, "")
		r := bd.waitTerminal(b, id)
		took := time.Since(start)
		if r.Phase != store.PhaseCompleted {
			b.Fatalf("%s %+v", r.Phase, r.Error)
		}
		var amp float64
		for _, ts := range bd.eng.Stats().Types {
			if ts.Type == "testkit.echo" {
				amp = ts.Amplification
				if ts.Units != 1000 {
					b.Fatalf("%d units, want 1000", ts.Units)
				}
			}
		}
		b.ReportMetric(took.Seconds()*1000, "close-ms")
		b.ReportMetric(amp, "amplification")
		b.ReportMetric(1000/took.Seconds(), "children/s")
	}
}
