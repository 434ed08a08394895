package main

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const fleetOpsFlows = `
flow(name = "parks", nodes = [
    task("f", tool = "testkit.fail", args = {"times": 3}, retries = 1, on_exhausted = "park", next = "done"),
    task("done", tool = "testkit.echo", args = {"ok": True}),
])
flow(name = "asks", nodes = [
    task("send", tool = "testkit.once", args = {"value": "hi", "crash": True, "probe": "unknown"},
         at_most_once = True, on_unknown = "ask", next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"sent": ctx.results["send"]}),
])
flow(name = "chain", nodes = [
    task("a", tool = "testkit.echo", args = {"a": 1}, next = "b"),
    task("b", tool = "testkit.echo", args = lambda ctx: {"a": ctx.results["a"]["a"], "n": ctx.input["n"]}),
])
`

// both sends op to each daemon of ds at once and returns their answers.
func both[T any](ds []*daemon, op func(c *client.Client) (T, error)) ([]T, []error) {
	out, errs := make([]T, len(ds)), make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); out[i], errs[i] = op(d.api) }()
	}
	wg.Wait()
	return out, errs
}

// TestFleetOperationsDoneOnce: two daemons on one PostgreSQL schema are
// asked the same recovery operation at the same moment, each of the
// three: one redrive of a dead letter redrives it and the other is told it
// is not dead any more; one resolution of an unknown outcome settles it
// and the other is told it was decided; two forks with one request id are
// one fork. Each run then ends once, as the one operation said.
func TestFleetOperationsDoneOnce(t *testing.T) {
	e2e(t, "starts real daemons on PostgreSQL")
	ds, _ := fleet(t, 2)
	ds[0].register(fleetOpsFlows)
	ctx := context.Background()

	parked, err := ds[0].startRun("parks", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	ds[0].runIs(parked.RunID, "parked on its exhaustion", func(v *apitypes.Run) bool { return len(v.Waits) == 1 && v.Waits[0].Kind == apitypes.WaitExhausted })
	dl, err := ds[0].api.DeadLetters(ctx, client.DeadLetterFilter{})
	if err != nil || len(dl) != 1 {
		t.Fatalf("dead letters %+v %v", dl, err)
	}
	redrives, errs := both(ds, func(c *client.Client) (*apitypes.RedriveResponse, error) {
		return c.Redrive(ctx, apitypes.RedriveRequest{TaskIDs: []string{dl[0].TaskID}, Reason: "both"})
	})
	redriven, first := 0, ""
	for i, r := range redrives {
		if errs[i] != nil || len(r.Results) != 1 {
			t.Fatalf("redrive on daemon %d: %+v %v", i, r, errs[i])
		}
		if r.Results[0].Redriven {
			redriven, first = redriven+1, r.Results[0].Wait
		} else if r.Results[0].Error == nil || r.Results[0].Error.Code != "E_NOT_DEAD" {
			t.Errorf("the other redrive on daemon %d: %+v, want E_NOT_DEAD", i, r.Results[0])
		}
	}
	if redriven != 1 || first == "" {
		t.Fatalf("%d of two simultaneous redrives redrove the task (its wait %q), want one", redriven, first)
	}
	// testkit.fail counts a key's tries per host: redriven on the other
	// daemon it may use up its tries again and park on a second
	// exhaustion. Either way it left the first wait once.
	ds[1].runIs(parked.RunID, "past its first exhausted wait", func(v *apitypes.Run) bool {
		return v.Phase.Terminal() || len(v.Waits) == 1 && v.Waits[0].ID != first
	})
	if n := countEvents(ds[1].events(parked.RunID), "redriven"); n != 1 {
		t.Fatalf("the redriven run has %d redriven events, want one", n)
	}

	asking, err := ds[0].startRun("asks", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	wait := ds[0].runIs(asking.RunID, "parked on its unknown outcome", func(v *apitypes.Run) bool {
		return len(v.Waits) == 1 && v.Waits[0].Kind == apitypes.WaitUnknown
	}).Waits[0].ID
	_, errs = both(ds, func(c *client.Client) (*apitypes.ResolveResponse, error) {
		return c.Resolve(ctx, asking.RunID, wait, true, json.RawMessage(`{"value": "by hand"}`), "both")
	})
	settled := 0
	for i, err := range errs {
		switch code := client.ErrorCode(err); {
		case err == nil:
			settled++
		case code != apitypes.CodeAlreadyDecided && code != apitypes.CodeNotWaiting:
			t.Errorf("the other resolution on daemon %d: %v, want E_ALREADY_DECIDED", i, err)
		}
	}
	if settled != 1 {
		t.Fatalf("%d of two simultaneous resolutions settled the wait, want one", settled)
	}
	if v := ds[1].waitTerminal(asking.RunID); v.Phase != apitypes.PhaseCompleted || string(v.Output) != `{"sent":{"value":"by hand"}}` {
		t.Fatalf("the resolved run ended %s with %s", v.Phase, v.Output)
	}

	src, err := ds[0].startRun("chain", `{"n": 1}`, "")
	if err != nil {
		t.Fatal(err)
	}
	ds[0].waitTerminal(src.RunID)
	forks, errs := both(ds, func(c *client.Client) (*apitypes.ForkResult, error) {
		return c.Fork(ctx, src.RunID, apitypes.ForkRequest{From: "b", Input: json.RawMessage(`{"n": 2}`), RequestID: "one-fork"})
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("fork on daemon %d: %v", i, err)
		}
	}
	if forks[0].RunID != forks[1].RunID || forks[0].Existing == forks[1].Existing {
		t.Fatalf("two forks with one request id answered %+v and %+v, want one run, made once", forks[0], forks[1])
	}
	if fam, err := ds[0].api.RunLineage(ctx, src.RunID); err != nil || len(fam) != 2 {
		t.Fatalf("the source's family %+v %v, want it and one fork", fam, err)
	}
	if v := ds[1].waitTerminal(forks[0].RunID); v.Phase != apitypes.PhaseCompleted || string(v.Output) != `{"a":1,"n":2}` {
		t.Fatalf("the fork ended %s with %s", v.Phase, v.Output)
	}
	for _, d := range ds {
		d.stop()
	}
}

func countEvents(evs []apitypes.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}
