package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/store"
)

// spinScripts evaluates in process, but a callable of a node named
// "spin" runs until its ctx ends — a script spinning to its deadline in a
// sandbox worker — while spin is set.
type spinScripts struct {
	script.Local
	spin    *atomic.Bool
	entered chan struct{}
	ended   *atomic.Int32 // evaluations that saw their ctx end
}

func (s spinScripts) Call(ctx context.Context, src flows.Sources, c flows.Context, calls []flows.Call) ([]flows.CallResult, error) {
	if len(calls) == 1 && calls[0].Ref.Node == "spin" && s.spin.Load() {
		s.entered <- struct{}{}
		<-ctx.Done()
		s.ended.Add(1)
		return nil, ctx.Err()
	}
	return s.Local.Call(ctx, src, c, calls)
}

const spinSrc = `
flow(name = "spinner", nodes = [task("spin", tool = "kit.echo", args = lambda ctx: {"n": len("x")})])
`

// A drain whose grace ends while a step's callable is being evaluated
// abandons the evaluation: Stop returns instead of waiting for the
// callable's deadline (in a sandbox, 10 s per evaluation and more for a
// batch's reruns: the drain ran far past its grace), nothing the
// abandoned step would write lands (the run is neither failed nor
// advanced), and the next engine finishes the run from where it was.
// Before, the evaluation ran under a context nothing ended.
func TestUnitDrainAbandonsAnEvaluation(t *testing.T) {
	t.Parallel()
	var spin atomic.Bool
	spin.Store(true)
	scripts := spinScripts{spin: &spin, entered: make(chan struct{}, 1), ended: &atomic.Int32{}}
	const lease = 30 * time.Second
	b := setupUnit(t, Config{Scripts: scripts, LeaseTimeout: lease}, spinSrc)
	id := b.start(t, "spinner", `{}`, "")
	select {
	case <-scripts.entered:
	case <-time.After(time.Minute):
		t.Fatal("the step's callable was never evaluated")
	}
	graceOver, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := make(chan struct{})
	go func() { b.eng.Stop(graceOver); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("Stop waits for an evaluation after the drain's grace")
	}
	if n := scripts.ended.Load(); n != 1 {
		t.Fatalf("%d evaluations saw their ctx end, want the spinning one", n)
	}
	run := b.runRecord(t, id)
	if run.Phase != store.PhaseRunning || run.Error != nil {
		t.Fatalf("after the abandoned step: phase %s error %+v, want running with nothing written", run.Phase, run.Error)
	}
	if evs := b.events(t, id); count(evs, evNodeFailed) != 0 {
		t.Fatalf("timeline %v: the abandoned evaluation was recorded as the node's failure", evs)
	}

	spin.Store(false)
	next := openEngine(t, Config{Store: b.st, Tools: b.tools, Clock: b.clock, Scripts: scripts, LeaseTimeout: lease}, "")
	b.eng = next
	run = b.untilAfterRestart(t, id, lease, func(r *store.Run) bool { return r.Phase.Terminal() })
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("after the restart: %s %+v, want completed", run.Phase, run.Error)
	}
}
