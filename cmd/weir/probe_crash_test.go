package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

const probeFlow = `
flow(name = "probed", nodes = [
    task("effect", tool = "testkit.once", args = lambda ctx: {"value": ctx.input["v"], "crash": ctx.input["crash"]},
         at_most_once = True, next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"got": ctx.results["effect"]}),
])
`

// onceEffects counts testkit.once's effects: the lines of its log.
func (d *daemon) onceEffects() int { return d.stateLines("testkit", "once.jsonl") }

// reconciled is the answers of the run's reconciled events.
func (d *daemon) reconciled(id string) []string {
	var out []string
	for _, e := range d.events(id) {
		if e.Type == "reconciled" {
			out = append(out, fmt.Sprint(e.Detail["answer"]))
		}
	}
	return out
}

// TestProbeSettlesAnUnknownOutcome: the real testkit plugin has its
// effect and dies before it answers, so the call's outcome is unknown to
// weir; the tool's reconcile probe says it happened, with its result, and
// the run goes on with that result without calling again: one effect.
func TestProbeSettlesAnUnknownOutcome(t *testing.T) {
	e2e(t, "starts a real daemon whose plugin dies mid-call")
	d := newDaemon(t)
	d.start("")
	d.register(probeFlow)
	res, v := d.runToEnd("probed", `{"v": "x1", "crash": true}`, "probe-1")
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"value":"x1"`) {
		t.Fatalf("run ended %s %+v output %s, want completed with the probe's result\n%s", v.Phase, v.Error, v.Output, d.log())
	}
	if n := d.onceEffects(); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if got := d.reconciled(res.RunID); len(got) != 1 || got[0] != "happened" {
		t.Errorf("reconciled answers %v, want [happened]", got)
	}
	d.stop()
}

// TestProbeAfterAKillMakesTheCallOnce: the daemon is killed after the
// call's started record and before the call: after the restart the
// outcome is unknown, the probe finds no effect (not_happened), and the
// call is made once, then the run completes: one effect.
func TestProbeAfterAKillMakesTheCallOnce(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	d := newDaemon(t)
	d.start("")
	d.register(probeFlow)
	d.stop()
	d.start("after-started")
	res, err := d.startRun("probed", `{"v": "x2", "crash": false}`, "probe-2")
	if err != nil {
		t.Fatal(err)
	}
	d.waitKilled()
	if n := d.onceEffects(); n != 0 {
		t.Fatalf("%d effects before the restart, want 0", n)
	}
	d.start("")
	v := d.waitTerminal(res.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"value":"x2"`) {
		t.Fatalf("run ended %s %+v, want completed\n%s", v.Phase, v.Error, d.log())
	}
	if n := d.onceEffects(); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if got := d.reconciled(res.RunID); len(got) != 1 || got[0] != "not_happened" {
		t.Errorf("reconciled answers %v, want [not_happened]", got)
	}
	d.stop()
}
