package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/store/storecount"
	"github.com/weirhq/weir/sdk/chat"
)

// longTurns is a script of n turns that each ask for one kv.get of a key
// of their own (so the runaway guard never trips), then an answer.
func longTurns(n int) []chat.Response {
	var script []chat.Response
	for i := range n {
		script = append(script, askTools(use(10, 1), tc(fmt.Sprint("c", i), "kv.get", fmt.Sprintf(`{"key":"k%d"}`, i))))
	}
	return append(script, answer("done", use(10, 1)))
}

// readsPerTurn records the store's read count as each model turn is
// asked: what turn k read is the count at turn k+1 less the count at k
// (journaling turn k, running its call, the call's end waking the agent,
// the agent's step and the request of the next turn).
func readsPerTurn(m *fakeModel, cs *storecount.Store) func() []storecount.Count {
	var at []storecount.Count
	m.onTurn = func() { at = append(at, cs.Total()) } // under m.mu
	return func() []storecount.Count {
		m.mu.Lock()
		defer m.mu.Unlock()
		per := make([]storecount.Count, 0, len(at))
		for k := 1; k < len(at); k++ {
			per = append(per, at[k].Sub(at[k-1]))
		}
		return per
	}
}

// agentReadSlack is how many records more than turn 1 a later turn may
// read: the dispatcher's listings of the queue see a parked or a woken
// task depending on when they run.
const agentReadSlack = 6

// TestAgentReadsPerTurnFlat: a 100-turn agent on memstore reads as many
// records at its last tool turn (99) as at turn 1 (within a constant): each step reads
// the turns from the first not final, never the visit's every turn.
func TestAgentReadsPerTurnFlat(t *testing.T) {
	t.Parallel()
	m := newFakeModel(longTurns(99)...)
	cs := storecount.New(memstore.New())
	per := readsPerTurn(m, cs)
	b := setupAgentConfig(t, Config{Store: cs, Tools: m, Clock: clock.NewFake(time.Now())}, m)
	r := resultOf(t, b.run(t, "long", `{}`))
	if r.Answer != "done" || r.Turns != 100 {
		t.Fatalf("result %+v, want the answer after 100 turns", r)
	}
	reads := per()
	if len(reads) != 99 {
		t.Fatalf("%d turns counted, want 99", len(reads))
	}
	first, last := reads[0], reads[98]
	t.Logf("reads per turn: turn 1 %d reads of %d records, turn 99 %d of %d", first.Calls, first.Records, last.Calls, last.Records)
	if last.Records > first.Records+agentReadSlack {
		t.Errorf("turn 99 read %d records, turn 1 %d: a turn's reads grow with the visit", last.Records, first.Records)
	}
	// The journal is listed once, at the visit's first step.
	if n := cs.Reads()["AgentTurnList"]; n.Calls != 1 || n.Records != 0 {
		t.Errorf("agent turns listed %d times (%d records), want once, at the first step, empty", n.Calls, n.Records)
	}
	// The 100th request holds the whole conversation.
	reqs := m.asked()
	if got := len(reqs[99].Messages); got != 199 {
		t.Errorf("turn 100's request has %d messages, want the prompt and 99 answers and results", got)
	}
}

// TestAgentRecoveryReadsJournalOnce: after a crash at turn 99 of a 100-turn agent,
// the new process reads the visit's journal in one listing, then goes on
// reading only what is new; the conversation it sends is the one the
// journal holds.
func TestAgentRecoveryReadsJournalOnce(t *testing.T) {
	t.Parallel()
	m := newFakeModel(longTurns(99)...)
	asked := 0
	m.onTurn = func() {
		asked++
		if asked == 99 {
			m.gate, m.openAt = make(chan struct{}), 99 // turn 99's call holds
		}
	}
	fk := clock.NewFake(time.Now())
	b := setupAgent(t, memstore.New(), fk, m)
	id := b.submit(t, "long", `{}`)
	testutil.Eventually(t, 30*time.Second, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.together != 1 || asked != 99 {
			return fmt.Errorf("turn %d asked, %d calls running", asked, m.together)
		}
		return nil
	})
	b.crash(t)
	m.mu.Lock()
	m.gate, m.onTurn = nil, nil
	m.mu.Unlock()

	st, err := b.st.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	cs := storecount.New(st)
	b2 := setupAgentConfig(t, Config{Store: cs, Tools: m, Clock: fk}, m)
	r := resultOf(t, b2.terminal(t, id))
	if r.Answer != "done" || r.Turns != 100 {
		t.Fatalf("result %+v, want the answer after 100 turns", r)
	}
	if n := cs.Reads()["AgentTurnList"]; n.Calls != 1 || n.Records != 99 {
		t.Errorf("agent turns listed %d times (%d records), want once, the 99 journaled", n.Calls, n.Records)
	}
	reqs := m.asked()
	if len(reqs) != 100 || len(reqs[99].Messages) != 199 {
		t.Fatalf("%d turns asked, the last with %d messages; want 100, the last with the whole conversation", len(reqs), len(reqs[len(reqs)-1].Messages))
	}
	if got := reqs[99].Messages[198]; got.ToolCallID != "c98" || got.Content != `{"value":"v-k98"}` {
		t.Errorf("turn 100 was told %+v about turn 99's call", got)
	}
}
