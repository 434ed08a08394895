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
// and the raw 16-caller gRPC echo calls/s. The same chain on a daemon
// whose store does not sync (WEIR_UNSAFE_NO_SYNC=1) gives the cost of
// durability; and on the durable daemon, runs one at a time give the
// latency from a run's finish to the answer of the client waiting on it.
func durableSteps(b *bench) ([]row, error) {
	group, err := b.groupCommit()
	if err != nil {
		return nil, err
	}
	echo, err := b.rawEchoCalls(echoFanCallers)
	if err != nil {
		return nil, err
	}
	commit, err := b.commitLatency()
	if err != nil {
		return nil, err
	}
	var answer []time.Duration
	rate, err := stepChain(b, "steps", nil, func(c *client.Client) error {
		answer, err = finishToAnswer(b.ctx, c, "ten", stepInput, finishAnswerRuns)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Unsynced, the finish-to-answer time is the wake and the answer's
	// trip without the finishing commit's sync.
	var answerNoSync []time.Duration
	unsynced, err := stepChain(b, "steps-nosync", []string{"WEIR_UNSAFE_NO_SYNC=1"}, func(c *client.Client) error {
		answerNoSync, err = finishToAnswer(b.ctx, c, "ten", stepInput, finishAnswerRuns)
		return err
	})
	if err != nil {
		return nil, err
	}
	p50 := answer[len(answer)/2]
	fmt.Fprintf(b.log, "  unsynced store: %s steps/s; finish → waiting client's answer p50 %v, p90 %v (%d runs one at a time; unsynced store p50 %v), one-writer commit p50 %v\n",
		thousands(unsynced), p50, answer[len(answer)*9/10], len(answer), answerNoSync[len(answerNoSync)/2], commit)
	lower, other := row{limit: "group commit " + perSec(group)}, row{limit: "raw gRPC, 16 callers " + perSec(echo.PerSec())}
	lowRate, otherRate := group, echo.PerSec()
	if otherRate < lowRate {
		lower, other, lowRate, otherRate = other, lower, otherRate, lowRate
	}
	return []row{
		{figure: "durable steps/s, 1,000 runs × 10 testkit.echo, 64 workers, beside the lower limit", value: perSec(rate),
			limit: lower.limit, ratio: ratio(rate / lowRate), target: verdict("≥ 0.5x", rate/lowRate >= 0.5)},
		{figure: "same, beside the other limit", value: perSec(rate), limit: other.limit, ratio: ratio(rate / otherRate)},
		{figure: "cost of durability: same durable steps/s beside the same chain with the store's sync off (WEIR_UNSAFE_NO_SYNC=1)", value: perSec(rate),
			limit: "unsynced " + perSec(unsynced), ratio: ratio(rate / unsynced)},
		{figure: "run finish (its completed event's stamp) → the waiting client's answer (GET /v1/runs/{id}?wait=), ten-step runs one at a time, p50",
			value: dur(p50), limit: "one-writer commit p50 " + dur(commit), ratio: ratio(float64(p50) / float64(commit)),
			target: verdict("< 2 ms", p50 < 2*time.Millisecond)},
	}, nil
}

// stepInput is the input of every ten-step run: a 100-byte payload.
var stepInput = json.RawMessage(`{"p":"` + strings.Repeat("a", 100) + `"}`)

// stepChain starts a daemon (env added to its environment), runs 1,000
// ten-step runs on it as durableSteps describes and returns their steps/s;
// then, if set, then runs on the same daemon.
func stepChain(b *bench, name string, env []string, then func(c *client.Client) error) (float64, error) {
	d, err := b.startDaemonEnv(name, env)
	if err != nil {
		return 0, err
	}
	defer d.Kill()
	if err := b.register(d, "ten", tenStepFlow); err != nil {
		return 0, err
	}
	c := d.Client()
	input := stepInput
	// One warm-up run launches the plugin and loads the flow.
	if err := runToEnd(b.ctx, c, "ten", input); err != nil {
		return 0, err
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
		return 0, fmt.Errorf("submitting: %w", err)
	}
	submitted := time.Since(start)
	if err := waitIdle(b.ctx, c, 2*time.Minute); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	done, err := c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseCompleted})
	if err != nil {
		return 0, err
	}
	completed := map[string]bool{}
	for _, v := range done {
		completed[v.ID] = true
	}
	for _, id := range ids {
		if !completed[id] {
			v, err := c.RunGet(b.ctx, id)
			if err != nil {
				return 0, fmt.Errorf("run %s: %w", id, err)
			}
			return 0, fmt.Errorf("run %s ended %s %+v, want completed", id, v.Phase, v.Error)
		}
	}
	rate := float64(stepRuns*stepsPerRun) / elapsed.Seconds()
	fmt.Fprintf(b.log, "  %s: %d runs submitted in %v, all completed after %v\n", name, stepRuns, submitted.Round(time.Millisecond), elapsed.Round(time.Millisecond))
	if then != nil {
		if err := then(c); err != nil {
			return 0, err
		}
	}
	return rate, nil
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
