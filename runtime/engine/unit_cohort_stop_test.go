package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// A fan-out's timeout bounds its child runs as it bounds its tool
// children's calls, and a child stopped in the middle of a call that is
// not idempotent says that its outcome is unknown.
const unitCohortStopSrc = `
flow(name = "to_grand", nodes = [wait("hold", timeout = "30d")])

flow(name = "to_kid", nodes = [
    branch("mode", cond = lambda ctx: ctx.input["mode"] == "park", then = "deep", otherwise = "held"),
    subflow("deep", flow = "to_grand"),
    branch("held", cond = lambda ctx: ctx.input["mode"] == "block", then = "block", otherwise = "quick"),
    task("block", tool = "kit.block", args = {"gate": "never"}),
    task("quick", tool = "kit.echo", args = {"quick": True}),
])

flow(name = "to_fan", nodes = [
    fanout("fan", items = lambda ctx: [{"mode": "park"}, {"mode": "block"}, {"mode": "quick"}], flow = "to_kid",
           args = lambda ctx, item: item, width = 3, depth = 2, max_items = 3, timeout = "1m"),
])

flow(name = "fuse_straggler", nodes = [
    fanout("fan", items = lambda ctx: ["", "slow"], tool = "kit.block", args = lambda ctx, item: {"gate": item},
           width = 2, depth = 1, max_items = 2, deadline = "400ms", protected = True),
])

flow(name = "send_kid", nodes = [
    task("send", tool = "kit.send", args = lambda ctx: {"to": ctx.input["to"], "gate": ctx.input["gate"]}, at_most_once = True),
])

flow(name = "stop_tools", nodes = [
    fanout("fan", items = lambda ctx: [{"to": "a", "gate": "g0"}, {"to": "b", "gate": "g1"}], tool = "kit.send",
           args = lambda ctx, item: item, at_most_once = True, width = 2, depth = 1, max_items = 2,
           quorum = 0.5, grace = "300ms"),
])

flow(name = "stop_flows", nodes = [
    fanout("fan", items = lambda ctx: [{"to": "a", "gate": "g0"}, {"to": "b", "gate": "g1"}], flow = "send_kid",
           args = lambda ctx, item: item, width = 2, depth = 1, max_items = 2,
           quorum = 0.5, grace = "300ms"),
])
`

// itemDoneCodes maps each item_done event's item to its code (and state).
func (b *testBundle) itemDone(t *testing.T, id string) map[int][2]string {
	t.Helper()
	evs, err := b.eng.Events(context.Background(), "alice", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][2]string{}
	for _, e := range evs {
		if e.Type != evItemDone {
			continue
		}
		i, _ := e.Detail["item"].(int)
		if f, ok := e.Detail["item"].(float64); ok {
			i = int(f)
		}
		code, _ := e.Detail["code"].(string)
		state, _ := e.Detail["state"].(string)
		out[i] = [2]string{state, code}
	}
	return out
}

// A child run that parks (on a grandchild waiting for a person) and one
// whose tool call hangs both overrun the fan-out's timeout: each is
// cancelled through the cancel path, descendants with it, its item fails
// with E_CHILD_TIMEOUT and the cohort counts it failed, as a tool child's
// timeout would.
func TestUnitFanoutTimeoutBoundsChildRuns(t *testing.T) {
	t.Parallel()
	// Leases outlast the jumps of the clock: only the timeout acts.
	b := setupUnit(t, Config{LeaseTimeout: time.Hour}, unitCohortStopSrc)
	start := b.clock.Now()
	id := b.start(t, "to_fan", `{}`, "")
	b.kitIs(t, "the blocking child's call", func(k *kit) bool { return k.blocked == 1 })
	b.wait(t, id, "the quick child judged", func(*store.Run) bool {
		return b.cohortIs(t, id, func(c CohortView) bool { return c.Mature == 1 && c.InFlight == 2 })
	})
	if at := b.parkedUntil(t, id); !at.Equal(start.Add(time.Minute)) {
		t.Fatalf("parent parked until %s, want the children's deadline %s", at, start.Add(time.Minute))
	}
	// Just short of the timeout nothing happens.
	b.clock.Advance(time.Minute - time.Second)
	if c := b.cohort(t, id); c.InFlight != 2 || c.Failed != 0 {
		t.Fatalf("cohort %+v before the timeout", c)
	}
	// Past it, the parent cancels the two children and closes once they
	// ended: the scheduler's ticks move on as the clock does.
	b.clock.Advance(time.Second)
	run := b.advanceUntil(t, id, b.tick, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v: an insufficient close still takes next", run.Phase, run.Error)
	}
	if c := b.cohort(t, id); c.Failed != 2 || c.Published != 1 || c.InFlight != 0 {
		t.Errorf("cohort %+v: want 2 failed (timed out), 1 published", c)
	}
	if codes := b.itemCodes(t, id); codes[0] != CodeChildTimeout || codes[1] != CodeChildTimeout || codes[2] != "" {
		t.Errorf("item codes %v: want the two overrunning children %s", codes, CodeChildTimeout)
	}
	if done := b.itemDone(t, id); done[0] != [2]string{"failed", CodeChildTimeout} || done[1] != [2]string{"failed", CodeChildTimeout} {
		t.Errorf("item_done events %v", done)
	}
	b.kitIs(t, "the hanging call cancelled", func(k *kit) bool { return k.cancelled == 1 && k.blocked == 0 })
	// The children and the grandchild end cancelled.
	for _, k := range b.children(t, id) {
		kr := b.waitTerminal(t, k.ID)
		var in struct{ Mode string }
		_ = json.Unmarshal(k.Input, &in)
		switch in.Mode {
		case "quick":
			if kr.Phase != store.PhaseCompleted {
				t.Errorf("quick child %s", kr.Phase)
			}
		default:
			if kr.Phase != store.PhaseCancelled {
				t.Errorf("%s child %s %+v: want cancelled", in.Mode, kr.Phase, kr.Error)
			}
		}
		for _, g := range b.children(t, k.ID) {
			if gr := b.waitTerminal(t, g.ID); gr.Phase != store.PhaseCancelled {
				t.Errorf("grandchild %s %s: the cancel must reach the descendants", g.ID, gr.Phase)
			}
		}
	}
}

// A cohort that stops a child whose call is not idempotent, after its
// started record and before its result, records E_OUTCOME_UNKNOWN for the
// item — in the cohort (weir run get), the events and the node's result —
// for a tool child and for a child run alike.
func TestUnitStoppedNonIdempotentChildIsUnknown(t *testing.T) {
	t.Parallel()
	for _, flow := range []string{"stop_tools", "stop_flows"} {
		t.Run(flow, func(t *testing.T) {
			t.Parallel()
			b := setupUnit(t, Config{}, unitCohortStopSrc)
			id := b.start(t, flow, `{}`, "")
			// Calls of kit.send are made one at a time: let the first one
			// through, and stop the other in the middle of its call.
			var first string
			b.kitIs(t, "a send waiting", func(k *kit) bool {
				for _, g := range []string{"g0", "g1"} {
					if k.atGate[g] == 1 {
						first = g
					}
				}
				return first != ""
			})
			b.kit.open(first)
			u, other := 1, "g1"
			if first == "g1" {
				u, other = 0, "g0"
			}
			b.kitIs(t, "the other send waiting", func(k *kit) bool { return k.atGate[other] == 1 })
			b.wait(t, id, "cohort frozen", func(*store.Run) bool {
				return b.cohortIs(t, id, func(c CohortView) bool { return c.State == "frozen" })
			})
			b.clock.Advance(300*time.Millisecond + b.tick)
			run := b.waitTerminal(t, id)
			if run.Phase != store.PhaseCompleted {
				t.Fatalf("%s %+v", run.Phase, run.Error)
			}
			c := b.cohort(t, id)
			if c.Stopped != 1 || len(c.Unknown) != 1 || c.Unknown[0] != u {
				t.Fatalf("cohort %+v: want item %d stopped with its outcome unknown", c, u)
			}
			if codes := b.itemCodes(t, id); codes[u] != CodeOutcomeUnknown || codes[1-u] != "" {
				t.Errorf("item codes %v", codes)
			}
			if done := b.itemDone(t, id); done[u] != [2]string{"stopped", CodeOutcomeUnknown} {
				t.Errorf("item_done events %v: want item %d stopped with %s", done, u, CodeOutcomeUnknown)
			}
			var out struct {
				Unknown []struct {
					Index int
					State string
					Error store.RunError
				}
			}
			if err := json.Unmarshal(run.Output, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Unknown) != 1 || out.Unknown[0].Index != u || out.Unknown[0].State != "stopped" || out.Unknown[0].Error.Code != CodeOutcomeUnknown {
				t.Errorf("node result %s: want item %d listed as unknown", run.Output, u)
			}
			if n := b.sends(); n != 2 {
				t.Errorf("%d sends, want 2: the stopped one is never sent again", n)
			}
		})
	}
}

// A straggler of a cohort closed by its fuse runs on after its run
// completed; when its lease is rescued (its daemon died, say) it runs
// again and ends as a late result, instead of staying in the queue
// unleasable in front of every ready task behind it.
func TestUnitRescuedStragglerOfACompletedRunEndsLate(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setupUnit(t, Config{LeaseTimeout: lease}, unitCohortStopSrc)
	ctx := context.Background()
	id := b.start(t, "fuse_straggler", `{}`, "")
	b.wait(t, id, "the quick child judged", func(*store.Run) bool {
		return b.cohortIs(t, id, func(c CohortView) bool { return c.Mature == 1 })
	})
	b.kitIs(t, "the straggler at its gate", func(k *kit) bool { return k.atGate["slow"] == 1 })
	b.clock.Advance(400*time.Millisecond + b.tick)
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v", run.Phase, run.Error)
	}
	// As a dead daemon leaves it: the straggler's lease past its deadline.
	if err := b.mem.Update(ctx, func(tx store.Tx) error {
		leases, err := tx.LeaseList()
		if err != nil || len(leases) != 1 {
			return fmt.Errorf("leases %v %v: want the straggler's", leases, err)
		}
		leases[0].Deadline = b.clock.Now().Add(-time.Second)
		return tx.LeasePut(leases[0])
	}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(lease/10 + b.tick)
	b.kitIs(t, "the rescued straggler called again", func(k *kit) bool { return k.cancelled == 1 && k.atGate["slow"] == 1 })
	b.kit.open("slow")
	b.wait(t, id, "the straggler's late result", func(*store.Run) bool { return b.cohort(t, id).Late == 1 })
	testutil.Eventually(t, waitTimeout, func() error {
		var n int
		err := b.mem.View(ctx, func(tx store.Tx) error {
			ts, err := tx.TaskListByRun(id)
			n = len(ts)
			return err
		})
		if err == nil && n != 0 {
			err = fmt.Errorf("%d tasks left in the queue", n)
		}
		return err
	})
}
