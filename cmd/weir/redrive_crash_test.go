package main

import (
	"context"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const redriveCrashFlow = `
flow(name = "parking", nodes = [
    task("f", tool = "testkit.fail", args = {"times": 3}, retries = 1, on_exhausted = "park", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"f": ctx.results["f"]}),
])
`

// TestCrashRedriveDoneOnce kills the daemon with SIGKILL just after a task
// parked on its exhaustion, and just after its redrive committed: after
// each restart the run is parked once (one dead letter, one wait) and
// redriven once (one redriven event, no dead letter left), and it ends
// completed on the tries the redrive gave it.
func TestCrashRedriveDoneOnce(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	ctx := context.Background()
	d := newDaemon(t)
	d.start("")
	d.register(redriveCrashFlow)
	d.stop()

	// Killed once the dead letter and the park are durable.
	d.start("exhausted-parked")
	res, err := d.startRun("parking", `{}`, "park-1")
	if err != nil {
		t.Fatal(err)
	}
	d.waitKilled()
	d.start("after-redrive")
	v := d.runIs(res.RunID, "waiting", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting })
	if len(v.Waits) != 1 || v.Waits[0].Kind != apitypes.WaitExhausted || v.Waits[0].ID != "f@1.exhausted.1" {
		t.Fatalf("waits after the restart %+v, want the one exhausted wait\n%s", v.Waits, d.log())
	}
	dl, err := d.api.DeadLetters(ctx, client.DeadLetterFilter{})
	if err != nil || len(dl) != 1 || len(dl[0].Errors) != 2 {
		t.Fatalf("dead letters after the restart: %+v %v, want one with two tries", dl, err)
	}

	// Killed once the redrive is durable, before it answers.
	if _, err := d.api.Redrive(ctx, apitypes.RedriveRequest{TaskIDs: []string{dl[0].TaskID}, Reason: "crash"}); err == nil {
		t.Fatal("the redrive was answered although the daemon died first")
	}
	d.waitKilled()
	d.start("")
	// The client's retry finds it done: the task is no longer dead.
	again, err := d.api.Redrive(ctx, apitypes.RedriveRequest{TaskIDs: []string{dl[0].TaskID}, Reason: "crash"})
	if err != nil || len(again.Results) != 1 || again.Results[0].Redriven {
		t.Fatalf("retried redrive: %+v %v, want refused", again, err)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run ended %s %+v\n%s", v.Phase, v.Error, d.log())
	}
	n := 0
	for _, e := range d.events(res.RunID) {
		if e.Type == "redriven" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d redriven events, want 1", n)
	}
	if dl, err := d.api.DeadLetters(ctx, client.DeadLetterFilter{}); err != nil || len(dl) != 0 {
		t.Errorf("dead letters at the end: %+v %v, want none", dl, err)
	}
	d.stop()
}
