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
// --add raises it: the agent goes on, and parks again on the next wait
// when the raise covered one turn only. The second raise is durable when
// the daemon is killed with SIGKILL, before it answers: after the restart
// the budget was raised once, and the agent answers, having spent no
// more than the raised budget.
func TestAgentBudgetAsksThroughTheDaemon(t *testing.T) {
	e2e(t, "starts a real daemon")
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: []byte(`{"q":"x"}`)}}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: []byte(`{"q":"y"}`)}}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: "done", Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
	)
	d := agentDaemon(t, srv)
	d.start("after-budget-add@2")
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
				ID     string `json:"id"`
				Kind   string `json:"kind"`
				Budget string `json:"budget"`
			} `json:"waits"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			return fmt.Errorf("run get --json: %d %s %s", code, out, errb)
		}
		if len(got.Waits) != 1 || got.Waits[0].ID != "a@1.budget.1" || got.Waits[0].Kind != "budget" || got.Waits[0].Budget != "weir run budget "+id+" --add N [--reason TEXT]" {
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
	code, out, errb := d.cli("run", "budget", id, "--add", "1", "--reason", "worth it")
	if code != 0 || out != "budget of "+id+" raised from 2 to 3 (wait a@1.budget.1 woken)\n" {
		t.Fatalf("run budget: %d %q %s", code, out, errb)
	}
	// 3 covers the second turn (2 of it left), not the third.
	testutil.Eventually(t, 60*time.Second, func() error {
		if code, out, _ := d.cli("run", "get", id); code != 0 || !strings.Contains(out, "wait:     a@1.budget.2 (budget)") {
			return fmt.Errorf("run get: %s", out)
		}
		return nil
	})
	if code, _, _ := d.cli("run", "budget", id, "--add", "5"); code == 0 {
		t.Error("the raise was answered although the daemon was killed before its answer")
	}
	d.waitKilled()
	d.start("")
	v := d.waitTerminal(id)
	if o := agentResult(t, v); o.Answer != "done" || o.Turns != 3 {
		t.Errorf("result %+v", o)
	}
	if v.Budget != 8 || v.Spent > 8 || len(srv.Requests()) != 3 {
		t.Errorf("spent %d in %d turns, want a budget raised once to 8, at most that spent, in 3 turns (budget %d)", v.Spent, len(srv.Requests()), v.Budget)
	}
	var added []map[string]any
	for _, e := range d.events(id) {
		if e.Type == "budget_added" {
			added = append(added, e.Detail)
		}
	}
	if len(added) != 2 || added[0]["reason"] != "worth it" || added[0]["wait"] != "a@1.budget.1" || added[1]["budget"] != float64(8) {
		t.Errorf("budget_added events %v, want the two raises, once each", added)
	}
	d.stop()
}
