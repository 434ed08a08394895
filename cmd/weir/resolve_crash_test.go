package main

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

const resolveCrashFlow = `
flow(name = "asking", nodes = [
    task("send", tool = "testkit.once", args = lambda ctx: {"value": "hi", "probe": "unknown"},
         at_most_once = True, on_unknown = "ask", next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"sent": ctx.results["send"]}),
])
`

// TestCrashResolveDoneOnce kills the daemon with SIGKILL after the send
// (testkit.once, whose probe here cannot tell) was started and before it
// was made: after the restart the outcome is unknown, the probe says
// unknown, and the run parks on its unknown wait, which weir run get shows
// with the resolve command. A resolve killed before its commit changes
// nothing; one killed after its commit, before the run was woken, is done:
// the client's retry is told E_ALREADY_DECIDED, the run wakes on the
// restart, the send is made once and there is one resolved event.
func TestCrashResolveDoneOnce(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	d := newDaemon(t)
	d.start("")
	d.register(resolveCrashFlow)
	d.stop()

	d.start("after-started")
	res, err := d.startRun("asking", `{}`, "ask-1")
	if err != nil {
		t.Fatal(err)
	}
	d.waitKilled()
	d.start("before-resolve")
	v := d.runIs(res.RunID, "waiting", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting && len(v.Waits) > 0 })
	if len(v.Waits) != 1 || v.Waits[0].Kind != apitypes.WaitUnknown || v.Waits[0].ID != "send@1.unknown.1" ||
		!strings.Contains(string(v.Waits[0].Shown), `"tool":"testkit.once"`) {
		t.Fatalf("waits after the restart %+v, want the one unknown wait\n%s", v.Waits, d.log())
	}
	if code, out, _ := d.cli("run", "get", res.RunID); code != 0 || !strings.Contains(out, "resolve: weir run resolve "+res.RunID+" send@1.unknown.1") {
		t.Errorf("run get (%d) does not say how to resolve:\n%s", code, out)
	}
	if n := d.onceEffects(); n != 0 {
		t.Fatalf("%d sends before the resolve, want 0", n)
	}

	// Killed before the resolve commits: nothing changed.
	if code, _, _ := d.cli("run", "resolve", res.RunID, "send@1.unknown.1", "--not-happened", "--reason", "not in the outbox"); code == 0 {
		t.Fatal("the resolve was answered although the daemon died first")
	}
	d.waitKilled()
	d.start("after-resolve")
	v = d.runIs(res.RunID, "still waiting", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting && len(v.Waits) == 1 })
	if v.Waits[0].ID != "send@1.unknown.1" {
		t.Fatalf("waits %+v after a resolve that never committed", v.Waits)
	}

	// Killed after the resolve commits, before the run is woken.
	if code, _, _ := d.cli("run", "resolve", res.RunID, "send@1.unknown.1", "--not-happened", "--reason", "not in the outbox"); code == 0 {
		t.Fatal("the resolve was answered although the daemon died first")
	}
	d.waitKilled()
	d.start("")
	code, _, errOut := d.cli("run", "resolve", res.RunID, "send@1.unknown.1", "--not-happened")
	if code == 0 || !strings.Contains(errOut, apitypes.CodeAlreadyDecided) {
		t.Errorf("the retried resolve exited %d: %s, want %s", code, errOut, apitypes.CodeAlreadyDecided)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run ended %s %+v\n%s", v.Phase, v.Error, d.log())
	}
	if n := d.onceEffects(); n != 1 {
		t.Errorf("%d sends, want 1: the call made once after not happened", n)
	}
	n := 0
	for _, e := range d.events(res.RunID) {
		if e.Type == "resolved" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d resolved events, want 1", n)
	}
	d.stop()
}
