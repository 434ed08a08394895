package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/internal/modelgate"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/sdk/chat"
)

// fanOfAgents starts n one-turn agent runs on a model with limits and
// moves the fake clock by step until all have ended: the engine admits
// their turns against the limits, so the fake model (which records when
// each turn reached it) sees them spread out.
func fanOfAgents(t *testing.T, lim flows.ModelLimits, usage chat.Usage, n, workers int, step time.Duration) (*agentBundle, []string) {
	t.Helper()
	var script []chat.Response
	for range n {
		script = append(script, answer("done", usage))
	}
	m := newFakeModel(script...)
	m.limits = lim
	fk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	m.clock = fk
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: fk, Workers: workers, Tick: 100 * time.Millisecond}, m)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.submit(t, "research", fmt.Sprintf(`{"topic": "t%d"}`, i))
	}
	testutil.Eventually(t, 2*time.Minute, func() error {
		for _, id := range ids {
			r, err := b.eng.Get(context.Background(), "alice", id)
			if err != nil {
				return err
			}
			if !r.Phase.Terminal() {
				b.clock.Advance(step)
				return fmt.Errorf("run %s is %s", id, r.Phase)
			}
			if r.Phase != store.PhaseCompleted {
				t.Fatalf("run %s %s %+v", id, r.Phase, r.Error)
			}
		}
		return nil
	})
	return b, ids
}

// busiestMinute is the most turns the model saw within one minute.
func busiestMinute(at []time.Time) int {
	most := 0
	for i, a := range at {
		n := 0
		for _, b := range at[i:] {
			if b.Before(a.Add(time.Minute)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// A fan-out of agents on a model with requests_per_minute: the engine
// admits their turns so that no minute holds more than the limit (the
// provider never refuses one), the plugin is told each turn was admitted,
// and the turns that wait are journaled once each while their tasks wait
// in the queue (no rate refusal, no retry).
func TestModelTurnsWaitForRequestsPerMinute(t *testing.T) {
	t.Parallel()
	const n, rpm = 25, 10
	b, ids := fanOfAgents(t, flows.ModelLimits{RequestsPerMinute: rpm}, chat.Usage{InputTokens: 10, OutputTokens: 5}, n, 4, 2*time.Second)
	m := b.model
	m.mu.Lock()
	at, admitted := append([]time.Time(nil), m.turnsAt...), append([]bool(nil), m.admitted...)
	m.mu.Unlock()
	if len(at) != n {
		t.Fatalf("%d model turns for %d one-turn agents", len(at), n)
	}
	if most := busiestMinute(at); most > rpm {
		t.Fatalf("%d turns reached the model within a minute; requests_per_minute is %d", most, rpm)
	}
	if span := at[len(at)-1].Sub(at[0]); span < 2*time.Minute {
		t.Fatalf("%d turns at %d a minute took %v: they were not held to the limit", n, rpm, span)
	}
	for i, a := range admitted {
		if !a {
			t.Fatalf("turn %d reached the plugin without ModelAdmitted", i)
		}
	}
	waits := 0
	for _, id := range ids {
		k := len(b.events(t, id, evModelWait))
		if k > 1 {
			t.Fatalf("run %s: %d model_wait events for one turn", id, k)
		}
		waits += k
		if r := b.events(t, id, evRetry); len(r) > 0 {
			t.Fatalf("run %s retried a turn: %+v", id, r[0].Detail)
		}
	}
	if waits < n-rpm {
		t.Fatalf("%d runs waited for the model, want at least %d", waits, n-rpm)
	}
	st := b.eng.Stats()
	if len(st.Models) != 1 || st.Models[0].RequestsPerMinute != rpm || st.Models[0].Waited < int64(n-rpm) || st.Models[0].InFlight != 0 {
		t.Fatalf("stats %+v: want the model's limit and its waits", st.Models)
	}
}

// Turns over tokens_per_minute wait the same way, counted at what the
// provider reported each turn used (200 tokens here: two a minute fit
// 400); with max_concurrent = 1 as well.
func TestModelTurnsWaitForTokensPerMinute(t *testing.T) {
	t.Parallel()
	b, _ := fanOfAgents(t, flows.ModelLimits{TokensPerMinute: 400, MaxConcurrent: 1}, chat.Usage{InputTokens: 150, OutputTokens: 50}, 8, 4, 5*time.Second)
	b.model.mu.Lock()
	at := append([]time.Time(nil), b.model.turnsAt...)
	b.model.mu.Unlock()
	if most := busiestMinute(at); most > 2 {
		t.Fatalf("%d turns of 200 tokens within a minute under tokens_per_minute = 400", most)
	}
	if span := at[len(at)-1].Sub(at[0]); span < 3*time.Minute {
		t.Fatalf("8 turns of 200 tokens at 400 a minute took %v", span)
	}
}

// A provider's rate refusal with a Retry-After pauses the model: no turn
// of it is admitted before then.
func TestProviderRetryAfterPausesTheModel(t *testing.T) {
	t.Parallel()
	g := modelgate.New()
	s := &stepper{worker: &worker{e: &Engine{models: g, stats: newStats()}}, run: &store.Run{ID: "r"}, cont: &continuation{}}
	a := &agentLoop{node: &flows.Node{ID: "a", ModelTool: "llm.chat", Model: "small"}, visit: 1}
	c := &toolCall{Index: []int{1}}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s.turnRetried(a, c, callOutcome{Try: store.AttemptError{Code: CodeModelRate}, RetryAt: now.Add(30 * time.Second)})
	if _, w := g.Admit(modelKey("llm.chat", "small"), flows.ModelLimits{RequestsPerMinute: 100}, "x", 1, now); w == nil || w.Until.Before(now.Add(30*time.Second)) {
		t.Fatalf("admitted before the provider's Retry-After: %+v", w)
	}
	s.turnRetried(a, c, callOutcome{Try: store.AttemptError{Code: "E_OTHER"}, RetryAt: now.Add(time.Hour)})
	if _, w := g.Admit(modelKey("llm.chat", "small"), flows.ModelLimits{RequestsPerMinute: 100}, "x", 1, now.Add(31*time.Second)); w != nil {
		t.Fatalf("the waiting turn refused after the Retry-After: %s", w.Why)
	}
	if _, w := g.Admit(modelKey("llm.chat", "small"), flows.ModelLimits{RequestsPerMinute: 100}, "y", 1, now.Add(31*time.Second)); w != nil {
		t.Fatalf("another error's retry paused the model: %s", w.Why)
	}
}

// The tokens a failed try of a turn reported (a stream the provider cut
// off after its start says its prompt's) are journaled with the turn
// that answered, summed per agent visit and per model: waste the
// provider bills though no answer came.
func TestRetriedTurnsShowTheirWaste(t *testing.T) {
	t.Parallel()
	m := newFakeModel(answer("ok", chat.Usage{InputTokens: 10, OutputTokens: 2}))
	m.rateLimited, m.wasteIn = 2, 70
	fk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	b := setupAgent(t, memstore.New(), fk, m)
	run := b.runAdvancing(t, "research", `{"topic":"x"}`, 10*time.Millisecond)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("run %s %+v", run.Phase, run.Error)
	}
	turns := b.turns(t, run.ID)
	if len(turns) != 1 || turns[0].Retried != 2 || turns[0].RetriedUsage != (store.AgentUsage{InputTokens: 140}) {
		t.Fatalf("turns %+v: want one turn with two failed tries of 70 tokens in each", turns)
	}
	p, err := b.eng.Progress(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Agents) != 1 || p.Agents[0].RetriedTurns != 2 || p.Agents[0].RetriedInputTokens != 140 || p.Agents[0].InputTokens != 10 {
		t.Fatalf("agent view %+v: want the visit's two retried tries and their 140 tokens beside the answer's 10", p.Agents)
	}
	if retries := b.events(t, run.ID, evRetry); len(retries) != 2 || retries[0].Detail["input_tokens"] != float64(70) {
		t.Fatalf("retry events %+v: want each naming the tokens its try reported", retries)
	}
	st := b.eng.Stats()
	if len(st.Models) != 1 || st.Models[0].RetriedTurns != 2 || st.Models[0].RetriedInputTokens != 140 {
		t.Fatalf("stats %+v", st.Models)
	}
}
