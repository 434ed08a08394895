package main

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// TestPrintStatsShowsModels: `weir stats` shows agents' tokens in and out
// and cost per model, and no model table when no agent ran.
func TestPrintStatsShowsModels(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printStats(&b, &apitypes.Stats{Models: []apitypes.ModelStats{{Model: "llm.chat/small", Turns: 3, InputTokens: 300, OutputTokens: 30, Cost: 14}}})
	out := b.String()
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, "MODEL TURNS TOKENS IN TOKENS OUT COST llm.chat/small 3 300 30 14") {
		t.Errorf("stats output lacks the model table:\n%s", out)
	}
	if strings.Contains(out, "cut off") {
		t.Errorf("a model without cut turns shows some:\n%s", out)
	}
	b.Reset()
	printStats(&b, &apitypes.Stats{Models: []apitypes.ModelStats{{Model: "llm.chat/small", Turns: 3, Cost: 14, CutTurns: 2, CutReserved: 40}}})
	if strings.Contains(b.String(), "MODEL LIMITS") {
		t.Errorf("a model without limits shows a limits table:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "llm.chat/small: 2 asks of turns cut off by crashes before their answers were written, at most 40 more cost (their reservations)") {
		t.Errorf("stats output lacks the turns crashes cut:\n%s", b.String())
	}
	b.Reset()
	printStats(&b, &apitypes.Stats{Models: []apitypes.ModelStats{{Model: "llm.chat/small", Turns: 3, RequestsPerMinute: 60, MaxConcurrent: 4,
		InFlight: 2, StartedLastMinute: 59, Booked: 7, Waited: 12}}})
	if flat := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(flat, "MODEL LIMITS IN FLIGHT TURNS/MIN TOKENS/MIN IN LINE WAITED llm.chat/small 2/4 59/60 - 7 12") {
		t.Errorf("stats output lacks the model's use of its limits:\n%s", b.String())
	}
	b.Reset()
	printStats(&b, &apitypes.Stats{Models: []apitypes.ModelStats{{Model: "llm.chat/small", Turns: 3, RetriedTurns: 2, RetriedInputTokens: 900, RetriedOutputTokens: 12}}})
	if !strings.Contains(b.String(), "llm.chat/small: 2 failed tries of turns retried, 900 tokens in and 12 out reported for them") {
		t.Errorf("stats output lacks the retried turns' waste:\n%s", b.String())
	}
	b.Reset()
	printStats(&b, &apitypes.Stats{})
	if strings.Contains(b.String(), "MODEL") {
		t.Errorf("a model table without models:\n%s", b.String())
	}
}

// TestPrintAgent: `weir run get` shows an agent node's turns, tokens and
// cost so far.
func TestPrintAgent(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printAgent(&b, apitypes.Agent{Node: "research", Visit: 1, Turns: 3, InputTokens: 300, OutputTokens: 30, Cost: 14})
	if want := "agent:    research (visit 1): 3 turns, 300 tokens in, 30 out, cost 14\n"; b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
	b.Reset()
	printAgent(&b, apitypes.Agent{Node: "research", Visit: 1, Turns: 3, InputTokens: 300, OutputTokens: 30, Cost: 14, CutTurns: 1, CutReserved: 20})
	if want := "agent:    research (visit 1): 3 turns, 300 tokens in, 30 out, cost 14; 1 ask cut off by crashes, at most 20 more\n"; b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
	b.Reset()
	printAgent(&b, apitypes.Agent{Node: "research", Visit: 1, Turns: 3, InputTokens: 300, OutputTokens: 30, Cost: 14, RetriedTurns: 2, RetriedInputTokens: 240, RetriedOutputTokens: 3})
	if want := "agent:    research (visit 1): 3 turns, 300 tokens in, 30 out, cost 14; 2 failed turns retried, 240 tokens in and 3 out billed for them\n"; b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
}

// TestPrintStatsShowsQueueDepth: `weir stats` has a QUEUED column, each
// tool's queue depth at the last sample, as its help and the README say;
// --json carries it as queue_depth.
func TestPrintStatsShowsQueueDepth(t *testing.T) {
	t.Parallel()
	st := &apitypes.Stats{Types: []apitypes.TypeStats{{Type: "testkit.echo", QueueDepth: 7, Attempts: 3, Units: 3, Amplification: 1}}}
	var b strings.Builder
	printStats(&b, st)
	flat := strings.Join(strings.Fields(b.String()), " ")
	if !strings.Contains(flat, "TYPE QUEUED WAIT(mean)") || !strings.Contains(flat, "testkit.echo 7 0s 0s 3 3 1.00") {
		t.Errorf("stats table lacks the queue depth:\n%s", b.String())
	}
	b.Reset()
	if err := printJSON(&b, st); err != nil || !strings.Contains(b.String(), `"queue_depth": 7`) {
		t.Errorf("stats JSON lacks queue_depth (%v):\n%s", err, b.String())
	}
}

// TestPrintOwnerStats: `weir stats --owners` shows each owner's figures and
// share, and says when they are only the caller's own.
func TestPrintOwnerStats(t *testing.T) {
	t.Parallel()
	l := &apitypes.OwnerStatsList{Owners: []apitypes.OwnerStats{{Owner: "alice", Running: 3, Queued: 2, Spent: 140, Weight: 2, MaxQueued: 10}}}
	var b strings.Builder
	printOwnerStats(&b, l)
	flat := strings.Join(strings.Fields(b.String()), " ")
	if !strings.Contains(flat, "OWNER RUNNING QUEUED SPENT(1h) WEIGHT MAX_RUNNING MAX_QUEUED BUDGET_PER_HOUR alice 3 2 140 2 - 10 -") {
		t.Errorf("owners table:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "your own figures only") {
		t.Errorf("a caller's own view does not say so:\n%s", b.String())
	}
	b.Reset()
	l.All = true
	printOwnerStats(&b, l)
	if strings.Contains(b.String(), "your own figures only") {
		t.Errorf("the operator's view says it is partial:\n%s", b.String())
	}
	b.Reset()
	if err := printJSON(&b, l); err != nil || !strings.Contains(b.String(), `"spent": 140`) || !strings.Contains(b.String(), `"all": true`) {
		t.Errorf("owners JSON (%v):\n%s", err, b.String())
	}
}
