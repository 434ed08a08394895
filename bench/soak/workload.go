package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// kind is one shape of run in the mixed workload: a flow, how often it is
// submitted, how its input is made, and what its end must look like. Adding
// subflows, human waits or fan-out cohorts to the soak is adding kinds here
// (and, for what they need done from outside, such as approving a wait, an
// actor in soak.go, and for what they promise, an invariant in
// invariants.go).
type kind struct {
	name   string
	flow   string // the flow's name in src
	src    string
	weight int
	// input makes the input of a new run; id is its request id and is
	// always part of it, so plugin records can be traced back.
	input func(r *rand.Rand, id string) map[string]any
	// check looks at a terminal run of this kind (its view and timeline,
	// with the plugins' records in o) and returns what is wrong with it.
	check checkFunc
	// mayWait says a run of this kind may legitimately end the soak in
	// phase waiting, parked on a human wait nobody decided.
	mayWait bool
	// cohort says the kind's runs close a fan-out cohort, which the
	// cohort invariant checks.
	cohort bool
	// redrive says the kind's runs park on an exhausted wait that the
	// redriver sends back; one still parked at the end is unfinished.
	redrive bool
}

// checkFunc looks at a terminal run (its view and timeline, with the
// plugins' records in o) and returns what is wrong with it.
type checkFunc func(v *apitypes.Run, in map[string]any, evs []apitypes.Event, o *records) []string

// completed is the check of a kind whose runs must complete to be judged:
// it passes the runs that ended otherwise, whose ending the invariants
// judge, and gives check the ones that completed.
func completed(check checkFunc) checkFunc {
	return func(v *apitypes.Run, in map[string]any, evs []apitypes.Event, o *records) []string {
		if v.Phase != apitypes.PhaseCompleted {
			return nil
		}
		return check(v, in, evs, o)
	}
}

// completedWith is the check of a kind whose completed runs answer
// want(their input), as JSON values.
func completedWith(want func(in map[string]any) map[string]any) checkFunc {
	return completed(func(v *apitypes.Run, in map[string]any, _ []apitypes.Event, _ *records) []string {
		return wantOutput(v, want(in))
	})
}

// byCohortInvariant is the check of a kind whose runs the cohort
// invariant judges: nothing more to see in one run.
func byCohortInvariant(*apitypes.Run, map[string]any, []apitypes.Event, *records) []string {
	return nil
}

// idInput is the input of a kind whose flow takes the request id alone.
func idInput(_ *rand.Rand, id string) map[string]any { return map[string]any{"id": id} }

// sleepsInput makes the input of a fan-out over sleeps: 2 to most items,
// each of shortest ms to longest ms (less one).
func sleepsInput(most, shortest, longest int) func(r *rand.Rand, id string) map[string]any {
	return func(r *rand.Rand, id string) map[string]any {
		ms := make([]any, 2+r.IntN(most-1))
		for i := range ms {
			ms[i] = shortest + r.IntN(longest-shortest)
		}
		return map[string]any{"id": id, "ms": ms}
	}
}

// budgetCap is the budget of the "budget" flow; testkit.cost declares 5
// per call and the soak asks for at most that, so what a run spends can
// never exceed what it reserved.
const budgetCap = 20

var kinds = []*kind{
	{
		name: "echo", flow: "soak_echo", weight: 4,
		src: `
flow(
    name = "soak_echo",
    nodes = [
        task("a", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"]}, next = "b"),
        task("b", tool = "testkit.echo", args = lambda ctx: {"id": ctx.results["a"]["id"], "n": ctx.input["n"]}, next = "c"),
        task("c", tool = "testkit.echo", args = lambda ctx: {"id": ctx.results["b"]["id"], "n2": ctx.results["b"]["n"] * 2}),
    ],
)
`,
		input: func(r *rand.Rand, id string) map[string]any { return map[string]any{"id": id, "n": r.IntN(1000)} },
		check: completedWith(func(in map[string]any) map[string]any {
			return map[string]any{"id": in["id"], "n2": num(in["n"]) * 2}
		}),
	},
	{
		name: "flaky", flow: "soak_flaky", weight: 3,
		src: `
flow(
    name = "soak_flaky",
    nodes = [
        task("try", tool = "testkit.fail", args = lambda ctx: {"times": ctx.input["times"]}, retries = 3, next = "ok", error = "gave_up"),
        task("ok", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "ok": True}),
        task("gave_up", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "gave_up": True}),
    ],
)
`,
		input: func(r *rand.Rand, id string) map[string]any { return map[string]any{"id": id, "times": r.IntN(6)} },
		check: completed(func(v *apitypes.Run, in map[string]any, evs []apitypes.Event, o *records) []string {
			if num(in["times"]) <= 3 && o.hostsLeasing(evs, "try") <= 1 {
				// Within its retries a flaky call always gets through. In a
				// fleet, testkit counts the attempts on each host apart:
				// one whose attempts ran on several may give up.
				return wantOutput(v, map[string]any{"id": in["id"], "ok": true})
			}
			if outputEquals(v, map[string]any{"id": in["id"], "ok": true}) {
				return nil // a crash between a failure and its record spends a planned failure unseen
			}
			if code := nodeFailedCode(evs, "try"); code != engine.CodeRetriesExhausted {
				return []string{fmt.Sprintf("run %s gave up with %q, want %s", v.ID, code, engine.CodeRetriesExhausted)}
			}
			return wantOutput(v, map[string]any{"id": in["id"], "gave_up": true})
		}),
	},
	{
		name: "mail", flow: "soak_mail", weight: 3,
		src: `
flow(
    name = "soak_mail",
    nodes = [
        task("prep", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"]}, next = "send"),
        task("send", tool = "mail.send", args = lambda ctx: {"to": "ops@example.com", "body": "soak " + ctx.input["id"]},
             at_most_once = True, next = "sent", error = "unknown"),
        task("sent", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "sent": True}),
        task("unknown", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "unknown": True}),
    ],
)
`,
		input: idInput,
		check: completed(func(v *apitypes.Run, in map[string]any, evs []apitypes.Event, _ *records) []string {
			if outputEquals(v, map[string]any{"id": in["id"], "unknown": true}) {
				if code := nodeFailedCode(evs, "send"); code != engine.CodeOutcomeUnknown {
					return []string{fmt.Sprintf("run %s took the send node's error wire with %q, want %s", v.ID, code, engine.CodeOutcomeUnknown)}
				}
				return nil
			}
			return wantOutput(v, map[string]any{"id": in["id"], "sent": true})
		}),
	},
	{
		name: "note", flow: "soak_note", weight: 2,
		src: `
flow(
    name = "soak_note",
    nodes = [
        task("put", tool = "notes.put", args = lambda ctx: {"key": "soak/" + ctx.input["id"], "text": ctx.input["text"]}, retries = 2, next = "done"),
        task("done", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "noted": ctx.results["put"]["key"]}),
    ],
)
`,
		input: func(r *rand.Rand, id string) map[string]any {
			return map[string]any{"id": id, "text": fmt.Sprintf("%s-%d", id, r.IntN(1e6))}
		},
		check: completedWith(func(in map[string]any) map[string]any {
			return map[string]any{"id": in["id"], "noted": "soak/" + in["id"].(string)}
		}),
	},
	{
		name: "budget", flow: "soak_budget", weight: 2,
		src: fmt.Sprintf(`
flow(
    name = "soak_budget",
    budget = %d,
    nodes = [
        task("c0", tool = "testkit.cost", args = lambda ctx: {"cost": ctx.input["costs"][0]}, next = "c1", error = "over"),
        task("c1", tool = "testkit.cost", args = lambda ctx: {"cost": ctx.input["costs"][1]}, next = "c2", error = "over"),
        task("c2", tool = "testkit.cost", args = lambda ctx: {"cost": ctx.input["costs"][2]}, next = "c3", error = "over"),
        task("c3", tool = "testkit.cost", args = lambda ctx: {"cost": ctx.input["costs"][3]}, next = "c4", error = "over"),
        task("c4", tool = "testkit.cost", args = lambda ctx: {"cost": ctx.input["costs"][4]}, next = "paid", error = "over"),
        task("paid", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "paid": True}),
        task("over", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "over": True}),
    ],
)
`, budgetCap),
		input: func(r *rand.Rand, id string) map[string]any {
			costs := make([]any, 5)
			for i := range costs {
				costs[i] = r.IntN(6) // at most the declared 5
			}
			return map[string]any{"id": id, "costs": costs}
		},
		check: completed(func(v *apitypes.Run, in map[string]any, evs []apitypes.Event, _ *records) []string {
			if outputEquals(v, map[string]any{"id": in["id"], "over": true}) {
				return nil // the budget refused a node: checked by the budget invariant
			}
			return wantOutput(v, map[string]any{"id": in["id"], "paid": true})
		}),
	},
	{
		name: "slow", flow: "soak_slow", weight: 2,
		src: `
flow(
    name = "soak_slow",
    nodes = [
        task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]}, next = "woke"),
        task("woke", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "slept": ctx.results["nap"]["slept_ms"]}),
    ],
)
`,
		input: func(r *rand.Rand, id string) map[string]any { return map[string]any{"id": id, "ms": 100 + r.IntN(700)} },
		check: completedWith(func(in map[string]any) map[string]any {
			return map[string]any{"id": in["id"], "slept": in["ms"]}
		}),
	},
	{
		name: "subflow", flow: "soak_sub", weight: 2,
		src: `
flow(
    name = "soak_sub",
    nodes = [
        subflow("call", flow = "soak_echo", args = lambda ctx: {"id": ctx.input["id"], "n": ctx.input["n"]}, next = "done"),
        task("done", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "child": ctx.results["call"]}),
    ],
)
`,
		input: func(r *rand.Rand, id string) map[string]any { return map[string]any{"id": id, "n": r.IntN(1000)} },
		check: completedWith(func(in map[string]any) map[string]any {
			return map[string]any{"id": in["id"], "child": map[string]any{"id": in["id"], "n2": num(in["n"]) * 2}}
		}),
	},
	{
		// Approved by the soak's approver actor; one left undecided at the
		// end legitimately waits.
		name: "approval", flow: "soak_wait", weight: 2, mayWait: true,
		src: `
flow(
    name = "soak_wait",
    nodes = [
        wait("w", timeout = "1h", next = "ok"),
        task("ok", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "approved": ctx.results["w"]}),
    ],
)
`,
		input: idInput,
		check: completedWith(func(in map[string]any) map[string]any {
			return map[string]any{"id": in["id"], "approved": map[string]any{"by": "soak", "id": in["id"]}}
		}),
	},
	{
		// A cohort that closes by quorum: half of the children mature and
		// the rest, still sleeping, end late or are stopped.
		name: "fanout", flow: "soak_fan", weight: 2, cohort: true,
		src: `
flow(
    name = "soak_fan",
    nodes = [
        fanout("fan", items = lambda ctx: ctx.input["ms"], tool = "testkit.sleep",
               args = lambda ctx, item: {"ms": item}, width = 4, quorum = 0.5, grace = "200ms", depth = 1, max_items = 16),
    ],
)
`,
		input: sleepsInput(8, 0, 400),
		check: byCohortInvariant,
	},
	{
		// A cohort closed by its deadline fuse: its children are protected,
		// so those still sleeping when the fuse trips go on and end after
		// the cutoff, as late results that must stay out of the batch.
		name: "fuse", flow: "soak_fuse", weight: 1, cohort: true,
		src: `
flow(
    name = "soak_fuse",
    nodes = [
        fanout("fan", items = lambda ctx: ctx.input["ms"], tool = "testkit.sleep",
               args = lambda ctx, item: {"ms": item}, width = 4, quorum = 1.0, deadline = "200ms",
               protected = True, depth = 1, max_items = 4),
    ],
)
`,
		input: sleepsInput(4, 50, 600),
		check: byCohortInvariant,
	},
	{
		// Exhausted, parked and redriven: the first two tries of "try"
		// fail, its one retry is used up, the run parks on an exhausted
		// wait, and the redriver sends it back (redriveParked), where
		// the next tries get through under the same key.
		name: "redrive", flow: "soak_redrive", weight: 1, redrive: true,
		src: `
flow(
    name = "soak_redrive",
    nodes = [
        task("try", tool = "testkit.fail", args = lambda ctx: {"times": 3}, retries = 1, on_exhausted = "park", next = "ok"),
        task("ok", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "redriven": True}),
    ],
)
`,
		input: idInput,
		check: completedWith(func(in map[string]any) map[string]any {
			return map[string]any{"id": in["id"], "redriven": true}
		}),
	},
	agentKind,
	steerKind,
	topupKind,
	eventKind,
	askKind,
	askFanKind,
}

func kindByFlow(flow string) *kind {
	for _, k := range kinds {
		if k.flow == flow {
			return k
		}
	}
	return nil
}

// pickKind draws a kind by weight.
func pickKind(r *rand.Rand) *kind {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	n := r.IntN(total)
	for _, k := range kinds {
		if n < k.weight {
			return k
		}
		n -= k.weight
	}
	return kinds[len(kinds)-1]
}

// outputEquals compares a run's output with want as JSON values.
func outputEquals(v *apitypes.Run, want map[string]any) bool {
	var got any
	if json.Unmarshal(v.Output, &got) != nil {
		return false
	}
	return reflect.DeepEqual(got, normalize(want))
}

func wantOutput(v *apitypes.Run, want map[string]any) []string {
	if outputEquals(v, want) {
		return nil
	}
	w, _ := json.Marshal(want)
	return []string{fmt.Sprintf("run %s (%s) completed with output %s, want %s", v.ID, v.Flow, v.Output, w)}
}

// normalize round-trips v through JSON so it compares with decoded values.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	}
	return 0
}

// nodeFailedCode is the code of the last node_failed event of node.
func nodeFailedCode(evs []apitypes.Event, node string) string {
	code := ""
	for _, e := range evs {
		if e.Type == "node_failed" && e.Node == node {
			code, _ = e.Detail["code"].(string)
		}
	}
	return code
}
