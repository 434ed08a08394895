package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

const forkCrashFlow = `
flow(name = "forked", nodes = [
    task("send", tool = "testkit.once", args = {"value": "sent"}, at_most_once = True, next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"sent": ctx.results["send"], "n": ctx.input["n"]}),
])
`

// TestCrashForkMadeOnce kills the daemon with SIGKILL once a fork's
// source is read and its copy planned (nothing written), and once the
// fork is durable but not answered: after the restart the client's retry
// with the same request id makes one fork in all (a new one in the first
// case, the one made before in the second), the fork completes with the
// source's copied result, and the at-most-once call before the fork point
// had its effect once, never again.
func TestCrashForkMadeOnce(t *testing.T) {
	for _, fp := range []string{"fork-read", "after-fork"} {
		t.Run(fp, func(t *testing.T) {
			e2e(t, "starts and kills real daemons")
			ctx := context.Background()
			d := newDaemon(t)
			d.start("")
			d.register(forkCrashFlow)
			src, err := d.startRun("forked", `{"n": 1}`, "src-1")
			if err != nil {
				t.Fatal(err)
			}
			if v := d.waitTerminal(src.RunID); v.Phase != apitypes.PhaseCompleted {
				t.Fatalf("the source ended %s %+v", v.Phase, v.Error)
			}
			d.stop()

			d.start(fp)
			req := apitypes.ForkRequest{From: "after", Input: json.RawMessage(`{"n": 2}`), RequestID: "fork-1", Reason: "crash"}
			if _, err := d.api.Fork(ctx, src.RunID, req); err == nil {
				t.Fatal("the fork was answered although the daemon died first")
			}
			d.waitKilled()
			d.start("")
			res, err := d.api.Fork(ctx, src.RunID, req)
			if err != nil {
				t.Fatalf("the retried fork: %v\n%s", err, d.log())
			}
			if want := fp == "after-fork"; res.Existing != want {
				t.Errorf("the retried fork says existing %v, want %v (the fork was durable: %v)", res.Existing, want, want)
			}
			fam, err := d.api.RunLineage(ctx, src.RunID)
			if err != nil {
				t.Fatal(err)
			}
			var forks []string
			for _, r := range fam {
				if r.ID != src.RunID {
					forks = append(forks, r.ID)
				}
			}
			if len(forks) != 1 || forks[0] != res.RunID {
				t.Fatalf("the source's family %+v, want the source and the one fork %s", fam, res.RunID)
			}
			v := d.waitTerminal(res.RunID)
			// The send's result is the source's, under the source's key.
			var out struct {
				Sent struct{ Key, Value string }
				N    int
			}
			if v.Phase != apitypes.PhaseCompleted || json.Unmarshal(v.Output, &out) != nil || out.Sent.Value != "sent" ||
				out.Sent.Key != src.RunID+"/send/1" || out.N != 2 {
				t.Fatalf("the fork ended %s with %s %+v", v.Phase, v.Output, v.Error)
			}
			if n := d.onceEffects(); n != 1 {
				t.Errorf("the at-most-once send had its effect %d times, want once: the fork copies it", n)
			}
			d.stop()
		})
	}
}
