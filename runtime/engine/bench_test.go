package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

const benchFlow = `
flow(
    name = "ten",
    nodes = [
        task("s0", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s1"),
        task("s1", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s2"),
        task("s2", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s3"),
        task("s3", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s4"),
        task("s4", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s5"),
        task("s5", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s6"),
        task("s6", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s7"),
        task("s7", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s8"),
        task("s8", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}, next = "s9"),
        task("s9", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.input["p"]}),
    ],
)
`

// BenchmarkDurableSteps runs 1,000 runs of a 10-step testkit.echo flow at
// the default concurrency, every step durable, and reports steps/s beside
// the two physical limits measured in the same run: Store.Update commits/s
// from 64 goroutines (group commit) and host tool calls/s from 16 callers.
func BenchmarkDurableSteps(b *testing.B) {
	const runs, steps = 1000, 10
	payload := `"` + strings.Repeat("a", 100) + `"`
	for b.Loop() {
		bd := setup(b, Config{Workers: benchWorkers}, benchFlow)
		ctx := context.Background()

		// Limit 1: group-commit commits/s on the same disk.
		lim, err := badgerstore.Open(filepath.Join(b.TempDir(), "limit"), badgerstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		const commits = 20000
		el, err := badgerstore.MeasureUpdates(ctx, lim, 64, commits, func(i int) func(store.Tx) error {
			return func(tx store.Tx) error { return tx.MetaPut(fmt.Sprint("k", i), []byte("v")) }
		})
		lim.Close()
		if err != nil {
			b.Fatal(err)
		}
		groupRate := commits / el.Seconds()

		// Limit 2: tool calls/s through the host from 16 callers.
		const calls = 8000
		in := json.RawMessage(`{"payload":` + payload + `}`)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < calls; i += 16 {
					if _, err := bd.host.Call(ctx, host.CallRequest{Tool: "testkit.echo", Input: in, IdempotencyKey: fmt.Sprint("lim", i)}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		callRate := calls / time.Since(start).Seconds()

		// The engine: 1,000 runs of 10 durable steps.
		// Clients submit concurrently, as many would.
		start = time.Now()
		bd.completeAll(b, bd.submitAll(b, runs, "ten", `{"p":`+payload+`}`))
		stepRate := float64(runs*steps) / time.Since(start).Seconds()
		b.ReportMetric(stepRate, "steps/s")
		b.ReportMetric(groupRate, "group-commits/s")
		b.ReportMetric(callRate, "host-calls/s")
		b.ReportMetric(stepRate/min(groupRate, callRate), "ratio-to-limit")
	}
}

// benchWorkers is the slot count BenchmarkDurableSteps runs with: the
// engine's default unless WEIR_BENCH_WORKERS says otherwise.
var benchWorkers = func() int {
	n, _ := strconv.Atoi(os.Getenv("WEIR_BENCH_WORKERS"))
	return n
}()

// submitAll starts n runs of flow with input for alice from 32 clients at
// once, as many would, and returns their ids in order; a refused start
// fails the benchmark.
func (bd *bundle) submitAll(b *testing.B, n int, flow, input string) []string {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	var sub sync.WaitGroup
	for c := range 32 {
		sub.Go(func() {
			for i := c; i < n; i += 32 {
				res, err := bd.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: flow, Input: json.RawMessage(input)})
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
	return ids
}

// completeAll waits for every run of ids to end and fails the benchmark
// unless each completed.
func (bd *bundle) completeAll(b *testing.B, ids []string) {
	b.Helper()
	for _, id := range ids {
		if r := bd.waitTerminal(b, id); r.Phase != store.PhaseCompleted {
			b.Fatalf("run %s: %s %+v", id, r.Phase, r.Error)
		}
	}
}
