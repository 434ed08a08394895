package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

// Budgets are escrowed (docs/design.md §11): a child run's budget is held
// out of its parent's remainder from its admission to its end.
const unitEscrowSrc = `
flow(name = "esc_kid", nodes = [
    task("spend", tool = "kit.spend", args = lambda ctx: {"cost": ctx.input["cost"], "gate": ctx.input["gate"]}),
])

flow(name = "esc_fan_wide", budget = 100, nodes = [
    fanout("fan", items = lambda ctx: [{"cost": 5, "gate": "w"}] * 4, flow = "esc_kid",
           args = lambda ctx, item: item, width = 4, depth = 1, max_items = 4, budget = 30),
])

flow(name = "esc_fan_return", budget = 100, nodes = [
    fanout("fan", items = lambda ctx: [{"cost": 5, "gate": "a"}] + [{"cost": 5, "gate": "b"}] * 3, flow = "esc_kid",
           args = lambda ctx, item: item, width = 3, depth = 1, max_items = 4, budget = 30),
])

flow(name = "esc_sub_rest", budget = 50, nodes = [
    subflow("call", flow = "esc_kid", args = {"cost": 7, "gate": "s"}),
])

flow(name = "esc_sub_over", budget = 50, nodes = [
    task("pay", tool = "kit.spend", args = {"cost": 15, "gate": ""}, next = "call"),
    subflow("call", flow = "esc_kid", args = {"cost": 7, "gate": ""}, budget = 40, error = "fallback"),
    task("fallback", tool = "kit.echo", args = lambda ctx: {"fell_back": True}),
])

flow(name = "esc_share", budget = 100, nodes = [
    fanout("fan", items = lambda ctx: [{"cost": 1, "gate": ""}] * 3, flow = "esc_kid",
           args = lambda ctx, item: item, width = 3, depth = 1, max_items = 3),
])

flow(name = "esc_cheap", nodes = [task("read", tool = "kit.spend", args = {"cost": 4})])

flow(name = "esc_many", budget = 100, nodes = [
    fanout("fan", items = lambda ctx: [1, 2, 3, 4, 5], flow = "esc_cheap", width = 3, depth = 1, max_items = 5, budget = 30),
])

flow(name = "esc_waiter", nodes = [wait("hold", timeout = "30d")])

flow(name = "esc_vanish", budget = 50, nodes = [
    subflow("call", flow = "esc_waiter", error = "after"),
    task("after", tool = "kit.echo", args = {"after": True}),
])


flow(name = "esc_tool_items", budget = 25, nodes = [
    fanout("fan", items = lambda ctx: [{"cost": 10, "gate": "t"}] * 4, tool = "kit.spend",
           args = lambda ctx, item: item, width = 4, depth = 1, max_items = 4),
])
`

// runRecord reads a run straight from the store, escrow included.
func (b *testBundle) runRecord(t testing.TB, id string) *store.Run {
	t.Helper()
	return storedRun(t, b.mem, id)
}

// storedRun reads run id straight from st.
func storedRun(t testing.TB, st store.Store, id string) *store.Run {
	t.Helper()
	var r *store.Run
	if err := st.View(context.Background(), func(tx store.Tx) error {
		var err error
		r, err = tx.RunGet(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// children lists a run's child runs.
func (b *testBundle) children(t testing.TB, id string) []*store.Run {
	t.Helper()
	var rs []*store.Run
	if err := b.mem.View(context.Background(), func(tx store.Tx) error {
		var err error
		rs, err = tx.RunList(store.RunListParams{ParentRunID: id})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rs
}

// itemCodes is the error code of each item of the run's cohort at node
// fan, visit 1 ("" for none).
func (b *testBundle) itemCodes(t testing.TB, id string) []string {
	t.Helper()
	var items []*store.CohortItem
	if err := b.mem.View(context.Background(), func(tx store.Tx) error {
		var err error
		items, err = tx.CohortItemList(id, "fan", 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(items))
	for i, it := range items {
		if it.Error != nil {
			out[i] = it.Error.Code
		}
	}
	return out
}

// Four children of 30 under a budget of 100 admitted together: three are
// held in escrow, the fourth fails at admission with E_BUDGET_EXHAUSTED
// before it starts, and what the three leave unspent comes back.
func TestUnitEscrowRefusesTheChildTheRemainderCannotCover(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	id := b.start(t, "esc_fan_wide", `{}`, "")
	b.kitIs(t, "three children at their gate", func(k *kit) bool { return k.blocked == 3 })
	if r := b.runRecord(t, id); r.Escrow != 90 || r.Spent != 0 {
		t.Fatalf("parent spent %d escrow %d while 3 children of 30 run: want 0 and 90", r.Spent, r.Escrow)
	}
	kids := b.children(t, id)
	if len(kids) != 3 {
		t.Fatalf("%d child runs, want 3: the fourth must not start", len(kids))
	}
	for _, k := range kids {
		if k.Budget != 30 || k.Reserve != 30 {
			t.Errorf("child %s budget %d reserve %d, want 30 and 30", k.ID, k.Budget, k.Reserve)
		}
	}
	if codes := b.itemCodes(t, id); codes[3] != CodeBudgetExhausted {
		t.Fatalf("item codes %v: the fourth item must fail with %s", codes, CodeBudgetExhausted)
	}
	b.kit.open("w")
	run := b.waitTerminal(t, id)
	if r := b.runRecord(t, id); r.Escrow != 0 || r.Spent != 15 {
		t.Errorf("parent %s spent %d escrow %d at its end: want 15 spent, nothing held", run.Phase, r.Spent, r.Escrow)
	}
	if c := b.cohort(t, id); c.Published != 3 || c.Failed != 1 {
		t.Errorf("cohort %+v: want 3 published, 1 failed", c)
	}
	if n := b.tools.Calls("kit.spend"); n != 3 {
		t.Errorf("%d calls of kit.spend, want 3: the refused child calls nothing", n)
	}
}

// A child that ends gives back what it did not spend, and the next child
// is admitted out of it.
func TestUnitEscrowReturnsTheUnspentPart(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	id := b.start(t, "esc_fan_return", `{}`, "")
	b.kitIs(t, "three children at their gates", func(k *kit) bool { return k.blocked == 3 })
	if r := b.runRecord(t, id); r.Escrow != 90 {
		t.Fatalf("escrow %d, want 90", r.Escrow)
	}
	b.kit.open("a")
	// The first child spent 5 of its 30: 100 - 5 - 60 = 35 covers the fourth.
	b.wait(t, id, "the fourth child admitted", func(*store.Run) bool {
		r := b.runRecord(t, id)
		return r.Spent == 5 && r.Escrow == 90
	})
	b.kit.open("b")
	b.waitTerminal(t, id)
	if r := b.runRecord(t, id); r.Phase != store.PhaseCompleted || r.Spent != 20 || r.Escrow != 0 {
		t.Fatalf("parent %s spent %d escrow %d: want completed, 20, 0", r.Phase, r.Spent, r.Escrow)
	}
	if c := b.cohort(t, id); c.Published != 4 {
		t.Errorf("cohort %+v: want 4 published", c)
	}
}

// A subflow without a declared budget holds the parent's whole remainder
// while it runs, and gives back what it did not spend.
func TestUnitEscrowSubflowHoldsTheRemainder(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	id := b.start(t, "esc_sub_rest", `{}`, "")
	b.kitIs(t, "the child at its gate", func(k *kit) bool { return k.blocked == 1 })
	if r := b.runRecord(t, id); r.Escrow != 50 {
		t.Fatalf("escrow %d while the child runs, want the whole remainder 50", r.Escrow)
	}
	if kids := b.children(t, id); len(kids) != 1 || kids[0].Budget != 50 || kids[0].Reserve != 50 {
		t.Fatalf("children %+v: want one with budget and reserve 50", kids)
	}
	b.kit.open("s")
	b.waitTerminal(t, id)
	if r := b.runRecord(t, id); r.Phase != store.PhaseCompleted || r.Spent != 7 || r.Escrow != 0 {
		t.Fatalf("parent %s spent %d escrow %d: want completed, 7, 0", r.Phase, r.Spent, r.Escrow)
	}
}

// A subflow whose declared budget is more than the parent has left (40
// of 50 - 15) is refused on the parent's error wire with
// E_BUDGET_EXHAUSTED, before any child starts or any call is made.
func TestUnitEscrowSubflowRefusedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	id := b.start(t, "esc_sub_over", `{}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), "fell_back") {
		t.Fatalf("%s output %s error %+v: want the error wire taken", run.Phase, run.Output, run.Error)
	}
	evs, err := b.eng.Events(context.Background(), "alice", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		if e.Type == evNodeFailed && e.Node == "call" && e.Detail["code"] == CodeBudgetExhausted {
			found = true
		}
	}
	if !found {
		t.Errorf("no node_failed %s at call in the timeline", CodeBudgetExhausted)
	}
	if kids := b.children(t, id); len(kids) != 0 {
		t.Errorf("%d child runs started", len(kids))
	}
	if n := b.tools.Calls("kit.spend"); n != 1 {
		t.Errorf("%d calls of kit.spend, want the parent's own 1", n)
	}
	if r := b.runRecord(t, id); r.Escrow != 0 {
		t.Errorf("escrow %d left behind by a refused child", r.Escrow)
	}
}

// Children of a fan-out whose node and flow declare no budget each hold
// the parent's remainder at the cohort's start divided by the width,
// fixed for the cohort and shown with it.
func TestUnitEscrowFanoutShare(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	id := b.start(t, "esc_share", `{}`, "")
	b.waitTerminal(t, id)
	if c := b.cohort(t, id); c.ChildBudget != 33 || c.Published != 3 {
		t.Fatalf("cohort %+v: want child budget 100/3 = 33 and 3 published", c)
	}
	for _, k := range b.children(t, id) {
		if k.Budget != 33 || k.Reserve != 33 {
			t.Errorf("child %s budget %d reserve %d, want 33", k.ID, k.Budget, k.Reserve)
		}
	}
	if r := b.runRecord(t, id); r.Spent != 3 || r.Escrow != 0 {
		t.Errorf("parent spent %d escrow %d: want 3 and 0", r.Spent, r.Escrow)
	}
}

// Tool children of a fan-out reserve their cost out of the same
// remainder: those it cannot cover fail with E_BUDGET_EXHAUSTED without
// being called.
func TestUnitEscrowToolItemsFailBeforeTheCall(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	id := b.start(t, "esc_tool_items", `{}`, "")
	b.kitIs(t, "two calls at their gate", func(k *kit) bool { return k.blocked == 2 })
	b.wait(t, id, "two items refused", func(*store.Run) bool {
		n := 0
		for _, c := range b.itemCodes(t, id) {
			if c == CodeBudgetExhausted {
				n++
			}
		}
		return n == 2
	})
	b.kit.open("t")
	b.waitTerminal(t, id)
	if r := b.runRecord(t, id); r.Spent != 20 {
		t.Errorf("spent %d, want the two calls' 20", r.Spent)
	}
	if n := b.tools.Calls("kit.spend"); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}

// Property: whatever mix of concurrent children — fan-outs of child runs
// with a declared budget or a share, fan-outs of fan-outs, subflows —
// and whatever they spend, no run's recorded spending plus what its live
// children spent ever exceeds its budget, nothing stays in escrow once
// the runs end, and every unit a tool reported is counted exactly once.
func TestUnitEscrowPropertyChildrenNeverOverspend(t *testing.T) {
	t.Parallel()
	for _, rerun := range []bool{false, true} {
		t.Run(fmt.Sprintf("rerun=%v", rerun), func(t *testing.T) {
			t.Parallel()
			var wrap func(store.Store) store.Store
			if rerun {
				wrap = func(s store.Store) store.Store { return rerunStore{s} }
			}
			escrowProperty(t, wrap)
		})
	}
}

// rerunStore runs every Update's fn twice, first in a transaction it
// throws away, as a store retrying a conflict does (PostgreSQL's
// serialization failures): what fn does outside its transaction would
// show twice.
type rerunStore struct{ store.Store }

var errThrownAway = errors.New("thrown away")

func (r rerunStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	err := r.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errThrownAway
	})
	if !errors.Is(err, errThrownAway) {
		return err
	}
	return r.Store.Update(ctx, fn)
}

func escrowProperty(t *testing.T, wrap func(store.Store) store.Store) {
	const src = `
flow(name = "p_kid", nodes = [
    task("a", tool = "kit.spend", args = lambda ctx: {"cost": ctx.input["a"]}, next = "b"),
    task("b", tool = "kit.spend", args = lambda ctx: {"cost": ctx.input["b"]}),
])
flow(name = "p_inner", nodes = [
    fanout("fan", items = lambda ctx: ctx.input["items"], flow = "p_kid", args = lambda ctx, item: item,
           width = 2, depth = 1, max_items = 6, quorum = 0.1),
])
flow(name = "p_share", budget = 70, nodes = [
    fanout("fan", items = lambda ctx: ctx.input["items"], flow = "p_kid", args = lambda ctx, item: item,
           width = 4, depth = 1, max_items = 8, quorum = 0.1),
])
flow(name = "p_declared", budget = 90, nodes = [
    fanout("fan", items = lambda ctx: ctx.input["items"], flow = "p_kid", args = lambda ctx, item: item,
           width = 5, depth = 1, max_items = 8, budget = 25, quorum = 0.1),
])
flow(name = "p_nested", budget = 120, nodes = [
    task("own", tool = "kit.spend", args = lambda ctx: {"cost": ctx.input["own"]}, next = "sub"),
    subflow("sub", flow = "p_kid", args = lambda ctx: ctx.input["sub"], budget = 30, next = "fan", error = "fan"),
    fanout("fan", items = lambda ctx: ctx.input["groups"], flow = "p_inner", args = lambda ctx, item: item,
           width = 3, depth = 2, max_items = 4, quorum = 0.1),
])
`
	b := setupUnitOn(t, Config{Workers: 6}, src, wrap)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	kid := func() map[string]int {
		return map[string]int{"a": rng.IntN(kitSpendCost + 1), "b": rng.IntN(kitSpendCost + 1)}
	}
	kids := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = kid()
		}
		return out
	}
	var roots []string
	for range 4 {
		for _, f := range []string{"p_share", "p_declared"} {
			in, _ := json.Marshal(map[string]any{"items": kids(1 + rng.IntN(8))})
			roots = append(roots, b.start(t, f, string(in), ""))
		}
		groups := make([]any, 1+rng.IntN(4))
		for i := range groups {
			groups[i] = map[string]any{"items": kids(1 + rng.IntN(6))}
		}
		in, _ := json.Marshal(map[string]any{"own": rng.IntN(kitSpendCost + 1), "sub": kid(), "groups": groups})
		roots = append(roots, b.start(t, "p_nested", string(in), ""))
	}

	// Sample every run while they work: no run's spending plus what its
	// live children spent, nor its spending plus its escrow, is above
	// its budget.
	check := func() error {
		return b.mem.View(context.Background(), func(tx store.Tx) error {
			runs, err := tx.RunList(store.RunListParams{})
			if err != nil {
				return err
			}
			live := map[string]int64{}
			for _, r := range runs {
				if r.ParentRunID != "" && !r.Phase.Terminal() {
					live[r.ParentRunID] += r.Spent
				}
			}
			for _, r := range runs {
				if r.Budget == 0 {
					return fmt.Errorf("run %s of %s has no budget: every run here is bounded", r.ID, r.Flow)
				}
				if r.Spent+live[r.ID] > r.Budget || r.Spent+r.Escrow > r.Budget {
					return fmt.Errorf("run %s of %s: spent %d + live children %d, escrow %d, budget %d", r.ID, r.Flow, r.Spent, live[r.ID], r.Escrow, r.Budget)
				}
			}
			return nil
		})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var violation error
	wg.Go(func() {
		every := time.NewTicker(time.Millisecond) // sampling, not waiting
		defer every.Stop()
		for {
			select {
			case <-stop:
				return
			case <-every.C:
			}
			if err := check(); err != nil && violation == nil {
				violation = err
			}
		}
	})
	for _, id := range roots {
		b.waitTerminal(t, id)
	}
	close(stop)
	wg.Wait()
	if violation != nil {
		t.Fatal(violation)
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	// Every run is over: nothing is held, and the roots together spent
	// exactly what the tools reported.
	var total int64
	testutil.Eventually(t, waitTimeout, func() error {
		total = 0
		return b.mem.View(context.Background(), func(tx store.Tx) error {
			runs, err := tx.RunList(store.RunListParams{})
			if err != nil {
				return err
			}
			for _, r := range runs {
				if !r.Phase.Terminal() {
					return fmt.Errorf("run %s of %s still %s", r.ID, r.Flow, r.Phase)
				}
				if r.Escrow != 0 {
					return fmt.Errorf("run %s of %s ended with %d in escrow", r.ID, r.Flow, r.Escrow)
				}
				if r.ParentRunID == "" {
					total += r.Spent
				}
			}
			return nil
		})
	})
	var reported int64
	b.kit.read(func() { reported = b.kit.spentTotal })
	if total != reported {
		t.Errorf("the roots spent %d, the tools reported %d: a cost was lost or counted twice", total, reported)
	}
}

// Children end while the parent looks at its cohort: what they gave back
// in the store is counted when the next child is reserved, whatever the
// timing. Five children of 30 spending 4 each, three at a time, under
// 100: when the fifth comes, at most two are in flight and at least two
// ended, so at most 8 + 60 is spoken for and it always fits.
func TestUnitEscrowCountsWhatEndedChildrenGaveBack(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	for i := range 50 {
		id := b.start(t, "esc_many", `{}`, "")
		b.waitTerminal(t, id)
		if codes := b.itemCodes(t, id); fmt.Sprint(codes) != "[    ]" {
			t.Fatalf("run %d: item codes %q: every child fits in what the others give back", i, codes)
		}
	}
}

// A flow an agent calls as a tool is a child run like a subflow's: while
// it waits for a person it holds the agent run's remainder in escrow, and
// gives back what it did not spend when it ends.
func TestUnitEscrowAgentFlowToolChild(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "gated", `{}`)), answer("gated done", use(10, 1)))
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: clock.NewFake(time.Now()), DefaultRunBudget: 1000}, m)
	ctx := context.Background()
	res, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "delegating_gate", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ds := b.openDecisionsOf(t, res.RunID, 1)
	var parent, child *store.Run
	if err := b.st.View(ctx, func(tx store.Tx) error {
		var err error
		if parent, err = tx.RunGet(res.RunID); err != nil {
			return err
		}
		child, err = tx.RunGet(ds[0].RunID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The remainder is what neither the turns spent nor the agent's own
	// slice held when the child was admitted.
	if parent.Budget != 1000 || child.Reserve < 900 || child.Budget != child.Reserve || parent.Escrow != child.Reserve ||
		parent.Spent+parent.Escrow > parent.Budget {
		t.Fatalf("parent budget %d spent %d escrow %d, child budget %d reserve %d: want the child holding the remainder",
			parent.Budget, parent.Spent, parent.Escrow, child.Budget, child.Reserve)
	}
	if err := b.decide(ds[0].RunID, "ok", true, ""); err != nil {
		t.Fatal(err)
	}
	b.terminal(t, res.RunID)
	if err := b.st.View(ctx, func(tx store.Tx) error {
		var err error
		parent, err = tx.RunGet(res.RunID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if parent.Escrow != 0 || parent.Spent > parent.Budget {
		t.Errorf("parent spent %d escrow %d of %d at its end: want nothing held", parent.Spent, parent.Escrow, parent.Budget)
	}
}

// A child whose record vanished (an operator deleted it) never ends to
// give its escrow back: the parent counts what its children hold again
// from their records when it finds the child gone.
func TestUnitEscrowOfAVanishedChildIsRecounted(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitEscrowSrc)
	id := b.start(t, "esc_vanish", `{}`, "")
	b.wait(t, id, "holding the child's escrow", func(*store.Run) bool {
		return b.runRecord(t, id).Escrow == 50 && len(b.children(t, id)) == 1 && b.children(t, id)[0].Phase == store.PhaseWaiting
	})
	child := b.children(t, id)[0].ID
	b.vanish(t, child)
	run := b.waitTerminal(t, id)
	if r := b.runRecord(t, id); run.Phase != store.PhaseCompleted || r.Escrow != 0 {
		t.Fatalf("%s %+v escrow %d: want the error wire taken and nothing held", run.Phase, run.Error, r.Escrow)
	}
}
