package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

func TestProgressLine(t *testing.T) {
	t.Parallel()
	v := &apitypes.Run{Phase: apitypes.PhaseWaiting, Attempt: 2, Progress: &apitypes.Progress{Node: "ask",
		Cohorts: []apitypes.Cohort{{Node: "ask", State: "open", Items: 8, Published: 3, InFlight: 2, Mature: 3, Need: 6},
			{Node: "old", State: "closed"}},
		Tool: &apitypes.ToolProgress{Tool: "testkit.sleep", Done: 40, Total: 100}}}
	got := progressLine(v)
	want := "waiting at ask [ask open: 3 of 8 items ended, 2 in flight; 3 of 6 needed judged mature] (testkit.sleep 40/100) attempt 2"
	if got != want {
		t.Fatalf("progress line\n got %q\nwant %q", got, want)
	}
}

// TestProgressLineAgent: the agent the run is at shows its turns, tokens
// and cost so far; an agent the run has left does not.
func TestProgressLineAgent(t *testing.T) {
	t.Parallel()
	v := &apitypes.Run{Phase: apitypes.PhaseRunning, Attempt: 1, Progress: &apitypes.Progress{Node: "research",
		Agents: []apitypes.Agent{{Node: "plan", Turns: 1, InputTokens: 5, OutputTokens: 5, Cost: 1},
			{Node: "research", Visit: 1, Turns: 3, InputTokens: 300, OutputTokens: 30, Cost: 14}}}}
	want := "running at research [agent research: 3 turns, 330 tokens, cost 14] attempt 1"
	if got := progressLine(v); got != want {
		t.Fatalf("progress line\n got %q\nwant %q", got, want)
	}
}

// Off a terminal every change is its own line and nothing is rewritten.
func TestLiveLinePlain(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	l := newLiveLine(&b)
	for _, s := range []string{"queued", "queued", "running at a", "completed"} {
		l.show(s)
	}
	l.done()
	if got := b.String(); got != "  queued\n  running at a\n  completed\n" || strings.Contains(got, "\r") {
		t.Fatalf("plain output %q", got)
	}
}

// `weir run get` names the items of a fan-out whose outcome is unknown.
func TestPrintCohortUnknown(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printCohort(&b, apitypes.Cohort{Node: "send", Visit: 1, State: "closed", Items: 3, Admitted: 3, Published: 1, Stopped: 2, Unknown: []int{1, 2}})
	if got := b.String(); !strings.Contains(got, "outcome unknown (E_OUTCOME_UNKNOWN) for items 1, 2") {
		t.Errorf("printed %q", got)
	}
	b.Reset()
	printCohort(&b, apitypes.Cohort{Node: "send", Visit: 1, State: "open", Items: 3})
	if strings.Contains(b.String(), "unknown") {
		t.Errorf("printed %q for a cohort with no unknown outcome", b.String())
	}
}
