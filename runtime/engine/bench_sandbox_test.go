package engine

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
)

// BenchmarkSandboxedSteps measures what evaluating callables in sandbox
// workers costs per durable step: the same 500 runs of the 10-step flow
// of BenchmarkDurableSteps (one args callable per step), once with the
// callables evaluated in the engine's process and once in a sandbox pool,
// in the same run. It reports both step rates and sandbox-cost, the
// in-process rate over the sandboxed one (1.0: no cost).
func BenchmarkSandboxedSteps(b *testing.B) {
	const runs, steps = 500, 10
	payload := `"` + strings.Repeat("a", 100) + `"`
	rate := func(cfg Config) float64 {
		bd := setup(b, cfg, benchFlow)
		ctx := context.Background()
		ids := make([]string, runs)
		start := time.Now()
		var sub sync.WaitGroup
		for c := range 32 {
			sub.Go(func() {
				for i := c; i < runs; i += 32 {
					res, err := bd.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{"p":` + payload + `}`)})
					if err != nil {
						b.Error(err)
						return
					}
					ids[i] = res.RunID
				}
			})
		}
		sub.Wait()
		if b.Failed() {
			b.FailNow()
		}
		for _, id := range ids {
			if r := bd.waitTerminal(b, id); r.Phase != store.PhaseCompleted {
				b.Fatalf("run %s: %s %+v", id, r.Phase, r.Error)
			}
		}
		return float64(runs*steps) / time.Since(start).Seconds()
	}
	for b.Loop() {
		inProcess := rate(Config{Workers: benchWorkers})
		pool, err := sandbox.New(sandbox.Config{Workers: benchSandboxWorkers})
		if err != nil {
			b.Fatal(err)
		}
		sandboxed := rate(Config{Workers: benchWorkers, Scripts: pool})
		stats := pool.Stats()
		pool.Close()
		b.ReportMetric(inProcess, "inprocess-steps/s")
		b.ReportMetric(sandboxed, "sandboxed-steps/s")
		b.ReportMetric(inProcess/sandboxed, "sandbox-cost")
		b.ReportMetric(float64(stats.Started), "workers")
	}
}

// benchSandboxWorkers is the pool size of BenchmarkSandboxedSteps: the
// sandbox's default unless WEIR_BENCH_SANDBOX_WORKERS says otherwise.
var benchSandboxWorkers = func() int {
	n, _ := strconv.Atoi(os.Getenv("WEIR_BENCH_SANDBOX_WORKERS"))
	return n
}()
