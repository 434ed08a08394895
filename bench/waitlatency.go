package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// finishAnswerRuns is how many runs finishToAnswer times.
const finishAnswerRuns = 200

// finishToAnswer starts n runs of flow one at a time, each followed by a
// client holding GET /v1/runs/{id}?wait=, and returns, sorted, each run's
// time from its finish (the stamp of its completed event, taken as the
// finishing transaction begins) to the client's receiving the answer. The
// daemon and the client read the same machine clock. The figure holds
// the finishing commit itself, then the engine's wake of the held request
// and the answer's trip over the socket.
func finishToAnswer(ctx context.Context, c *client.Client, flow string, input json.RawMessage, n int) ([]time.Duration, error) {
	ids := make([]string, n)
	got := make([]time.Time, n)
	for i := range n {
		res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: flow, Input: input})
		if err != nil {
			return nil, err
		}
		v, err := c.RunWait(ctx, res.RunID, client.RunWaitParams{})
		got[i] = time.Now()
		if err != nil {
			return nil, err
		}
		if v.Phase != apitypes.PhaseCompleted {
			return nil, fmt.Errorf("run %s ended %s: %+v", v.ID, v.Phase, v.Error)
		}
		ids[i] = res.RunID
	}
	out := make([]time.Duration, 0, n)
	for i, id := range ids {
		evs, err := client.Collect(c.RunEventsAll(ctx, id, client.EventListParams{}))
		if err != nil {
			return nil, err
		}
		var finished time.Time
		for _, ev := range evs {
			if ev.Type == "completed" {
				finished = ev.At
			}
		}
		if finished.IsZero() {
			return nil, fmt.Errorf("run %s: no completed event", id)
		}
		out = append(out, got[i].Sub(finished))
	}
	slices.Sort(out)
	return out, nil
}
