package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// compatParked is how many runs scenario 19 parks on the first version.
const compatParked = 10000

// compatRegistrations is how many registrations each side of scenario 19
// times (medians).
const compatRegistrations = 101

// compatFlow is the flow whose runs park at its wait; "other" is the same
// shape with no runs.
const compatFlow = `flow(name = "deploy", nodes = [
    task("a", tool = "testkit.echo", args = {"x": 1}, next = "hold"),
    wait("hold", timeout = "30d", next = "b"),
    task("b", tool = "testkit.echo", args = {"y": 2}),
])
`

// parkedCompat is scenario 19: registering a new version of a flow while
// 10,000 runs of its first version are parked, which reports the parked
// runs that could not go on under it (W_PARKED_INCOMPATIBLE), beside the
// same registration of a flow of the same shape with no runs, on the same
// daemon (the background work of the parked runs is on both sides), the
// two taking turns; medians of compatRegistrations each. Two kinds of new
// version: one the runs fit (a node added) and one they do not (a node
// they hold a result of removed: the warning names them).
func parkedCompat(b *bench) ([]row, error) {
	d, err := b.startDaemon("parkedcompat", "--max-queued", fmt.Sprint(compatParked+1000))
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "compat", compatFlow+strings.Replace(compatFlow, `"deploy"`, `"other"`, 1)); err != nil {
		return nil, err
	}
	c := d.Client()
	start := time.Now()
	var next atomic.Int64
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= compatParked {
				if _, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "deploy", Input: json.RawMessage(`{}`)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("submitting: %w", err)
	}
	for {
		q, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseQueued}))
		if err != nil {
			return nil, err
		}
		r, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseRunning}))
		if err != nil {
			return nil, err
		}
		if len(q)+len(r) == 0 {
			break
		}
		if time.Since(start) > 2*time.Minute {
			return nil, fmt.Errorf("%d runs queued and %d running 2m after the first submission", len(q), len(r))
		}
		if err := pause(b.ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(b.log, "  %d runs parked in %v\n", compatParked, time.Since(start).Round(time.Millisecond))

	register := func(flow, src string, i int, warned bool) (time.Duration, error) {
		src = fmt.Sprintf(strings.Replace(src, `"deploy"`, `"`+flow+`"`, 1), i%2)
		t0 := time.Now()
		res, err := c.FlowRegister(b.ctx, apitypes.SourceFile{Path: flow + ".star", Src: src})
		took := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if got := len(res.Diagnostics) > 0; got != warned {
			return 0, fmt.Errorf("registering %s: warnings %+v, want warned %v", flow, res.Diagnostics, warned)
		}
		return took, nil
	}
	cases := []struct {
		figure, src string
		warned      bool
	}{
		{"a node added (the runs fit)", strings.Replace(compatFlow, `args = {"y": 2}),`, `args = {"y": 2}, next = "c"), task("c", tool = "testkit.echo", args = {"z": %d}),`, 1), false},
		{"a node they hold a result of removed (W_PARKED_INCOMPATIBLE names them)",
			strings.Replace(compatFlow, `task("a", tool = "testkit.echo", args = {"x": 1}, next = "hold"),`, `task("a2", tool = "testkit.echo", args = {"x": %d}, next = "hold"),`, 1), true},
	}
	var rows []row
	for _, cs := range cases {
		var none, parked []time.Duration
		for i := range compatRegistrations {
			first, second := "other", "deploy"
			if i%2 == 1 {
				first, second = second, first
			}
			for _, flow := range []string{first, second} {
				took, err := register(flow, cs.src, i, flow == "deploy" && cs.warned)
				if err != nil {
					return rows, err
				}
				if flow == "deploy" {
					parked = append(parked, took)
				} else {
					none = append(none, took)
				}
			}
		}
		slices.Sort(none)
		slices.Sort(parked)
		mn, mp := none[len(none)/2], parked[len(parked)/2]
		r := float64(mp) / float64(mn)
		rows = append(rows, row{figure: fmt.Sprintf("register a new version with %s of its first version parked: %s, median of %d (daemon)", thousands(compatParked)+" runs", cs.figure, compatRegistrations),
			value: dur(mp), limit: "a flow of the same shape with none parked " + dur(mn), ratio: ratio(r), target: verdict("≤ 1.2x", r <= 1.2)})
	}
	return rows, nil
}
