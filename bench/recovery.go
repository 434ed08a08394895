package main

import (
	"encoding/json"
	"fmt"
	"strings"
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

// forkSteps and forkAt: a run of forkSteps chained echo steps, forked at
// step forkAt.
const forkSteps, forkAt = 100, 90

// chainFlow is a flow of n testkit.echo steps s1 … sn, one after another.
func chainFlow(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flow(name = %q, nodes = [\n", name)
	for i := 1; i <= n; i++ {
		next := ""
		if i < n {
			next = fmt.Sprintf(", next = \"s%d\"", i+1)
		}
		fmt.Fprintf(&b, "    task(\"s%d\", tool = \"testkit.echo\", args = {\"step\": %d}%s),\n", i, i, next)
	}
	b.WriteString("])\n")
	return b.String()
}

// recovery is scenario 13: the operations after something went wrong,
// each beside doing the same work afresh, in one daemon.
func recovery(b *bench) ([]row, error) {
	d, err := b.startDaemon("recovery")
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "recovery", recoveryFlows+chainFlow("chain", forkSteps)); err != nil {
		return nil, err
	}
	c := d.Client()
	forked, fresh, err := forkBeside(b, c)
	if err != nil {
		return nil, err
	}
	fr := float64(forked) / float64(fresh)
	rows := []row{{
		figure: fmt.Sprintf("fork of a %d-step run at step %d (weir run fork --from s%d): the request to the fork completed", forkSteps, forkAt, forkAt),
		value:  dur(forked), limit: "the same run started fresh " + dur(fresh), ratio: ratio(fr), target: verdict("≤ 0.2x", fr <= 0.2),
	}}
	redrive, err := redriveAll(b, c)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	freshRuns, err := startMany(b.ctx, c, "fresh", json.RawMessage(`{}`), redriveTasks)
	if err != nil {
		return nil, err
	}
	if err := waitAllCompleted(b, c, freshRuns); err != nil {
		return nil, err
	}
	alone := time.Since(start)
	r := float64(redrive) / float64(alone)
	return append(rows, row{
		figure: fmt.Sprintf("redrive of %s runs parked on exhaustion (weir deadletter redrive --flow): the request to every run completed", thousands(redriveTasks)),
		value:  dur(redrive), limit: "the same work started fresh " + dur(alone), ratio: ratio(r), target: verdict("≤ 1.2x", r <= 1.2),
	}), nil
}

// forkBeside runs the chain once (the source), then times a fork of it at
// step forkAt to its end, and the same run started fresh to its end.
func forkBeside(b *bench, c *client.Client) (forked, fresh time.Duration, err error) {
	run := func() (time.Duration, string, error) {
		start := time.Now()
		res, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "chain", Input: json.RawMessage(`{}`)})
		if err != nil {
			return 0, "", err
		}
		return time.Since(start), res.RunID, waitPhase(b.ctx, c, res.RunID, 2*time.Minute)
	}
	if _, _, err := run(); err != nil { // warm: the flow's evaluator loaded
		return 0, 0, err
	}
	start := time.Now()
	_, src, err := run()
	if err != nil {
		return 0, 0, err
	}
	fresh = time.Since(start)
	start = time.Now()
	f, err := c.Fork(b.ctx, src, apitypes.ForkRequest{From: fmt.Sprintf("s%d", forkAt), Reason: "bench"})
	if err != nil {
		return 0, 0, err
	}
	if err := waitPhase(b.ctx, c, f.RunID, 2*time.Minute); err != nil {
		return 0, 0, err
	}
	forked = time.Since(start)
	if len(f.Copied) != forkAt-1 {
		return 0, 0, fmt.Errorf("the fork copied %d results, want %d", len(f.Copied), forkAt-1)
	}
	return forked, fresh, nil
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
