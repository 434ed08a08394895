package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/internal/flowgen"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/replay"
)

// replaySteps is how many testkit.echo steps scenario 17's run takes.
const replaySteps = 100

// replayRuns is how many times scenario 17 runs the flow live, and
// replays its recording: the medians are compared.
const replayRuns = 5

// replayFlow is a chain of replaySteps testkit.echo tasks.
var replayFlow = flowgen.Chain("hundred", replaySteps, "testkit.echo")

// replayRun is scenario 17: a run of 100 testkit.echo steps, live through
// a real `weir serve` (the plugin process, Badger), from the start
// request to the end the client waited for; then its recording, made
// through the API as `weir run export` makes it, replayed in this process
// as `weir test` replays it (an embedded engine, every call answered from
// the recording). The ratio is replay ÷ live, medians of five.
func replayRun(b *bench) ([]row, error) {
	d, err := b.startDaemon("replay")
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "hundred", replayFlow); err != nil {
		return nil, err
	}
	c := d.Client()
	var live, replayed []time.Duration
	var id string
	for range replayRuns {
		start := time.Now()
		res, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "hundred", Input: json.RawMessage(`{}`)})
		if err != nil {
			return nil, err
		}
		if err := waitPhase(b.ctx, c, res.RunID, time.Minute); err != nil {
			return nil, err
		}
		live, id = append(live, time.Since(start)), res.RunID
	}
	rec, err := replay.Record(b.ctx, c, id, nil, time.Now())
	if err != nil {
		return nil, err
	}
	for range replayRuns {
		start := time.Now()
		res, err := replay.Replay(b.ctx, rec, replay.Options{})
		if err != nil {
			return nil, err
		}
		if !res.Pass {
			return nil, fmt.Errorf("the replay of run %s diverged: %s", id, res.Divergence)
		}
		replayed = append(replayed, time.Since(start))
	}
	slices.Sort(live)
	slices.Sort(replayed)
	l, r := live[len(live)/2], replayed[len(replayed)/2]
	q := float64(r) / float64(l)
	return []row{{figure: fmt.Sprintf("replay of a recorded run of %d testkit.echo steps (weir test's engine), median of %d, beside the run live", replaySteps, replayRuns),
		value: r.Round(100 * time.Microsecond).String(), limit: "live " + l.Round(100*time.Microsecond).String(), ratio: ratio(q), target: verdict("≤ 0.2x", q <= 0.2)}}, nil
}
