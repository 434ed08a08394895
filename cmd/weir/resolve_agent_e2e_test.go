package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/llmtest"
)

const resolveAgentFlow = `
flow(name = "agent_asking", nodes = [
    agent("ag", model = "small", prompt = "Send hi once", tools = ["testkit.once"], at_most_once = True, max_turns = 3, on_unknown = "ask"),
])
`

// TestResolveAgentCall: the scripted model asks for testkit.once, whose
// plugin has its effect and dies before the answer; the probe cannot
// tell and the agent says on_unknown = "ask", so the call parks on its
// wait ag@1.1.0.unknown.1, which weir run get shows with its resolve
// command, the model not asked again meanwhile. weir run resolve
// --happened with the result the person saw, sent across the kills of
// resolveAcrossKills, gives the model that result as the call's: its next
// turn reads it and the run completes, the call made once, the first turn
// never asked again by the daemons that recovered the run.
func TestResolveAgentCall(t *testing.T) {
	e2e(t, "starts a real daemon and a scripted model server")
	call := llmtest.ToolCall{Name: "testkit__once", Arguments: json.RawMessage(`{"value":"hi","probe":"unknown","crash":true}`)}
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call}, Usage: &llmtest.Usage{InputTokens: 50, OutputTokens: 5}},
		llmtest.Step{Text: "Sent.", Usage: &llmtest.Usage{InputTokens: 80, OutputTokens: 2}},
	)
	d := agentDaemon(t, srv)
	d.start("")
	d.register(resolveAgentFlow)
	res, err := d.startRun("agent_asking", `{}`, "agent-ask-1")
	if err != nil {
		t.Fatal(err)
	}
	const wait = "ag@1.1.0.unknown.1"
	d.parkedOnUnknown(res.RunID, wait, "ag")
	if n := d.onceEffects(); n != 1 {
		t.Fatalf("%d effects, want the 1 whose answer was lost", n)
	}
	if n := srv.Turns(); n != 1 {
		t.Fatalf("the model was asked %d times while the call's outcome was unknown, want once", n)
	}
	d.stop()
	d.start("before-resolve")
	d.resolveAcrossKills(res.RunID, wait, "--happened", "--result", `{"value": "hi", "seen": true}`, "--reason", "in the log")
	v := d.waitTerminal(res.RunID)
	if out := agentResult(t, v); out.Answer != "Sent." || out.Turns != 2 {
		t.Fatalf("agent output %+v", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `seen`) {
		t.Fatalf("the model's second turn did not read the resolved result: %d requests, last %s", len(reqs), reqs[len(reqs)-1].Body)
	}
	if n := d.onceEffects(); n != 1 {
		t.Fatalf("%d effects after the resolve, want 1", n)
	}
	if n := countEvents(d.events(res.RunID), "resolved"); n != 1 {
		t.Errorf("%d resolved events, want 1", n)
	}
	d.stop()
}
