package engine

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/sandbox"
)

// BenchmarkSandboxedSteps measures what evaluating callables in sandbox
// workers costs per durable step: the same 500 runs of the 10-step flow
// of BenchmarkDurableSteps (one args callable per step), once with the
// callables evaluated in the engine's process and twice in a sandbox pool
// (each step's Call alone in its round trip, MaxBatch 1, and sharing round
// trips, the default), in the same run. It reports the step rates,
// sandbox-cost and alone-cost, the in-process rate over each sandboxed
// one (1.0: no cost), and calls/trip, the Calls per round trip shared.
func BenchmarkSandboxedSteps(b *testing.B) {
	const runs, steps = 500, 10
	payload := `"` + strings.Repeat("a", 100) + `"`
	rate := func(cfg Config) float64 {
		bd := setup(b, cfg, benchFlow)
		start := time.Now()
		bd.completeAll(b, bd.submitAll(b, runs, "ten", `{"p":`+payload+`}`))
		return float64(runs*steps) / time.Since(start).Seconds()
	}
	sandboxed := func(maxBatch int) (float64, sandbox.Stats) {
		pool, err := sandbox.New(sandbox.Config{Workers: benchSandboxWorkers, MaxBatch: maxBatch})
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		r := rate(Config{Workers: benchWorkers, Scripts: pool})
		return r, pool.Stats()
	}
	for b.Loop() {
		inProcess := rate(Config{Workers: benchWorkers})
		alone, _ := sandboxed(1)
		batched, stats := sandboxed(0)
		b.ReportMetric(inProcess, "inprocess-steps/s")
		b.ReportMetric(alone, "alone-steps/s")
		b.ReportMetric(batched, "sandboxed-steps/s")
		b.ReportMetric(inProcess/alone, "alone-cost")
		b.ReportMetric(inProcess/batched, "sandbox-cost")
		b.ReportMetric(float64(stats.Calls)/float64(stats.Requests), "calls/trip")
		b.ReportMetric(float64(stats.Started), "workers")
	}
}

// benchSandboxWorkers is the pool size of BenchmarkSandboxedSteps: the
// sandbox's default unless WEIR_BENCH_SANDBOX_WORKERS says otherwise.
var benchSandboxWorkers = func() int {
	n, _ := strconv.Atoi(os.Getenv("WEIR_BENCH_SANDBOX_WORKERS"))
	return n
}()
