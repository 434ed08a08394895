package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/bench/internal/daemon"
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
// real `weir serve` on Badger at its default concurrency (badgerSteps). The
// limit is the lower of group-commit commits/s and the raw 16-caller gRPC
// echo calls/s. The same chain on a daemon whose store does not sync
// (WEIR_UNSAFE_NO_SYNC=1) gives the cost of durability; and on each daemon,
// runs one at a time give the latency from a run's finish to the answer of
// the client waiting on it.
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
	durable, err := b.badgerSteps()
	if err != nil {
		return nil, err
	}
	rate, answer := durable.steps.rate(), durable.answer
	// Unsynced, the finish-to-answer time is the wake and the answer's
	// trip without the finishing commit's sync.
	nosync, err := b.stepDaemon("steps-nosync", []string{"WEIR_UNSAFE_NO_SYNC=1"})
	if err != nil {
		return nil, err
	}
	unsynced := nosync.steps.rate()
	p50 := answer[len(answer)/2]
	fmt.Fprintf(b.log, "  unsynced store: %s steps/s; finish → waiting client's answer p50 %v, p90 %v (%d runs one at a time; unsynced store p50 %v), one-writer commit p50 %v\n",
		thousands(unsynced), p50, answer[len(answer)*9/10], len(answer), nosync.answer[len(nosync.answer)/2], commit)
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

// badgerSteps runs the step load once per bench run on one daemon on its
// embedded Badger store, so that scenario 3 and the fleet rows (scenario
// 11) show the same measurement.
func (b *bench) badgerSteps() (stepDaemonResult, error) {
	return once(b, "durable steps on Badger, 1 daemon", func() (stepDaemonResult, error) {
		return b.stepDaemon("steps", nil)
	})
}

// stepDaemonResult is the step load on one daemon, and the finish-to-answer
// times of the runs then run one at a time on it.
type stepDaemonResult struct {
	steps  stepsResult
	answer []time.Duration
}

// stepDaemon starts one daemon on its embedded Badger store (env added to
// its environment), runs the step load on it, then times finishAnswerRuns
// runs from their finish to the waiting client's answer.
func (b *bench) stepDaemon(name string, env []string) (stepDaemonResult, error) {
	d, err := b.startDaemonEnv(name, env)
	if err != nil {
		return stepDaemonResult{}, err
	}
	defer d.Kill()
	ds := []*daemon.Daemon{d}
	if err := b.stepsWarmUp(ds); err != nil {
		return stepDaemonResult{}, err
	}
	res, err := b.steps(ds, append(daemonParts(ds), selfPart(), machinePart())...)
	if err != nil {
		return stepDaemonResult{}, err
	}
	answer, err := finishToAnswer(b.ctx, d.Client(), "ten", stepInput, finishAnswerRuns)
	if err != nil {
		return stepDaemonResult{}, err
	}
	return stepDaemonResult{steps: res, answer: answer}, nil
}

// cpuPart is one part of the machine whose CPU time a load is charged:
// read returns the part's utime+stime so far.
type cpuPart struct {
	name string
	read func() (time.Duration, error)
}

// stepsResult is one timed step load.
type stepsResult struct {
	steps   int // durable steps in the timed section
	elapsed time.Duration
	parts   []string        // the cpuParts' names
	cpu     []time.Duration // per cpuPart, over the timed section
}

// newStepsResult is a load of steps durable steps in elapsed, with the
// parts' CPU readings before and after it.
func newStepsResult(steps int, elapsed time.Duration, parts []cpuPart, before, after []time.Duration) stepsResult {
	res := stepsResult{steps: steps, elapsed: elapsed}
	for i, p := range parts {
		res.parts = append(res.parts, p.name)
		res.cpu = append(res.cpu, after[i]-before[i])
	}
	return res
}

func (r stepsResult) rate() float64 { return float64(r.steps) / r.elapsed.Seconds() }

// stepInput is the input of every run of the step load.
var stepInput = json.RawMessage(`{"p":"` + strings.Repeat("a", 100) + `"}`)

// stepsWarmUp registers the ten-step flow on the first of the daemons
// (they share one store) and runs it once through each, which launches its
// plugin and loads the flow.
func (b *bench) stepsWarmUp(ds []*daemon.Daemon) error {
	if err := b.register(ds[0], "ten", tenStepFlow); err != nil {
		return err
	}
	for _, d := range ds {
		if err := runToEnd(b.ctx, d.Client(), "ten", stepInput); err != nil {
			return err
		}
	}
	return nil
}

// steps is the durable-steps load: 1,000 runs of the ten-step flow,
// submitted by concurrent clients spread over the daemons' sockets, timed
// from the first submission to the last run's terminal record. The daemons
// share one store and are warmed up (stepsWarmUp). Each part's CPU is read
// just before the first submission and just after the last end.
func (b *bench) steps(ds []*daemon.Daemon, parts ...cpuPart) (stepsResult, error) {
	before, err := readCPU(parts)
	if err != nil {
		return stepsResult{}, err
	}

	start := time.Now()
	ids := make([]string, stepRuns)
	errs := make(chan error, stepSubmitters)
	var wg sync.WaitGroup
	for s := range stepSubmitters {
		c := ds[s%len(ds)].Client()
		wg.Go(func() {
			for i := s; i < stepRuns; i += stepSubmitters {
				res, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "ten", Input: stepInput})
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
		return stepsResult{}, fmt.Errorf("submitting: %w", err)
	}
	submitted := time.Since(start)
	c := ds[0].Client()
	if err := waitIdle(b.ctx, c, 2*time.Minute); err != nil {
		return stepsResult{}, err
	}
	elapsed := time.Since(start)
	after, err := readCPU(parts)
	if err != nil {
		return stepsResult{}, err
	}
	done, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseCompleted}))
	if err != nil {
		return stepsResult{}, err
	}
	completed := map[string]bool{}
	for _, v := range done {
		completed[v.ID] = true
	}
	for _, id := range ids {
		if !completed[id] {
			v, err := c.RunGet(b.ctx, id)
			if err != nil {
				return stepsResult{}, fmt.Errorf("run %s: %w", id, err)
			}
			return stepsResult{}, fmt.Errorf("run %s ended %s %+v, want completed", id, v.Phase, v.Error)
		}
	}
	fmt.Fprintf(b.log, "  %d runs submitted in %v over %d daemon(s), all completed after %v\n",
		stepRuns, submitted.Round(time.Millisecond), len(ds), elapsed.Round(time.Millisecond))
	return newStepsResult(stepRuns*stepsPerRun, elapsed, parts, before, after), nil
}

func readCPU(parts []cpuPart) ([]time.Duration, error) {
	out := make([]time.Duration, len(parts))
	for i, p := range parts {
		v, err := p.read()
		if err != nil {
			return nil, fmt.Errorf("CPU of %s: %w", p.name, err)
		}
		out[i] = v
	}
	return out, nil
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
