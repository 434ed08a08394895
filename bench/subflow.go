package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const subflowFlows = `
flow(name = "approval", nodes = [
    wait("approve", timeout = "1h", next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"payload": ctx.results["approve"]}),
])

flow(name = "parent_waits", nodes = [
    subflow("call", flow = "approval", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"child": ctx.results["call"]}),
])
`

const (
	subflowCalls     = 1000
	subflowApprovers = 4
	// daemonTick is `weir serve`'s scheduler timer for parked tasks coming
	// due (engine.Config.Tick's default; serve has no flag for it). A
	// resume that waited for it would take tick/2 on average.
	daemonTick = 100 * time.Millisecond
)

// subflowResume is scenario 4: 1,000 parent runs each call a child that
// parks on a human wait, so every resume goes through the child's
// announcement and the queue, not the inline path. Children are approved
// four at a time (the latency measured is the resume path's, not a
// burst's queue); the latency is the child's "completed" event to the
// parent's next "leased" event, both stamped by the daemon.
func subflowResume(b *bench) ([]row, error) {
	d, err := b.startDaemon("subflow")
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "subflows", subflowFlows); err != nil {
		return nil, err
	}
	c := d.Client()
	parents, err := startMany(b.ctx, c, "parent_waits", json.RawMessage(`{}`), subflowCalls)
	if err != nil {
		return nil, err
	}
	// Every child must be waiting before the first approval.
	children := make([]string, subflowCalls)
	for i, id := range parents {
		ws, err := waitDecision(b.ctx, c, id, time.Minute)
		if err != nil {
			return nil, err
		}
		if len(ws) != 1 || ws[0].RunID == id || ws[0].Node != "approve" {
			return nil, fmt.Errorf("parent %s: open waits %+v, want its child's approve alone", id, ws)
		}
		children[i] = ws[0].RunID
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, subflowApprovers)
	for w := range subflowApprovers {
		wg.Go(func() {
			for i := w; i < subflowCalls; i += subflowApprovers {
				if _, err := c.RunApprove(b.ctx, children[i], "approve", nil); err != nil {
					errs <- fmt.Errorf("approving %s: %w", children[i], err)
					return
				}
				if err := waitPhase(b.ctx, c, parents[i], time.Minute); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "  %d children approved and parents completed in %v\n", subflowCalls, time.Since(start).Round(time.Millisecond))

	lat := make([]time.Duration, 0, subflowCalls)
	for i, id := range parents {
		l, err := resumeLatency(b.ctx, c, children[i], id)
		if err != nil {
			return nil, err
		}
		lat = append(lat, l)
	}
	slices.Sort(lat)
	p50, p99, max := lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	fmt.Fprintf(b.log, "  resume latency p50 %v p99 %v max %v\n", p50, p99, max)
	tick := fmt.Sprintf("scheduler tick %v (a polled resume averages %v)", daemonTick, daemonTick/2)
	return []row{
		{figure: "subflow resume p50, child completed → parent leased, 1,000 calls, child parked on a human wait, 4 approvers", value: dur(p50),
			limit: tick, ratio: ratio(float64(p50) / float64(daemonTick)), target: verdict("< 5 ms", p50 < 5*time.Millisecond)},
		{figure: "subflow resume p99 (max " + dur(max) + ")", value: dur(p99),
			limit: tick, ratio: ratio(float64(p99) / float64(daemonTick)), target: verdict("< 50 ms", p99 < 50*time.Millisecond)},
	}, nil
}

// resumeLatency reads, from the daemon's timelines, the time from the
// child's "completed" event to the parent's first "leased" event at or
// after it.
func resumeLatency(ctx context.Context, c *client.Client, child, parent string) (time.Duration, error) {
	cevs, err := client.Collect(c.RunEventsAll(ctx, child, client.EventListParams{}))
	if err != nil {
		return 0, err
	}
	var done time.Time
	for _, e := range cevs {
		if e.Type == "completed" {
			done = e.At
		}
	}
	if done.IsZero() {
		return 0, fmt.Errorf("child %s has no completed event", child)
	}
	pevs, err := client.Collect(c.RunEventsAll(ctx, parent, client.EventListParams{}))
	if err != nil {
		return 0, err
	}
	for _, e := range pevs {
		if e.Type == "leased" && !e.At.Before(done) {
			return e.At.Sub(done), nil
		}
	}
	return 0, fmt.Errorf("parent %s was never leased after its child %s completed at %v", parent, child, done)
}

// startMany submits n runs of flow from 32 concurrent clients and returns
// their ids in submission order.
func startMany(ctx context.Context, c *client.Client, flow string, input json.RawMessage, n int) ([]string, error) {
	const submitters = 32
	ids := make([]string, n)
	errs := make(chan error, submitters)
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Go(func() {
			for i := s; i < n; i += submitters {
				res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: flow, Input: input})
				if err != nil {
					errs <- fmt.Errorf("submitting: %w", err)
					return
				}
				ids[i] = res.RunID
			}
		})
	}
	wg.Wait()
	close(errs)
	return ids, <-errs
}

// waitPhase holds a wait on run id until it is terminal (the daemon
// answers at its end, nothing is polled) and fails unless it completed.
func waitPhase(ctx context.Context, c *client.Client, id string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	v, err := c.RunWait(ctx, id, client.RunWaitParams{})
	switch {
	case err != nil && v != nil && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("run %s still %s after %v", id, v.Phase, bound)
	case err != nil:
		return fmt.Errorf("run %s: %w", id, err)
	case v.Phase != apitypes.PhaseCompleted:
		return fmt.Errorf("run %s ended %s: %+v", id, v.Phase, v.Error)
	}
	return nil
}

// waitDecision holds a wait on run id until a decision is open in it or
// a descendant, and returns the open decisions.
func waitDecision(ctx context.Context, c *client.Client, id string, bound time.Duration) ([]apitypes.HumanWait, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	res, err := c.RunWaitUntil(ctx, id, apitypes.UntilDecision)
	switch {
	case err != nil:
		return nil, fmt.Errorf("run %s: waiting for a decision: %w", id, err)
	case !res.Met:
		return nil, fmt.Errorf("run %s ended %s before a decision opened", id, res.Run.Phase)
	}
	return res.Decisions, nil
}

// pause waits d or until ctx ends: the pacing of a poll whose condition is
// checked by the caller.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
