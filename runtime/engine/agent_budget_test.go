package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

// budgetWaitOf waits until run id is parked on its budget wait want and
// returns what it shows.
func (b *agentBundle) budgetWaitOf(t *testing.T, id, want string) budgetShown {
	t.Helper()
	var shown budgetShown
	testutil.Eventually(t, 30*time.Second, func() error {
		run, err := b.eng.Get(context.Background(), "alice", id)
		if err != nil {
			return err
		}
		ws, err := b.eng.Waits(context.Background(), run)
		if err != nil {
			return err
		}
		if len(ws) != 1 || ws[0].ID != want || ws[0].Kind != WaitBudget || ws[0].NeedsDecision() {
			return fmt.Errorf("waits %+v, want the budget wait %s alone", ws, want)
		}
		return json.Unmarshal(ws[0].Shown, &shown)
	})
	return shown
}

// TestAgentBudgetAsks: a flow that says on_budget = "ask" parks a run
// whose budget cannot cover the next model turn on a budget wait showing
// the budget, what was spent and what the turn needs, instead of failing.
// A raise that is not positive, another owner's, or a decision on the
// wait is refused and changes nothing; a raise too small for the turn
// lets the turns it covers run and parks again on the next wait, never
// spending past the budget; a raise that covers the rest lets the agent
// answer. Each raise is journaled with who gave it and why.
func TestAgentBudgetAsks(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(1, 1), tc("c1", "kv.get", `{"key":"a"}`)), askTools(use(1, 1), tc("c2", "kv.get", `{"key":"b"}`)), answer("enough", use(1, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "bounded_ask", `{}`)
	// A turn reserves and costs 7: the second does not fit 12.
	if s := b.budgetWaitOf(t, id, "a@1.budget.1"); s.Budget != 12 || s.Spent != 7 || s.Needed != 7 || s.Short != 2 || !strings.Contains(s.Next, "turn 2") {
		t.Errorf("shown %+v", s)
	}
	ops := b.eng.Ops()
	add := func(owner string, n int64) (BudgetAdded, error) {
		return ops.BudgetAdd(context.Background(), BudgetAddParams{Owner: owner, RunID: id, Add: n, Reason: "worth it"})
	}
	if _, err := add("alice", 0); codeOf(err) != CodeBadRequest {
		t.Errorf("add 0: %v, want %s", err, CodeBadRequest)
	}
	if _, err := add("alice", -3); codeOf(err) != CodeBadRequest {
		t.Errorf("add -3: %v, want %s", err, CodeBadRequest)
	}
	if _, err := add("bob", 5); codeOf(err) != CodeNotFound {
		t.Errorf("another owner's add: %v, want %s", err, CodeNotFound)
	}
	if err := b.decide(id, "a", true, ""); codeOf(err) != CodeNotWaiting || !strings.Contains(err.Error(), "weir run budget") {
		t.Errorf("a decision on the budget wait: %v, want %s naming weir run budget", err, CodeNotWaiting)
	}
	if n := len(m.asked()); n != 1 {
		t.Fatalf("the model was asked %d turns while the run waited, want 1", n)
	}
	got, err := add("alice", 2)
	if err != nil || got.Before != 12 || got.Budget != 14 || got.Wait != "a@1.budget.1" {
		t.Fatalf("add 2: %+v %v", got, err)
	}
	// 14 covers the second turn and not the third.
	if s := b.budgetWaitOf(t, id, "a@1.budget.2"); s.Budget != 14 || s.Spent != 14 {
		t.Errorf("shown %+v, want all of the new budget spent and no more", s)
	}
	run, err := b.eng.Get(context.Background(), "alice", id)
	if err != nil || run.Spent != 14 || run.Budget != 14 || len(m.asked()) != 2 {
		t.Fatalf("run spent %d of %d after %d turns (%v), want 14 of 14 after 2", run.Spent, run.Budget, len(m.asked()), err)
	}
	if _, err := add("alice", 7); err != nil {
		t.Fatal(err)
	}
	run = b.terminal(t, id)
	if r := resultOf(t, run); r.Answer != "enough" || r.Turns != 3 || run.Spent != 21 || run.Budget != 21 {
		t.Errorf("result %+v, spent %d of %d", r, run.Spent, run.Budget)
	}
	evs := b.events(t, id, evBudgetAdded)
	if len(evs) != 2 || evs[0].Detail["by"] != "alice" || evs[0].Detail["reason"] != "worth it" || evs[0].Detail["wait"] != "a@1.budget.1" {
		t.Errorf("budget_added events %+v", evs)
	}
	if evs := b.events(t, id, evBudgetAsked); len(evs) != 2 {
		t.Errorf("%d budget_asked events, want 2", len(evs))
	}
	if _, err := add("alice", 1); codeOf(err) != CodeNotWaiting {
		t.Errorf("a raise of an ended run: %v, want %s", err, CodeNotWaiting)
	}
}

// TestAgentBudgetRaisedOncePerRequestID: a raise sent again with its
// request id (a client's retry after a lost answer) is answered as made
// before and changes nothing — not the budget, not the timeline; with
// another amount it is E_DEDUP_CONFLICT; a reserved prefix is refused.
func TestAgentBudgetRaisedOncePerRequestID(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(1, 1), tc("c1", "kv.get", `{"key":"a"}`)), askTools(use(1, 1), tc("c2", "kv.get", `{"key":"b"}`)), answer("enough", use(1, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "bounded_ask", `{}`)
	b.budgetWaitOf(t, id, "a@1.budget.1")
	add := func(req string, n int64) (BudgetAdded, error) {
		return b.eng.Ops().BudgetAdd(context.Background(), BudgetAddParams{Owner: "alice", RunID: id, Add: n, RequestID: req})
	}
	if _, err := add("fork:mine", 2); codeOf(err) != CodeBadRequestID {
		t.Errorf("a reserved request id: %v, want %s", err, CodeBadRequestID)
	}
	if got, err := add("raise-1", 2); err != nil || got.Existing || got.Budget != 14 {
		t.Fatalf("the raise: %+v %v", got, err)
	}
	b.budgetWaitOf(t, id, "a@1.budget.2") // the raise let turn 2 run
	for range 2 {
		got, err := add("raise-1", 2)
		if err != nil || !got.Existing || got.Budget != 14 || got.Before != 12 {
			t.Fatalf("the raise sent again: %+v %v, want it answered as made, budget 14", got, err)
		}
	}
	if _, err := add("raise-1", 3); codeOf(err) != CodeDedupConflict {
		t.Errorf("the id with another amount: %v, want %s", err, CodeDedupConflict)
	}
	run, err := b.eng.Get(context.Background(), "alice", id)
	if err != nil || run.Budget != 14 {
		t.Fatalf("budget %d (%v) after the retries, want 14", run.Budget, err)
	}
	if evs := b.events(t, id, evBudgetAdded); len(evs) != 1 || evs[0].Detail["request_id"] != "raise-1" {
		t.Errorf("budget_added events %+v, want the one raise with its request id", evs)
	}
}

// The run keeps the latest store.MaxRaises raises' ids.
func TestRecordRaiseKeepsTheLatest(t *testing.T) {
	t.Parallel()
	run := &store.Run{}
	recordRaise(run, "", 5)
	for i := range store.MaxRaises + 3 {
		recordRaise(run, fmt.Sprintf("r%d", i), int64(i+1))
	}
	if len(run.Raises) != store.MaxRaises || run.Raises[0].RequestID != "r3" || run.Raises[store.MaxRaises-1].Add != store.MaxRaises+3 {
		t.Errorf("raises %+v, want the latest %d", run.Raises, store.MaxRaises)
	}
	if _, ok := raiseOf(run, "r2"); ok {
		t.Error("a dropped raise is still found")
	}
	if r, ok := raiseOf(run, "r10"); !ok || r.Add != 11 {
		t.Errorf("raise r10: %+v %v", r, ok)
	}
}

// TestAgentBudgetFailsByDefault: without on_budget = "ask" the same
// budget fails the node with E_BUDGET_EXHAUSTED, as before.
func TestAgentBudgetFailsByDefault(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(1, 1), tc("c1", "kv.get", `{"key":"a"}`)), answer("enough", use(1, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "bounded", `{}`)
	if run.Phase != store.PhaseCompleted { // bounded's error wire runs its fallback
		t.Fatalf("run %s %+v", run.Phase, run.Error)
	}
	if evs := b.events(t, run.ID, evBudgetAsked); len(evs) != 0 {
		t.Errorf("budget_asked events %+v, want none", evs)
	}
}

// TestAgentBudgetAddWithinOwnerQuota: a raise is within the owner's
// budget_per_hour: one that would let the owner's runs spend more in the
// hour than it allows is E_OWNER_BUDGET and changes nothing; one that fits
// is taken.
func TestAgentBudgetAddWithinOwnerQuota(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(1, 1), tc("c1", "kv.get", `{"key":"a"}`)), answer("enough", use(1, 1)))
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: clock.NewFake(time.Now()),
		Owners: map[string]OwnerShare{"alice": {BudgetPerHour: 10}}}, m)
	id := b.submit(t, "bounded_ask", `{}`)
	b.budgetWaitOf(t, id, "a@1.budget.1") // 7 of alice's 10 spent
	add := func(n int64) (BudgetAdded, error) {
		return b.eng.Ops().BudgetAdd(context.Background(), BudgetAddParams{Owner: "alice", RunID: id, Add: n})
	}
	if _, err := add(4); codeOf(err) != CodeOwnerBudget || !strings.Contains(err.Error(), "at most 3") {
		t.Fatalf("a raise past budget_per_hour: %v, want %s", err, CodeOwnerBudget)
	}
	if run, err := b.eng.Get(context.Background(), "alice", id); err != nil || run.Budget != 12 {
		t.Fatalf("the refused raise changed the budget: %+v %v", run, err)
	}
	if got, err := add(3); err != nil || got.Budget != 15 {
		t.Fatalf("a raise within budget_per_hour: %+v %v", got, err)
	}
}
