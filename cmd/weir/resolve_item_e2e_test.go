package main

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

const resolveItemFlow = `
flow(name = "fan_asking", nodes = [
    fanout("fan", items = ["hi"], tool = "testkit.once", args = lambda ctx, item: {"value": item, "probe": "unknown", "crash": True},
           at_most_once = True, width = 1, depth = 1, max_items = 1, on_unknown = "ask", next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"sent": ctx.results["fan"]["results"]}),
])
`

// TestResolveFanoutItem: a fan-out item's call (testkit.once) has its
// effect and its plugin dies before the answer; its probe cannot tell, and
// the fan-out says on_unknown = "ask", so the item parks on its unknown
// wait fan@1.0.unknown.1, which weir run get shows with the resolve
// command, the cohort still open with the item in flight. weir run
// resolve --happened with the result the person saw, sent across the kills
// of resolveAcrossKills, ends the item with it once: the run completes with
// that result, the call made once, one resolved event.
func TestResolveFanoutItem(t *testing.T) {
	e2e(t, "starts a real daemon")
	d := newDaemon(t)
	d.start("")
	d.register(resolveItemFlow)
	res, err := d.startRun("fan_asking", `{}`, "fan-ask-1")
	if err != nil {
		t.Fatal(err)
	}
	const wait = "fan@1.0.unknown.1"
	d.parkedOnUnknown(res.RunID, wait, "fan")
	if n := d.onceEffects(); n != 1 {
		t.Fatalf("%d effects, want the 1 whose answer was lost", n)
	}
	d.stop()
	d.start("before-resolve")
	d.resolveAcrossKills(res.RunID, wait, "--happened", "--result", `{"value": "hi", "seen": true}`, "--reason", "in the log")
	v := d.waitTerminal(res.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"sent":[{"seen":true,"value":"hi"}]`) {
		t.Fatalf("run ended %s %s %+v\n%s", v.Phase, v.Output, v.Error, d.log())
	}
	if n := d.onceEffects(); n != 1 {
		t.Errorf("%d effects, want 1: a call resolved as happened is never made again", n)
	}
	if n := countEvents(d.events(res.RunID), "resolved"); n != 1 {
		t.Errorf("%d resolved events, want 1", n)
	}
	d.stop()
}

// parkedOnUnknown waits until run id is parked on the unknown wait of
// node, checks the wait shows testkit.once's call and that weir run get
// prints its resolve command.
func (d *daemon) parkedOnUnknown(id, wait, node string) {
	d.t.Helper()
	v := d.runIs(id, "waiting on "+wait, func(v *apitypes.Run) bool { return hasWait(v, wait) })
	for _, w := range v.Waits {
		if w.ID == wait && (w.Kind != apitypes.WaitUnknown || w.Node != node || !strings.Contains(string(w.Shown), `"tool":"testkit.once"`)) {
			d.t.Fatalf("wait %+v", w)
		}
	}
	if code, out, _ := d.cli("run", "get", id); code != 0 || !strings.Contains(out, "resolve: weir run resolve "+id+" "+wait) {
		d.t.Errorf("run get (%d) does not say how to resolve %s:\n%s", code, wait, out)
	}
}
