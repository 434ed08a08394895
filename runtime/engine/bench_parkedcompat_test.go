package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// parkedCompatSrc parks every run at its wait; the registrations the
// benchmark times are the next versions of it.
const parkedCompatSrc = `flow(name = "deploy", nodes = [
    task("a", tool = "testkit.echo", args = {"x": 1}, next = "hold"),
    wait("hold", timeout = "30d", next = "b"),
    task("b", tool = "testkit.echo", args = {"y": 2}),
])`

// BenchmarkRegisterWithParked times the registration of a new version of
// a flow with 10,000 runs of its first version parked (WEIR_BENCH_PARKED
// changes it), beside the same registration of a flow of the same shape
// with none, on the same engine and store (the background work the
// parked runs make is on both sides): the report on parked runs
// (parkedcompat.go) must cost next to nothing when they fit (an added
// node: one group, one continuation read), and little when they do not
// (a removed node the runs hold a result of: the group's first
// maxParkedCounted ids listed). Each iteration registers one of two
// versions in turn, so every registration stores a version.
func BenchmarkRegisterWithParked(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("WEIR_BENCH_PARKED")); err == nil && v > 0 {
		n = v
	}
	other := strings.Replace(parkedCompatSrc, `"deploy"`, `"other"`, 1)
	bd := setup(b, Config{MaxQueued: n + 1}, parkedCompatSrc+"\n"+other)
	bd.submitAll(b, n, "deploy", `{}`)
	bd.waitParked(b, n)
	added := strings.Replace(parkedCompatSrc, `args = {"y": 2}),`, `args = {"y": 2}, next = "c"), task("c", tool = "testkit.echo", args = {"z": %d}),`, 1)
	removed := strings.Replace(parkedCompatSrc, `task("a", tool = "testkit.echo", args = {"x": 1}, next = "hold"),`, `task("a2", tool = "testkit.echo", args = {"x": %d}, next = "hold"),`, 1)
	register := func(b *testing.B, src string, warned bool) time.Duration {
		start := time.Now()
		res, err := bd.eng.Register(context.Background(), []SourceFile{{Path: "next.star", Src: src}})
		took := time.Since(start)
		if err != nil || len(res.Diagnostics.Errors()) > 0 {
			b.Fatal(err, res.Diagnostics)
		}
		if got := len(res.Diagnostics) > 0; got != warned {
			b.Fatalf("warnings %s", res.Diagnostics)
		}
		return took
	}
	for _, c := range []struct{ name, src string }{{"fits", added}, {"misfits", removed}} {
		b.Run(c.name, func(b *testing.B) {
			// The two sides take turns, so the machine's drift (the
			// store's compactions after the parking, other work) is on
			// both; medians, so that one stall does not decide.
			var none, parked []time.Duration
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					none = append(none, register(b, fmt.Sprintf(strings.Replace(c.src, `"deploy"`, `"other"`, 1), i%2), false))
				}
				parked = append(parked, register(b, fmt.Sprintf(c.src, i%2), c.name == "misfits"))
				if i%2 == 1 {
					none = append(none, register(b, fmt.Sprintf(strings.Replace(c.src, `"deploy"`, `"other"`, 1), i%2), false))
				}
				i++
			}
			slices.Sort(none)
			slices.Sort(parked)
			mn, mp := none[len(none)/2], parked[len(parked)/2]
			b.ReportMetric(float64(mn.Microseconds())/1000, "none-ms")
			b.ReportMetric(float64(mp.Microseconds())/1000, "parked-ms")
			b.ReportMetric(float64(mp)/float64(mn), "ratio")
		})
	}
}

// waitParked waits until n runs are parked.
func (bd *bundle) waitParked(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var got int
		if err := bd.st.View(context.Background(), func(tx store.Tx) error {
			var err error
			got, err = tx.(store.RunCounter).RunCount(store.PhaseWaiting)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d runs parked", got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
