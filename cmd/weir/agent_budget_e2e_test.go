package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
)

// TestAgentBudgetAsksThroughTheDaemon: an agent whose flow says
// on_budget = "ask" parks on a budget wait when its run's budget cannot
// cover its next turn; weir run get shows it with the command that raises
// the budget; weir run budget refuses a raise that is not positive, and
// --add raises it: the agent answers, having spent no more than the new
// budget.
func TestAgentBudgetAsksThroughTheDaemon(t *testing.T) {
	e2e(t, "starts a real daemon")
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: []byte(`{"q":"x"}`)}}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: "done", Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
	)
	d := agentDaemon(t, srv)
	d.start("")
	// A turn reserves 2 (its request's bytes and 256 tokens out at the
	// model's prices) and costs 1 (the usage reported): the second turn
	// does not fit a budget of 2.
	d.register(`
flow(name = "thrifty", budget = 2, on_budget = "ask", nodes = [
    agent("a", model = "small", prompt = "Echo x", tools = ["testkit.echo"], max_turns = 4),
])
`)
	res, err := d.startRun("thrifty", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	id := res.RunID
	testutil.Eventually(t, 60*time.Second, func() error {
		code, out, errb := d.cli("run", "get", id, "--json")
		var got struct {
			Waits []struct {
				ID   string `json:"id"`
				Kind string `json:"kind"`
			} `json:"waits"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			return fmt.Errorf("run get --json: %d %s %s", code, out, errb)
		}
		if len(got.Waits) != 1 || got.Waits[0].ID != "a@1.budget.1" || got.Waits[0].Kind != "budget" {
			return fmt.Errorf("waits %+v, want the budget wait", got.Waits)
		}
		return nil
	})
	code, out, _ := d.cli("run", "get", id)
	for _, want := range []string{"wait:     a@1.budget.1 (budget) at node a", `"needed":2`, "  budget:  weir run budget " + id + " --add N [--reason TEXT]"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("run get: want %q in\n%s", want, out)
		}
	}
	if code, _, errb := d.cli("run", "budget", id, "--add", "0"); code == 0 || !strings.Contains(errb, "positive") {
		t.Errorf("--add 0: exit %d %s", code, errb)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d turns asked while the run waited, want 1", n)
	}
	code, out, errb := d.cli("run", "budget", id, "--add", "5", "--reason", "worth it")
	if code != 0 || out != "budget of "+id+" raised from 2 to 7 (wait a@1.budget.1 woken)\n" {
		t.Fatalf("run budget: %d %q %s", code, out, errb)
	}
	v := d.waitTerminal(id)
	if o := agentResult(t, v); o.Answer != "done" || o.Turns != 2 {
		t.Errorf("result %+v", o)
	}
	if v.Spent > 7 {
		t.Errorf("spent %d, more than the new budget 7", v.Spent)
	}
	var added []map[string]any
	for _, e := range d.events(id) {
		if e.Type == "budget_added" {
			added = append(added, e.Detail)
		}
	}
	if len(added) != 1 || added[0]["reason"] != "worth it" || added[0]["wait"] != "a@1.budget.1" {
		t.Errorf("budget_added events %v", added)
	}
	d.stop()
}
