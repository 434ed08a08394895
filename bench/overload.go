package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The overloaded daemon: few slots, a short queue, and runs of one known
// length, so that what it can admit is known in advance.
const (
	overloadWorkers   = 4
	overloadMaxQueued = 50
	overloadSleep     = 50 * time.Millisecond
	overloadFactor    = 10
	overloadClients   = 16
)

const overloadFlow = `
flow(
    name = "work",
    nodes = [task("work", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})],
)
`

// overload is scenario 8: offer ten times what the slots and the queue can
// admit, for a bounded time, against a daemon started with small limits;
// then let it drain and account for every submission: accepted, refused
// (by reason), completed, lost (must be 0), the retry amplification the
// daemon reports, and the p99 wait from queued to leased.
func overload(b *bench) ([]row, error) {
	d, err := b.startDaemon("overload", "--workers", fmt.Sprint(overloadWorkers), "--max-queued", fmt.Sprint(overloadMaxQueued))
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "work", overloadFlow); err != nil {
		return nil, err
	}
	c := d.Client()
	input := json.RawMessage(fmt.Sprintf(`{"ms":%d}`, overloadSleep.Milliseconds()))
	if err := runToEnd(b.ctx, c, "work", input); err != nil { // launch the plugin
		return nil, err
	}

	// What the daemon can admit: its slots' throughput, plus one full
	// queue over the whole window.
	window := b.overloadFor
	capacity := float64(overloadWorkers) / overloadSleep.Seconds()
	admissible := capacity*window.Seconds() + overloadMaxQueued
	offerRate := overloadFactor * admissible / window.Seconds()

	o := offer(b.ctx, c, "work", input, offerRate, window)
	fmt.Fprintf(b.log, "  offered %d in %v (%.0f/s asked), accepted %d, refused %v, transport errors %d\n",
		o.offered, o.elapsed.Round(time.Millisecond), offerRate, len(o.accepted), o.refused, o.transport)
	if o.transport > 0 {
		return nil, fmt.Errorf("%d submissions got no answer: their fate is unknown", o.transport)
	}
	drainStart := time.Now()
	if err := waitIdle(b.ctx, c, time.Minute); err != nil {
		return nil, fmt.Errorf("draining: %w", err)
	}
	drained := time.Since(drainStart)

	// Account for every accepted run against the store.
	runs, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{}))
	if err != nil {
		return nil, err
	}
	byID := map[string]apitypes.Phase{}
	for _, v := range runs {
		byID[v.ID] = v.Phase
	}
	phases := map[apitypes.Phase]int{}
	lost := 0
	var waits []time.Duration
	for _, id := range o.accepted {
		p, ok := byID[id]
		if !ok || !p.Terminal() {
			lost++
			continue
		}
		phases[p]++
		w, err := admissionWait(b.ctx, c, id)
		if err != nil {
			return nil, err
		}
		if w >= 0 {
			waits = append(waits, w)
		}
	}
	slices.Sort(waits)
	st, err := c.Stats(b.ctx)
	if err != nil {
		return nil, err
	}
	ampl := -1.0
	for _, t := range st.Types {
		if t.Type == "testkit.sleep" {
			ampl = t.Amplification
		}
	}
	refused := 0
	var reasons []string
	for code, n := range o.refused {
		refused += n
		reasons = append(reasons, fmt.Sprintf("%s %s", code, thousands(float64(n))))
	}
	sort.Strings(reasons)
	daemonRefused := st.Refusals[engine.CodeQueueFull]

	var p99 time.Duration
	if len(waits) > 0 {
		p99 = waits[int(0.99*float64(len(waits)-1))]
	}
	// A run accepted last waits for the whole queue ahead of it.
	queueDrain := time.Duration(float64(overloadMaxQueued) / capacity * float64(time.Second))
	goodput := float64(phases[apitypes.PhaseCompleted]) / (o.elapsed + drained).Seconds()
	accounted := phases[apitypes.PhaseCompleted] + phases[apitypes.PhaseFailed] + phases[apitypes.PhaseCancelled]

	rows := []row{
		{figure: fmt.Sprintf("offered for %v (--workers %d --max-queued %d, %v runs)", window, overloadWorkers, overloadMaxQueued, overloadSleep),
			value: fmt.Sprintf("%s (%s)", thousands(float64(o.offered)), perSec(float64(o.offered)/o.elapsed.Seconds())),
			limit: "admissible " + thousands(admissible), ratio: ratio(float64(o.offered) / admissible), target: verdict("≈ 10x offered", float64(o.offered)/admissible >= 0.8*overloadFactor)},
		{figure: "accepted", value: thousands(float64(len(o.accepted))), limit: "admissible " + thousands(admissible), ratio: ratio(float64(len(o.accepted)) / admissible)},
		{figure: "refused, by reason (client; daemon counts " + thousands(float64(daemonRefused)) + " E_QUEUE_FULL)", value: thousands(float64(refused)) + ": " + strings.Join(reasons, ", ")},
		{figure: "completed / failed / cancelled", value: fmt.Sprintf("%s / %s / %s", thousands(float64(phases[apitypes.PhaseCompleted])), thousands(float64(phases[apitypes.PhaseFailed])), thousands(float64(phases[apitypes.PhaseCancelled])))},
		{figure: "lost (accepted, not terminal after drain or missing)", value: fmt.Sprint(lost), target: verdict("= 0", lost == 0 && accounted == len(o.accepted))},
		{figure: "completions/s under overload", value: perSec(goodput), limit: "slots " + perSec(capacity), ratio: ratio(goodput / capacity)},
		{figure: "retry amplification (GET /v1/stats, testkit.sleep)", value: fmt.Sprintf("%.3f", ampl), target: verdict("≤ 1.05", ampl >= 1 && ampl <= 1.05)},
		{figure: "p99 admission wait (queued → leased)", value: dur(p99), limit: "full queue drains in " + dur(queueDrain), ratio: ratio(float64(p99) / float64(queueDrain))},
	}
	return rows, nil
}

// offered is what the clients saw.
type offered struct {
	offered   int
	accepted  []string
	refused   map[string]int // by code
	transport int            // no answer
	elapsed   time.Duration
}

// offer submits runs at rate per second for window from overloadClients
// goroutines, each on its own schedule.
func offer(ctx context.Context, c *client.Client, flow string, input json.RawMessage, rate float64, window time.Duration) offered {
	var mu sync.Mutex
	o := offered{refused: map[string]int{}}
	interval := time.Duration(float64(time.Second) * overloadClients / rate)
	start := time.Now()
	end := start.Add(window)
	var wg sync.WaitGroup
	for g := range overloadClients {
		wg.Go(func() {
			next := start.Add(interval * time.Duration(g) / overloadClients)
			for {
				if now := time.Now(); now.Before(next) {
					select {
					case <-ctx.Done():
						return
					case <-time.After(next.Sub(now)):
					}
				}
				if !time.Now().Before(end) {
					return
				}
				next = next.Add(interval)
				res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: flow, Input: input})
				mu.Lock()
				o.offered++
				switch code := client.ErrorCode(err); {
				case err == nil:
					o.accepted = append(o.accepted, res.RunID)
				case code != "":
					o.refused[code]++
				default:
					o.transport++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	o.elapsed = time.Since(start)
	return o
}

// admissionWait is the time from a run's "queued" event to its first
// "leased" one, or -1 if it was never leased (dropped or cancelled queued).
func admissionWait(ctx context.Context, c *client.Client, id string) (time.Duration, error) {
	return eventGap(ctx, c, id, "queued", "leased")
}

// eventGap is the time from a run's first from event to the first to
// event after it, or -1 if the run has no such pair.
func eventGap(ctx context.Context, c *client.Client, id, from, to string) (time.Duration, error) {
	evs, err := client.Collect(c.RunEventsAll(ctx, id, client.EventListParams{}))
	if err != nil {
		return 0, err
	}
	var start time.Time
	for _, e := range evs {
		switch {
		case e.Type == from && start.IsZero():
			start = e.At
		case e.Type == to && !start.IsZero():
			return e.At.Sub(start), nil
		}
	}
	return -1, nil
}
