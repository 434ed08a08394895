package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// tenStepFlow is ten testkit.echo steps, each one durable.
var tenStepFlow = func() string {
	var b strings.Builder
	b.WriteString("flow(\n    name = \"ten\",\n    nodes = [\n")
	for i := range 10 {
		next := ""
		if i < 9 {
			next = fmt.Sprintf(", next = \"s%d\"", i+1)
		}
		fmt.Fprintf(&b, "        task(\"s%d\", tool = \"testkit.echo\", args = lambda ctx: {\"payload\": ctx.input[\"p\"]}%s),\n", i, next)
	}
	b.WriteString("    ],\n)\n")
	return b.String()
}()

const (
	stepRuns       = 1000
	stepsPerRun    = 10
	stepSubmitters = 32
)

// durableSteps is scenario 3: 1,000 runs of the ten-step flow through a
// real `weir serve` at its default concurrency, submitted by concurrent
// clients over the socket, timed from the first submission to the last
// run's terminal record. The limit is the lower of group-commit commits/s
// and the raw 16-caller gRPC echo calls/s.
func durableSteps(b *bench) ([]row, error) {
	group, err := b.groupCommit()
	if err != nil {
		return nil, err
	}
	echo, err := b.rawEchoCalls(echoFanCallers)
	if err != nil {
		return nil, err
	}
	d, err := b.startDaemon("steps")
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "ten", tenStepFlow); err != nil {
		return nil, err
	}
	c := d.Client()
	input := json.RawMessage(`{"p":"` + strings.Repeat("a", 100) + `"}`)
	// One warm-up run launches the plugin and loads the flow.
	if err := runToEnd(b.ctx, c, "ten", input); err != nil {
		return nil, err
	}

	start := time.Now()
	ids := make([]string, stepRuns)
	errs := make(chan error, stepSubmitters)
	var wg sync.WaitGroup
	for s := range stepSubmitters {
		wg.Go(func() {
			for i := s; i < stepRuns; i += stepSubmitters {
				res, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "ten", Input: input})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = res.RunID
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("submitting: %w", err)
	}
	submitted := time.Since(start)
	if err := waitIdle(b.ctx, c, 2*time.Minute); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	done, err := c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseCompleted})
	if err != nil {
		return nil, err
	}
	completed := map[string]bool{}
	for _, v := range done {
		completed[v.ID] = true
	}
	for _, id := range ids {
		if !completed[id] {
			v, err := c.RunGet(b.ctx, id)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", id, err)
			}
			return nil, fmt.Errorf("run %s ended %s %+v, want completed", id, v.Phase, v.Error)
		}
	}
	rate := float64(stepRuns*stepsPerRun) / elapsed.Seconds()
	fmt.Fprintf(b.log, "  %d runs submitted in %v, all completed after %v\n", stepRuns, submitted.Round(time.Millisecond), elapsed.Round(time.Millisecond))
	lower, other := row{limit: "group commit " + perSec(group)}, row{limit: "raw gRPC, 16 callers " + perSec(echo.PerSec())}
	lowRate, otherRate := group, echo.PerSec()
	if otherRate < lowRate {
		lower, other, lowRate, otherRate = other, lower, otherRate, lowRate
	}
	return []row{
		{figure: "durable steps/s, 1,000 runs × 10 testkit.echo, 64 workers, beside the lower limit", value: perSec(rate),
			limit: lower.limit, ratio: ratio(rate / lowRate), target: verdict("≥ 0.5x", rate/lowRate >= 0.5)},
		{figure: "same, beside the other limit", value: perSec(rate), limit: other.limit, ratio: ratio(rate / otherRate)},
	}, nil
}

// runToEnd starts one run and waits for it to complete.
func runToEnd(ctx context.Context, c *client.Client, flow string, input json.RawMessage) error {
	res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: flow, Input: input})
	if err != nil {
		return err
	}
	return waitPhase(ctx, c, res.RunID, time.Minute)
}

// waitIdle polls the daemon's health until no task is queued or held: every
// accepted run has written its terminal record (a finished run's task is
// deleted in the same transaction).
func waitIdle(ctx context.Context, c *client.Client, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		h, err := c.Health(ctx)
		if err != nil {
			return err
		}
		if h.Queued == 0 && h.Held == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still %d queued and %d held after %v", h.Queued, h.Held, bound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
