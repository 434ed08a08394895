package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/sdk/chat"
)

// Budgets by construction (docs/design.md §4): a call starts only on a
// reservation that fits what its run has left; what a tool or a model
// reports above its reservation is recorded as overspend and never buys
// the run more work.

// TestAgentParallelCallsNeverSpendPastTheBudget: one turn asks for far
// more calls than the budget pays for. The calls the remainder covers
// run; every other one ends E_BUDGET_EXHAUSTED before it is made, and
// the run never spends past its budget, however the agent's own step
// parks and wakes between the calls.
func TestAgentParallelCallsNeverSpendPastTheBudget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		report    int64 // what each call reports it cost (declared: 5)
		overspent int64
	}{
		{"calls cost what they declare", kvPricedCost, 0},
		// Each of the six admitted calls reports 3 more than it reserved:
		// charged and recorded, and no seventh call is bought with it.
		{"calls report more than they declare", kvPricedCost + 3, 6 * 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const asked = 40
			var calls []chat.ToolCall
			for i := range asked {
				calls = append(calls, tc(fmt.Sprint("c", i), "kv.priced", fmt.Sprintf(`{"key":"k%d"}`, i)))
			}
			m := newFakeModel(askTools(use(1, 1), calls...), answer("ok", use(1, 1)))
			m.pricedReport = tt.report
			// The six calls the budget covers are all admitted before any
			// reports: a call that reported its overspend first would
			// leave too little for the sixth (the budget holds either
			// way; how many run would depend on the race).
			m.gate, m.openAt = make(chan struct{}), 6
			b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
			run := b.run(t, "priced", `{}`)
			// The turn costs 7 and the budget 37: six calls of 5 fit, and
			// the second turn does not.
			if n := m.called("kv.priced"); n != 6 {
				t.Errorf("kv.priced ran %d times, want the 6 the budget covers", n)
			}
			if want := 7 + 6*tt.report; run.Spent != want || run.Overspent != tt.overspent {
				t.Errorf("spent %d (overspent %d) of budget 37, want %d and %d", run.Spent, run.Overspent, want, tt.overspent)
			}
			if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeBudgetExhausted {
				t.Errorf("run %s %+v, want failed %s", run.Phase, run.Error, CodeBudgetExhausted)
			}
			// The run ends at its second turn, and the calls it queued in
			// between are refused before they run: none ends otherwise.
			done := 0
			for i, c := range b.turns(t, run.ID)[0].Calls {
				switch {
				case !c.Done:
				case c.Error == nil:
					done++
				case c.Error.Code != CodeBudgetExhausted:
					t.Errorf("call %d ended %s, want a result or %s", i, c.Error.Code, CodeBudgetExhausted)
				}
			}
			if done != 6 {
				t.Errorf("%d calls ended with a result, want 6", done)
			}
			if over := b.events(t, run.ID, evOverspent); len(over) != 6*min(int(tt.overspent), 1) {
				t.Errorf("%d overspent events, want one per overspending call", len(over))
			}
		})
	}
}

const unitBudgetSrc = `
flow(name = "over_last", budget = 10, nodes = [
    task("t", tool = "kit.spend", args = {"cost": 1000}),
])

flow(name = "over_mid", budget = 10, nodes = [
    task("t", tool = "kit.spend", args = {"cost": 1000}, next = "free"),
    task("free", tool = "kit.echo", args = {"after": True}, error = "handler"),
    task("handler", tool = "kit.echo", args = {"handled": True}),
])

flow(name = "over_fan", budget = 30, nodes = [
    fanout("fan", items = lambda ctx: [{"cost": 100}] * 24, tool = "kit.spend",
           args = lambda ctx, item: item, width = 24, depth = 1, max_items = 24, next = "after"),
    task("after", tool = "kit.echo", args = {"after": True}),
])

flow(name = "small", nodes = [task("t", tool = "kit.echo", args = {"hi": 1})])
`

// TestUnitOverspendAtTheLastNode: a tool reports 1000 where it declared
// 10, at the last node of a run of budget 10. The run is charged what
// was spent and completes — there is nothing left to pay for — with
// the overspend on its record and in its timeline.
func TestUnitOverspendAtTheLastNode(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitBudgetSrc)
	run := b.waitTerminal(t, b.start(t, "over_last", `{}`, ""))
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("run %s %+v, want completed", run.Phase, run.Error)
	}
	if run.Spent != 1000 || run.Overspent != 1000-kitSpendCost {
		t.Errorf("spent %d, overspent %d; want 1000 and %d", run.Spent, run.Overspent, 1000-kitSpendCost)
	}
	if n := count(b.events(t, run.ID), evOverspent); n != 1 {
		t.Errorf("%d overspent events, want 1", n)
	}
	// The tool's bug is counted against the tool.
	for _, ts := range b.eng.Stats().Types {
		if ts.Type == "kit.spend" && (ts.OverDeclared != 1 || ts.OverUnits != 1000-kitSpendCost) {
			t.Errorf("kit.spend over declared %d times by %d, want once by %d", ts.OverDeclared, ts.OverUnits, 1000-kitSpendCost)
		}
	}
}

// TestUnitOverspentRunStartsNoMoreWork: past its budget, the run's next
// node takes its error wire with E_BUDGET_EXHAUSTED even though it costs
// nothing, and so does the node on that wire: the overspend buys nothing.
func TestUnitOverspentRunStartsNoMoreWork(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitBudgetSrc)
	run := b.waitTerminal(t, b.start(t, "over_mid", `{}`, ""))
	wantFailed(t, run, CodeBudgetExhausted)
	if n := b.tools.Calls("kit.echo"); n != 0 {
		t.Errorf("kit.echo ran %d times after the budget was overspent, want 0", n)
	}
	evs := b.events(t, run.ID)
	if n := count(evs, evNodeFailed); n != 1 {
		t.Errorf("%d node_failed events, want 1 (free, onto its error wire): %v", n, evs)
	}
}

// TestUnitOverspentFanoutDoesNotStopDispatch: every item of a fan-out
// reports ten times its declared cost. The items the budget covered when
// they were admitted run; the rest are refused before their calls; the
// run ends; and another owner's run, queued behind the refused items, is
// dispatched meanwhile.
func TestUnitOverspentFanoutDoesNotStopDispatch(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Workers: 4}, unitBudgetSrc)
	id := b.start(t, "over_fan", `{}`, "")
	res, err := b.eng.Submit(context.Background(), StartRequest{Owner: "bob", Flow: "small", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	run := b.waitTerminal(t, id)
	if calls := b.tools.Calls("kit.spend"); calls > 3 || run.Spent != int64(calls)*100 {
		evs, _ := b.eng.Events(context.Background(), "alice", id, 0, 0)
		for _, e := range evs {
			t.Logf("%s %s %s", e.Type, e.Node, e.Detail)
		}
		t.Errorf("%d calls, spent %d: want at most the 3 the budget of 30 admits, each charged 100", calls, run.Spent)
	}
	if run.Spent > 30 && run.Overspent != run.Spent-int64(b.tools.Calls("kit.spend"))*kitSpendCost {
		t.Errorf("spent %d, overspent %d: the overspend is what the calls reported above 10 each", run.Spent, run.Overspent)
	}
	if n := b.tools.Calls("kit.echo"); n > 1 {
		t.Errorf("kit.echo ran %d times; only bob's run may call it", n)
	}
	var other *store.Run
	testutil.Eventually(t, waitTimeout, func() error {
		var err error
		if other, err = b.eng.Get(context.Background(), "bob", res.RunID); err != nil {
			return err
		}
		if !other.Phase.Terminal() {
			return fmt.Errorf("bob's run is %s", other.Phase)
		}
		return nil
	})
	if other.Phase != store.PhaseCompleted {
		t.Errorf("bob's run %s %+v, want completed", other.Phase, other.Error)
	}
}

// TestAgentUsagePastTheReservation: a provider reports far more usage
// than the turn reserved (a tokenizer the bytes÷3 estimate does not
// bound, or a hostile server). The turn is charged what it reported and
// the excess recorded; as the last thing the run does, the run completes;
// before more work, that work is refused: the call the turn asked for
// is never made and the next turn is never asked.
func TestAgentUsagePastTheReservation(t *testing.T) {
	t.Parallel()
	prices := flows.ModelInfo{InputCost: 200, OutputCost: 100_000}
	huge := use(100_000_000, 10)
	cost := tokenCost(huge.InputTokens, huge.OutputTokens, prices)
	for _, tt := range []struct {
		name   string
		script []chat.Response
		phase  store.Phase
		asked  int
	}{
		{"at the last turn", []chat.Response{answer("ok", huge)}, store.PhaseCompleted, 1},
		{"before a call", []chat.Response{askTools(huge, tc("c0", "kv.get", `{"key":"k"}`)), answer("ok", use(1, 1))}, store.PhaseFailed, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newFakeModel(tt.script...)
			m.inputCost, m.outputCost = prices.InputCost, prices.OutputCost
			b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
			run := b.run(t, "bounded", `{}`)
			if run.Phase != tt.phase {
				t.Fatalf("run %s %+v, want %s", run.Phase, run.Error, tt.phase)
			}
			if tt.phase == store.PhaseFailed && (run.Error == nil || run.Error.Code != CodeBudgetExhausted) {
				t.Errorf("run failed %+v, want %s", run.Error, CodeBudgetExhausted)
			}
			// The turn reserved 7 (see TestAgentBudgetStopsBeforeTheTurn).
			if run.Spent != cost || run.Overspent != cost-7 {
				t.Errorf("spent %d, overspent %d; want %d and %d", run.Spent, run.Overspent, cost, cost-7)
			}
			if n := len(m.asked()); n != tt.asked {
				t.Errorf("%d turns asked, want %d", n, tt.asked)
			}
			if n := m.called("kv.get"); n != 0 {
				t.Errorf("kv.get ran %d times after the budget was overspent", n)
			}
			if n := len(b.events(t, run.ID, evOverspent)); n != 1 {
				t.Errorf("%d overspent events, want 1", n)
			}
		})
	}
}

// The hostile shapes of the budget findings, on a real Badger and the
// real testkit plugin (testkit.cost declares 5 and reports what it is
// asked to).
const hostileBudgetSrc = `
flow(name = "over", budget = 10, nodes = [task("t", tool = "testkit.cost", args = {"cost": 1000})])

flow(name = "over_fan", budget = 30, nodes = [
    fanout("fan", items = lambda ctx: [{"cost": 100}] * 24, tool = "testkit.cost",
           args = lambda ctx, item: item, width = 24, depth = 1, max_items = 24),
])

flow(name = "hello", nodes = [task("t", tool = "testkit.echo", args = {"hi": 1})])
`

// TestBudgetBombsNeitherPanicNorWedge: a run charged 100 times its budget
// at its last node completes with its overspend recorded (it used to
// panic the daemon); a fan-out whose items overspend ends, having made
// only the calls its budget admitted; and another owner's run completes
// meanwhile, and again on an engine restarted over the same store.
func TestBudgetBombsNeitherPanicNorWedge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Workers: 4}, hostileBudgetSrc)
	over := b.start(t, "over", `{}`, "")
	fan := b.start(t, "over_fan", `{}`, "")
	bob := func(eng *Engine) {
		t.Helper()
		res, err := eng.Submit(context.Background(), StartRequest{Owner: "bob", Flow: "hello", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, waitTimeout, func() error {
			r, err := eng.Get(context.Background(), "bob", res.RunID)
			if err != nil {
				return err
			}
			if r.Phase != store.PhaseCompleted {
				return fmt.Errorf("bob's run is %s %+v", r.Phase, r.Error)
			}
			return nil
		})
	}
	bob(b.eng)
	if r := b.waitTerminal(t, over); r.Phase != store.PhaseCompleted || r.Spent != 1000 || r.Overspent != 995 {
		t.Errorf("over: %s %+v spent %d overspent %d, want completed, 1000 and 995", r.Phase, r.Error, r.Spent, r.Overspent)
	}
	r := b.waitTerminal(t, fan)
	if r.Spent > 6*100 || r.Overspent != r.Spent-r.Spent/100*5 {
		t.Errorf("over_fan spent %d (overspent %d): at most the 6 calls of 5 a budget of 30 admits, each charged 100", r.Spent, r.Overspent)
	}
	b.restart(t, Config{Workers: 4})
	bob(b.eng)
}
