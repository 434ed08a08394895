package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const (
	fanoutChildren = 1000
	fanoutWidth    = 64
)

var fanoutFlow = fmt.Sprintf(`
flow(name = "wide", nodes = [
    fanout("fan", items = lambda ctx: list(range(%d)), tool = "testkit.echo",
           args = lambda ctx, item: {"i": item}, width = %d, depth = 1, max_items = %d),
])

flow(name = "one", nodes = [task("t", tool = "testkit.echo")])
`, fanoutChildren, fanoutWidth, fanoutChildren)

// fanout is scenario 5: one run fans 1,000 testkit.echo children out at
// width 64 on a real daemon; the figure is submission to the run's
// completion (the cohort's marker is written with the run's move on), and
// the retry amplification of testkit.echo over the fan-out from GET
// /v1/stats (attempts ÷ units, counted between two snapshots). The limit
// is the time the raw gRPC echo takes for as many calls at 16 callers.
func fanout(b *bench) ([]row, error) {
	echo, err := b.rawEchoCalls(echoFanCallers)
	if err != nil {
		return nil, err
	}
	d, err := b.startDaemon("fanout")
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "wide", fanoutFlow); err != nil {
		return nil, err
	}
	c := d.Client()
	if err := runToEnd(b.ctx, c, "one", json.RawMessage(`{}`)); err != nil { // launch the plugin
		return nil, err
	}
	before, err := echoStats(b, c)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "wide", Input: json.RawMessage(`{}`)})
	if err != nil {
		return nil, err
	}
	if err := waitPhase(b.ctx, c, res.RunID, 2*time.Minute); err != nil {
		return nil, err
	}
	took := time.Since(start)
	after, err := echoStats(b, c)
	if err != nil {
		return nil, err
	}
	v, err := c.RunGet(b.ctx, res.RunID)
	if err != nil {
		return nil, err
	}
	// The run's output is its last node's result: the fan-out's.
	var out struct {
		Results    []json.RawMessage `json:"results"`
		Sufficient bool              `json:"sufficient"`
	}
	if err := json.Unmarshal(v.Output, &out); err != nil {
		return nil, fmt.Errorf("fan-out output %.200s: %w", v.Output, err)
	}
	if len(out.Results) != fanoutChildren || !out.Sufficient {
		return nil, fmt.Errorf("fan-out closed with %d results (sufficient %v), want %d", len(out.Results), out.Sufficient, fanoutChildren)
	}
	if cs := v.Progress; cs == nil || len(cs.Cohorts) != 1 || !cs.Cohorts[0].Marker || cs.Cohorts[0].Cutoff.IsZero() {
		return nil, fmt.Errorf("the fan-out's cohort is not closed with a marker and a cutoff: %+v", cs)
	}
	units, attempts := after.Units-before.Units, after.Attempts-before.Attempts
	if units != fanoutChildren {
		return nil, fmt.Errorf("testkit.echo counted %d units over the fan-out, want %d", units, fanoutChildren)
	}
	amp := float64(attempts) / float64(units)
	raw := time.Duration(float64(fanoutChildren) / echo.PerSec() * float64(time.Second))
	fmt.Fprintf(b.log, "  closed in %v: %d attempts for %d units\n", took.Round(time.Millisecond), attempts, units)
	return []row{
		{figure: "fan-out of 1,000 testkit.echo children, width 64: submission → closed and run completed", value: dur(took),
			limit: "1,000 raw gRPC echoes at 16 callers " + dur(raw), ratio: ratio(float64(took) / float64(raw))},
		{figure: "same: children/s", value: perSec(fanoutChildren / took.Seconds()), limit: "raw gRPC, 16 callers " + perSec(echo.PerSec()),
			ratio: ratio(fanoutChildren / took.Seconds() / echo.PerSec())},
		{figure: fmt.Sprintf("amplification (GET /v1/stats, testkit.echo: %d attempts ÷ %d units)", attempts, units), value: fmt.Sprintf("%.3f", amp),
			target: verdict("≤ 1.02", amp <= 1.02)},
	}, nil
}

// echoStats returns the daemon's testkit.echo figures.
func echoStats(b *bench, c *client.Client) (apitypes.TypeStats, error) {
	st, err := c.Stats(b.ctx)
	if err != nil {
		return apitypes.TypeStats{}, err
	}
	for _, ts := range st.Types {
		if ts.Type == "testkit.echo" {
			return ts, nil
		}
	}
	return apitypes.TypeStats{}, nil
}
