package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The ask kinds' at-most-once calls (a task's, each item's of a fan-out,
// and an agent's call) have a probe that can never tell, and ask a person instead of
// failing: a kill between a call's started record and its answer
// (after-started, after-tool) parks the run on an unknown wait, and the
// soak's resolver answers it as a person who reads the plugin's own log
// would: happened, with the result the log holds, or not happened (the
// call is made once more). The promises: every unknown wait is resolved
// once, its run completes on that answer, and testkit.once has its effect
// at most once per call (by the value each call carries: a request id, or
// an item made from one) across kills and resolves.

const invResolve = "every unknown outcome asked of a person resolved once, every testkit.once call made at most once"

var askKind = &kind{
	name: "ask", flow: "soak_ask", weight: 1,
	src: `
flow(
    name = "soak_ask",
    nodes = [
        task("send", tool = "testkit.once", args = lambda ctx: {"value": ctx.input["id"], "probe": "unknown"},
             at_most_once = True, on_unknown = "ask", next = "done"),
        task("done", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "sent": ctx.results["send"]["value"]}),
    ],
)
`,
	input: idInput,
	check: completedWith(func(in map[string]any) map[string]any {
		return map[string]any{"id": in["id"], "sent": in["id"]}
	}),
}

// askFanKind's items each make one testkit.once call; an item's unknown
// wait is NODE@VISIT.ITEM.unknown.N, the cohort open meanwhile.
var askFanKind = &kind{
	name: "ask-fan", flow: "soak_ask_fan", weight: 1,
	src: `
flow(
    name = "soak_ask_fan",
    nodes = [
        fanout("send", items = lambda ctx: [ctx.input["id"] + "/a", ctx.input["id"] + "/b"], tool = "testkit.once",
               args = lambda ctx, item: {"value": item, "probe": "unknown"},
               at_most_once = True, on_unknown = "ask", width = 2, depth = 2, max_items = 2, next = "done"),
        task("done", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "sent": [r["value"] for r in ctx.results["send"]["results"]]}),
    ],
)
`,
	input: idInput,
	check: completedWith(func(in map[string]any) map[string]any {
		id := in["id"].(string)
		return map[string]any{"id": id, "sent": []any{id + "/a", id + "/b"}}
	}),
}

// askKinds are the kinds whose runs park on unknown waits: the agent
// kind's once call parks as NODE@VISIT.TURN.CALL.unknown.N.
var askKinds = []*kind{askKind, askFanKind, agentKind}

// resolveUnknown resolves the unknown waits of the ask kinds' runs that
// the daemon lists as waiting, from testkit.once's log in the daemons'
// state directories.
func resolveUnknown(ctx context.Context, w *world, c *client.Client) {
	for _, k := range askKinds {
		runs, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Flow: k.flow, Phase: apitypes.PhaseWaiting}))
		if err != nil {
			return // the daemon is down: a later pass
		}
		for _, r := range runs {
			v, err := c.RunGet(ctx, r.ID)
			if err != nil {
				return
			}
			for _, wt := range v.Waits {
				if wt.Kind == apitypes.WaitUnknown && !resolveOne(ctx, w, c, v, wt) {
					return
				}
			}
		}
	}
}

// resolveOne answers one unknown wait; false when the daemon is down.
func resolveOne(ctx context.Context, w *world, c *client.Client, v *apitypes.Run, wt apitypes.HumanWait) bool {
	var shown struct{ Tool, Key string }
	if err := json.Unmarshal(wt.Shown, &shown); err != nil || shown.Key == "" {
		w.violate(invResolve, "unknown wait %s of run %s shows no idempotency key: %s", wt.ID, v.ID, wt.Shown)
		return true
	}
	// A person looks where the effect would be: the log of the tool
	// the call was for, in every daemon's state (a fleet's daemons each
	// keep their own, and the call may have run on any of them).
	logged := onceLogged
	if shown.Tool == "mail.send" {
		logged = mailLogged
	}
	result, happened, err := logged(w.dataDirs, shown.Key)
	if err != nil {
		w.violate(invResolve, "reading %s's log: %v", shown.Tool, err)
		return true
	}
	_, err = c.Resolve(ctx, v.ID, wt.ID, happened, result, "soak")
	switch code := client.ErrorCode(err); {
	case err == nil:
		w.count(fmt.Sprintf("resolved happened=%v", happened))
	case code == engine.CodeAlreadyDecided || code == engine.CodeNotWaiting:
		w.count("resolve refused " + code)
	case code == engine.CodeDraining || code == "":
		return false // down or draining: a later pass
	default:
		w.violate(invResolve, "resolving %s of run %s: %v", wt.ID, v.ID, err)
	}
	return true
}

// checkResolves: no unknown wait of a run was resolved twice, and no
// testkit.once call had its effect twice.
func checkResolves(w *world, f *final) []string {
	var bad []string
	for _, s := range w.subs {
		if !isAsk(s.kind) || s.runID == "" {
			continue
		}
		seen := map[string]bool{}
		for _, e := range f.events[s.runID] {
			if e.Type != "resolved" {
				continue
			}
			wait, _ := e.Detail["wait"].(string)
			if seen[wait] {
				bad = append(bad, fmt.Sprintf("run %s: wait %s resolved twice", s.runID, wait))
			}
			seen[wait] = true
		}
	}
	for value, n := range f.records.once {
		if n > 1 {
			bad = append(bad, fmt.Sprintf("testkit.once had the effect of the call for %s %d times", value, n))
		}
	}
	return bad
}

func isAsk(k *kind) bool {
	for _, a := range askKinds {
		if k == a {
			return true
		}
	}
	return false
}

func resolvesSummary(w *world, f *final) string {
	asked, byKind := 0, map[string]int{}
	for _, s := range w.subs {
		if isAsk(s.kind) && s.runID != "" {
			n := countEvents(f.events[s.runID], "resolved")
			asked += n
			byKind[s.kind.name] += n
		}
	}
	return fmt.Sprintf("%d unknown outcomes resolved by a person from the plugin's log (%d happened, %d not happened; %d of tasks, %d of fan-out items, %d of agent calls), each once; %d testkit.once effects, none twice; %d ask and %d ask-fan runs completed",
		asked, w.counts["resolved happened=true"], w.counts["resolved happened=false"], byKind[askKind.name], byKind[askFanKind.name], byKind[agentKind.name],
		len(f.records.once), countFlowPhase(f, askKind.flow, apitypes.PhaseCompleted), countFlowPhase(f, askFanKind.flow, apitypes.PhaseCompleted))
}
