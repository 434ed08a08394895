package main

import (
	"context"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// TestCrashRedriveDoneOnce kills the daemon with SIGKILL just after a task
// (or a fan-out item's task) parked on its exhaustion, and just after its
// redrive committed: after each restart the run is parked once (one dead
// letter, one wait) and redriven once (one redriven event, no dead letter
// left), and it ends completed on the tries the redrive gave it.
func TestCrashRedriveDoneOnce(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	for _, c := range []struct {
		name, flow, src, wait, output string
	}{
		{name: "task", flow: "parking", wait: "f@1.exhausted.1", output: `{"f":{"attempts":4}}`, src: `
flow(name = "parking", nodes = [
    task("f", tool = "testkit.fail", args = {"times": 3}, retries = 1, on_exhausted = "park", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"f": ctx.results["f"]}),
])
`},
		{name: "item", flow: "fan_parking", wait: "f@1.0.exhausted.1", output: `{"f":[{"attempts":4}]}`, src: `
flow(name = "fan_parking", nodes = [
    fanout("f", items = ["x"], tool = "testkit.fail", args = lambda ctx, item: {"times": 3}, retries = 1,
           width = 1, depth = 1, max_items = 1, on_exhausted = "park", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"f": ctx.results["f"]["results"]}),
])
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			d := newDaemon(t)
			d.start("")
			d.register(c.src)
			d.stop()

			// Killed once the dead letter and the park are durable.
			d.start("exhausted-parked")
			res, err := d.startRun(c.flow, `{}`, "park-1")
			if err != nil {
				t.Fatal(err)
			}
			d.waitKilled()
			d.start("after-redrive")
			v := d.runIs(res.RunID, "waiting on "+c.wait, func(v *apitypes.Run) bool { return hasWait(v, c.wait) })
			for _, w := range v.Waits {
				if w.Kind != apitypes.WaitCohort && (w.ID != c.wait || w.Kind != apitypes.WaitExhausted) {
					t.Fatalf("waits after the restart %+v, want the one exhausted wait %s\n%s", v.Waits, c.wait, d.log())
				}
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
			if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted || string(v.Output) != c.output {
				t.Fatalf("run ended %s %s %+v, want completed with %s\n%s", v.Phase, v.Output, v.Error, c.output, d.log())
			}
			if n := countEvents(d.events(res.RunID), "redriven"); n != 1 {
				t.Errorf("%d redriven events, want 1", n)
			}
			if dl, err := d.api.DeadLetters(ctx, client.DeadLetterFilter{}); err != nil || len(dl) != 0 {
				t.Errorf("dead letters at the end: %+v %v, want none", dl, err)
			}
			d.stop()
		})
	}
}
