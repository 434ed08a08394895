package sandbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/sandbox"
)

// BenchmarkCall measures one callable evaluation (a task's args, reading
// ctx.input and ctx.results) in this process and through a sandbox worker,
// in the same run: µs per call for each and their ratio. A batch of ten
// calls (a fan-out's args) shows what batching saves per call.
func BenchmarkCall(b *testing.B) {
	var loads atomic.Int32
	src := callSources(&loads)
	c := flows.Context{RunID: "r1", Attempt: 1, Input: map[string]any{"n": int64(41), "text": "some input of a run"},
		Results: map[string]any{"a": map[string]any{"ok": true, "items": []any{"x", "y", "z"}}}}
	one := []flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "f", Param: "args"}, Args: []any{"item"}}}
	ten := make([]flows.Call, 10)
	for i := range ten {
		ten[i] = one[0]
	}
	local := script.Local{Cache: script.NewCache(0, script.Loader{})}
	pool := newPool(b, sandbox.Config{Workers: 1})
	measure := func(s flows.Scripts, calls []flows.Call, n int) time.Duration {
		start := time.Now()
		for range n {
			res, err := s.Call(context.Background(), src, c, calls)
			if err != nil || res[0].Err != nil {
				b.Fatal(err, res)
			}
		}
		return time.Since(start) / time.Duration(n*len(calls))
	}
	for b.Loop() {
		const n = 2000
		inProcess := measure(local, one, n)
		sandboxed := measure(pool, one, n)
		batched := measure(pool, ten, n/10)
		b.ReportMetric(float64(inProcess.Nanoseconds())/1e3, "inprocess-µs/call")
		b.ReportMetric(float64(sandboxed.Nanoseconds())/1e3, "sandboxed-µs/call")
		b.ReportMetric(float64(batched.Nanoseconds())/1e3, "batched-µs/call")
		b.ReportMetric(float64(sandboxed)/float64(inProcess), "sandbox-cost")
	}
}

// BenchmarkConcurrentCalls measures what sharing round trips saves when
// many steps evaluate at once: 16 goroutines, each with a ctx of its own,
// call one worker, with each Call alone in its round trip (MaxBatch 1) and
// with the default batching, in alternating rounds of the same run. It
// reports µs per call for each, their ratio, and calls/trip.
func BenchmarkConcurrentCalls(b *testing.B) {
	const callers, round = 16, 1600
	var loads atomic.Int32
	src := callSources(&loads)
	alone := newPool(b, sandbox.Config{Workers: 1, MaxBatch: 1})
	batched := newPool(b, sandbox.Config{Workers: 1})
	ref := flows.CallableRef{Flow: "c", Node: "f", Param: "args"}
	measure := func(p *sandbox.Pool) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				for i := g; i < round; i += callers {
					c := flows.Context{RunID: fmt.Sprint("r", i), Attempt: 1, Input: map[string]any{"n": int64(i)}, Results: map[string]any{"a": i}}
					res, err := p.Call(context.Background(), src, c, []flows.Call{{Ref: ref, Args: []any{int64(i)}}})
					if err != nil || res[0].Err != nil {
						b.Error(err, res)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var a, t time.Duration
	n := 0
	for b.Loop() {
		a += measure(alone)
		t += measure(batched)
		n += round
	}
	s := batched.Stats()
	b.ReportMetric(float64(a.Nanoseconds())/1e3/float64(n), "alone-µs/call")
	b.ReportMetric(float64(t.Nanoseconds())/1e3/float64(n), "batched-µs/call")
	b.ReportMetric(float64(a)/float64(t), "alone/batched")
	b.ReportMetric(float64(s.Calls)/float64(s.Requests), "calls/trip")
}
