package engine

import (
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/sdk/chat"
)

// runRecord reads run id from the store.
func (b *agentBundle) runRecord(t *testing.T, id string) *store.Run {
	t.Helper()
	return storedRun(t, b.st, id)
}

// TestAgentFlowCallsRunTogether: two calls of a flow in one turn are two
// child runs at once — both park on their person's wait before either is
// decided, so neither waited for the other — each holding its flow's
// budget in escrow out of the agent's run; decided in reverse order, both
// results reach the model and the escrow goes back, the run charged what
// the children spent.
func TestAgentFlowCallsRunTogether(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "gated_budget", `{}`), tc("c2", "gated_budget", `{}`)), answer("both", use(10, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "delegating_two", `{}`)
	ds := b.openDecisionsOf(t, id, 2) // both children wait at once
	for _, d := range ds {
		child := b.runRecord(t, d.RunID)
		if child.ParentRunID != id || child.Budget != 30 || child.Reserve != 30 {
			t.Errorf("child %s: parent %s, budget %d, reserve %d; want the agent's, 30 and 30", child.ID, child.ParentRunID, child.Budget, child.Reserve)
		}
	}
	if p := b.runRecord(t, id); p.Escrow != 60 {
		t.Errorf("the agent's run holds %d in escrow, want 60: each child's 30", p.Escrow)
	}
	for j := len(ds) - 1; j >= 0; j-- {
		if err := b.decide(ds[j].RunID, "ok", true, ""); err != nil {
			t.Fatal(err)
		}
	}
	run := b.terminal(t, id)
	if r := resultOf(t, run); r.Answer != "both" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	told := map[string]string{}
	for _, msg := range m.asked()[1].Messages {
		if msg.Role == chat.RoleTool {
			told[msg.ToolCallID] = msg.Content
		}
	}
	if told["c1"] != `{"value":"priced"}` || told["c2"] != `{"value":"priced"}` {
		t.Errorf("the model was told %v, want each child's output", told)
	}
	if run.Escrow != 0 || run.Spent != 7+7+kvPricedCost+kvPricedCost {
		t.Errorf("the run's escrow %d and spent %d; want 0 and its two turns (7 each) and the children's calls (%d each)", run.Escrow, run.Spent, kvPricedCost)
	}
}

// TestAgentFlowCallsShareTheRemainder: calls of flows that declare no
// budget, started together, share what the run's remainder leaves after
// the budgets of the others: neither takes it all, and each runs.
func TestAgentFlowCallsShareTheRemainder(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "gated", `{}`), tc("c2", "gated", `{}`), tc("c3", "gated_budget", `{}`)), answer("all", use(10, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "delegating_two", `{}`)
	ds := b.openDecisionsOf(t, id, 3)
	reserves := map[string][]int64{}
	for _, d := range ds {
		child := b.runRecord(t, d.RunID)
		reserves[child.Flow] = append(reserves[child.Flow], child.Reserve)
	}
	p := b.runRecord(t, id)
	shared := reserves["gated"]
	if len(shared) != 2 || shared[0] != shared[1] || shared[0] < 1 || reserves["gated_budget"][0] != 30 {
		t.Fatalf("children's reserves %v", reserves)
	}
	if left := p.Budget - p.Spent - 30; shared[0] != left/2 || p.Escrow != 30+2*shared[0] {
		t.Errorf("each unbudgeted child holds %d, the run %d in escrow; want half of the %d left after the other's 30", shared[0], p.Escrow, left)
	}
	for _, d := range ds {
		if err := b.decide(d.RunID, "ok", true, ""); err != nil {
			t.Fatal(err)
		}
	}
	if r := resultOf(t, b.terminal(t, id)); r.Answer != "all" {
		t.Errorf("result %+v", r)
	}
	if p := b.runRecord(t, id); p.Escrow != 0 {
		t.Errorf("escrow %d left once the run ended, want none", p.Escrow)
	}
}
