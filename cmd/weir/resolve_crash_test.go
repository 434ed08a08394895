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

	d.resolveAcrossKills(res.RunID, "send@1.unknown.1", "--not-happened", "--reason", "not in the outbox")
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run ended %s %+v\n%s", v.Phase, v.Error, d.log())
	}
	if n := d.onceEffects(); n != 1 {
		t.Errorf("%d sends, want 1: the call made once after not happened", n)
	}
	if n := countEvents(d.events(res.RunID), "resolved"); n != 1 {
		t.Errorf("%d resolved events, want 1", n)
	}
	d.stop()
}

// resolveAcrossKills resolves wait of run id with the resolve flags args
// on a daemon armed with before-resolve, which must be serving with the
// run parked on it: a resolve killed before its commit changes nothing (the
// run still waits on wait after the restart); one killed after its commit,
// before the run was woken, is done, so the client's retry on the next
// daemon (serving, nothing armed) is told E_ALREADY_DECIDED.
func (d *daemon) resolveAcrossKills(id, wait string, args ...string) {
	d.t.Helper()
	resolve := append([]string{"run", "resolve", id, wait}, args...)
	if code, _, _ := d.cli(resolve...); code == 0 {
		d.t.Fatal("the resolve was answered although the daemon died first")
	}
	d.waitKilled()
	d.start("after-resolve")
	v := d.runIs(id, "still waiting", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting && len(v.Waits) > 0 })
	if !hasWait(v, wait) {
		d.t.Fatalf("waits %+v after a resolve that never committed, want %s", v.Waits, wait)
	}
	if code, _, _ := d.cli(resolve...); code == 0 {
		d.t.Fatal("the resolve was answered although the daemon died first")
	}
	d.waitKilled()
	d.start("")
	code, _, errOut := d.cli(resolve...)
	if code == 0 || !strings.Contains(errOut, apitypes.CodeAlreadyDecided) {
		d.t.Errorf("the retried resolve exited %d: %s, want %s", code, errOut, apitypes.CodeAlreadyDecided)
	}
}

// hasWait says whether v is waiting on the wait id.
func hasWait(v *apitypes.Run, id string) bool {
	for _, w := range v.Waits {
		if w.ID == id {
			return true
		}
	}
	return false
}
