package main

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// recoveryFlows: "exhausts" fails its first two tries of "try" (one
// retry), parks on its exhausted wait, and once redriven gets through on
// the third and goes on to "done"; "fresh" is the same work as a start:
// the call that gets through (testkit.fail records every attempt durably,
// so both sides pay that), then "done".
const recoveryFlows = `
flow(name = "exhausts", nodes = [
    task("try", tool = "testkit.fail", args = lambda ctx: {"times": 2}, retries = 1, on_exhausted = "park", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"ok": True}),
])

flow(name = "fresh", nodes = [
    task("try", tool = "testkit.fail", args = lambda ctx: {"times": 0}, retries = 1, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"ok": True}),
])
`

const redriveTasks = 1000

// recovery is scenario 13: the operations after something went wrong,
// each beside doing the same work afresh, in one daemon.
func recovery(b *bench) ([]row, error) {
	d, err := b.startDaemon("recovery")
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "recovery", recoveryFlows); err != nil {
		return nil, err
	}
	c := d.Client()
	redrive, err := redriveAll(b, c)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	fresh, err := startMany(b.ctx, c, "fresh", json.RawMessage(`{}`), redriveTasks)
	if err != nil {
		return nil, err
	}
	if err := waitAllCompleted(b, c, fresh); err != nil {
		return nil, err
	}
	alone := time.Since(start)
	r := float64(redrive) / float64(alone)
	return []row{{
		figure: fmt.Sprintf("redrive of %s runs parked on exhaustion (weir deadletter redrive --flow): the request to every run completed", thousands(redriveTasks)),
		value:  dur(redrive), limit: "the same work started fresh " + dur(alone), ratio: ratio(r), target: verdict("≤ 1.2x", r <= 1.2),
	}}, nil
}

// redriveAll starts redriveTasks runs of "exhausts", waits until each is
// parked on its exhausted wait, then times one redrive of the flow's dead
// letters (as many requests as MaxRedriveBatch needs) until every run
// completed.
func redriveAll(b *bench, c *client.Client) (time.Duration, error) {
	runs, err := startMany(b.ctx, c, "exhausts", json.RawMessage(`{}`), redriveTasks)
	if err != nil {
		return 0, err
	}
	for _, id := range runs {
		ws, err := waitDecision(b.ctx, c, id, 2*time.Minute)
		if err != nil {
			return 0, err
		}
		if len(ws) != 1 || ws[0].Kind != "exhausted" {
			return 0, fmt.Errorf("run %s waits for %+v, want its exhausted wait", id, ws)
		}
	}
	start := time.Now()
	redriven := 0
	for redriven < redriveTasks {
		res, err := c.Redrive(b.ctx, apitypes.RedriveRequest{Flow: "exhausts", Reason: "bench"})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, r := range res.Results {
			if !r.Redriven {
				return 0, fmt.Errorf("redrive of %s refused: %+v", r.TaskID, r.Error)
			}
			n++
		}
		if n == 0 {
			return 0, fmt.Errorf("%d of %d redriven, and the next redrive found none", redriven, redriveTasks)
		}
		redriven += n
	}
	if err := waitAllCompleted(b, c, runs); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// waitAllCompleted holds a wait on each run, 32 at a time, until every one
// completed.
func waitAllCompleted(b *bench, c *client.Client, runs []string) error {
	const waiters = 32
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for w := range waiters {
		wg.Go(func() {
			for i := w; i < len(runs); i += waiters {
				if err := waitPhase(b.ctx, c, runs[i], 2*time.Minute); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
