package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/tool"
)

// cutModel is the fake model whose n-th model turn never answers: it
// signals asked and holds until its call is cut off.
type cutModel struct {
	*fakeModel
	mu    sync.Mutex
	turns int
	cutAt int
	asked chan struct{}
}

func (c *cutModel) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	if req.Tool == "llm.chat" {
		c.mu.Lock()
		c.turns++
		cut := c.turns == c.cutAt
		c.mu.Unlock()
		if cut {
			close(c.asked)
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return c.fakeModel.Call(ctx, req)
}

// TestAgentTurnCutByACrash: a crash while turn 2 is asked leaves nothing
// of it in the journal; the process that recovers the run asks it again,
// and its record, the agent's view and the engine's figures say one ask
// of it may have been cut off and billed, at most its reservation.
func TestAgentTurnCutByACrash(t *testing.T) {
	t.Parallel()
	fm := newFakeModel(askTools(use(10, 1), tc("c1", "kv.get", `{"key":"x"}`)), answer("done", use(10, 1)))
	m := &cutModel{fakeModel: fm, cutAt: 2, asked: make(chan struct{})}
	fk := clock.NewFake(time.Now())
	st := memstore.New()
	b := setupAgentConfig(t, Config{Store: st, Tools: m, Clock: fk}, fm)
	id := b.submit(t, "research", `{"topic":"x"}`)
	select {
	case <-m.asked:
	case <-time.After(30 * time.Second):
		t.Fatal("turn 2 was never asked")
	}
	b.crash(t)
	st2, err := st.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	b2 := setupAgentConfig(t, Config{Store: st2, Tools: m, Clock: fk}, fm)
	run := b2.terminal(t, id)
	if r := resultOf(t, run); r.Answer != "done" || r.Turns != 2 {
		t.Fatalf("result %+v", r)
	}
	turns := b2.turns(t, id)
	if turns[0].Cut != 0 || turns[1].Cut != 1 || turns[1].CutReserved != turns[1].Reserved || turns[1].Reserved == 0 {
		t.Errorf("turns cut %d and %d (turn 2 reserved %d, cut reserved %d); want turn 2 alone, once, at its reservation",
			turns[0].Cut, turns[1].Cut, turns[1].Reserved, turns[1].CutReserved)
	}
	p, err := b2.eng.Progress(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Agents) != 1 || p.Agents[0].CutTurns != 1 || p.Agents[0].CutReserved != turns[1].Reserved {
		t.Errorf("agents %+v: want one cut ask, at most turn 2's reservation %d", p.Agents, turns[1].Reserved)
	}
	ms := b2.eng.Stats().Models
	if len(ms) != 1 || ms[0].CutTurns != 1 || ms[0].CutReserved != turns[1].Reserved {
		t.Errorf("model figures %+v: want one cut ask, at most %d", ms, turns[1].Reserved)
	}
}

// holdCalls is the fake model whose kv.get calls never answer: each
// signals arrived and holds until its call is cut off.
type holdCalls struct {
	*fakeModel
	arrived chan struct{}
}

func (h *holdCalls) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	if req.Tool == "kv.get" {
		h.arrived <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.fakeModel.Call(ctx, req)
}

// TestAgentTurnCutCountsOnlyTheStepsLostLeases: a crash while two calls
// of turn 1 run, and no model turn is being asked (the agent waits
// without its lease), loses the calls' leases, which raise the run's
// attempt twice; no ask of turn 2 was cut off, so turn 2 reports none.
// Counting the run's attempts reported two, two reservations for one
// crash that cut nothing off.
func TestAgentTurnCutCountsOnlyTheStepsLostLeases(t *testing.T) {
	t.Parallel()
	fm := newFakeModel(askTools(use(10, 1), tc("c1", "kv.get", `{"key":"x"}`), tc("c2", "kv.get", `{"key":"y"}`)), answer("done", use(10, 1)))
	m := &holdCalls{fakeModel: fm, arrived: make(chan struct{}, 2)}
	fk := clock.NewFake(time.Now())
	st := memstore.New()
	b := setupAgentConfig(t, Config{Store: st, Tools: m, Clock: fk}, fm)
	id := b.submit(t, "research", `{"topic":"x"}`)
	for range 2 {
		select {
		case <-m.arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("turn 1's calls never both ran")
		}
	}
	b.crash(t)
	st2, err := st.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	b2 := setupAgentConfig(t, Config{Store: st2, Tools: fm, Clock: fk}, fm)
	run := b2.terminal(t, id)
	if r := resultOf(t, run); r.Answer != "done" || r.Turns != 2 {
		t.Fatalf("result %+v", r)
	}
	if run.Attempt < 3 {
		t.Fatalf("run attempt %d: the crash did not take both calls' leases", run.Attempt)
	}
	turns := b2.turns(t, id)
	if turns[0].Cut != 0 || turns[1].Cut != 0 || turns[1].CutReserved != 0 {
		t.Errorf("turns cut %d and %d (turn 2 cut reserved %d); want none: the crash cut off calls, no model turn", turns[0].Cut, turns[1].Cut, turns[1].CutReserved)
	}
}
