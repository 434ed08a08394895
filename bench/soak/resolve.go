package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The ask kind's at-most-once call has a probe that can never tell, and
// asks a person instead of failing: a kill between its started record
// and its answer (after-started, after-tool) parks the run on an unknown
// wait, and the soak's resolver answers it, happened (with the result the
// call would have given) or not happened (the call is made once more).
// The promise: every unknown wait is resolved once, and its run
// completes on that answer.

const invResolve = "every unknown outcome asked of a person resolved once"

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
	input: func(_ *rand.Rand, id string) map[string]any { return map[string]any{"id": id} },
	check: completed(func(v *apitypes.Run, in map[string]any, _ []apitypes.Event, _ *records) []string {
		return wantOutput(v, map[string]any{"id": in["id"], "sent": in["id"]})
	}),
}

// resolveUnknown resolves the unknown waits of the ask kind's runs that
// the daemon lists as waiting.
func resolveUnknown(ctx context.Context, w *world, c *client.Client) {
	runs, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Flow: askKind.flow, Phase: apitypes.PhaseWaiting}))
	if err != nil {
		return // the daemon is down: a later pass
	}
	for _, r := range runs {
		v, err := c.RunGet(ctx, r.ID)
		if err != nil {
			return
		}
		for _, wt := range v.Waits {
			if wt.Kind != apitypes.WaitUnknown {
				continue
			}
			var in struct{ ID string }
			_ = json.Unmarshal(v.Input, &in)
			happened := w.intn(2) == 0
			var result json.RawMessage
			if happened {
				result, _ = json.Marshal(map[string]any{"key": "resolved by the soak", "value": in.ID})
			}
			_, err := c.Resolve(ctx, v.ID, wt.ID, happened, result, "soak")
			switch code := client.ErrorCode(err); {
			case err == nil:
				w.count(fmt.Sprintf("resolved happened=%v", happened))
			case code == engine.CodeAlreadyDecided || code == engine.CodeNotWaiting:
				w.count("resolve refused " + code)
			case code == engine.CodeDraining || code == "":
				// Down or draining: a later pass.
			default:
				w.violate(invResolve, "resolving %s of run %s: %v", wt.ID, v.ID, err)
			}
		}
	}
}

// checkResolves: no unknown wait of a run was resolved twice.
func checkResolves(w *world, f *final) []string {
	var bad []string
	for _, s := range w.subs {
		if s.kind != askKind || s.runID == "" {
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
	return bad
}

func resolvesSummary(w *world, f *final) string {
	asked := 0
	for _, s := range w.subs {
		if s.kind != askKind || s.runID == "" {
			continue
		}
		for _, e := range f.events[s.runID] {
			if e.Type == "resolved" {
				asked++
			}
		}
	}
	return fmt.Sprintf("%d unknown outcomes resolved by a person (%d happened, %d not happened), each once; %d ask-kind runs completed",
		asked, w.counts["resolved happened=true"], w.counts["resolved happened=false"], countFlowPhase(f, askKind.flow, apitypes.PhaseCompleted))
}
