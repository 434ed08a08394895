package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
)

// TestAgentRunawayGuardCountsAcrossAKill: a model that asks for the same
// read again and again, through the real daemon. The daemon is killed
// with SIGKILL as the 4th identical call's end is durable; the restarted
// daemon reads the counts from the journal and parks the run on the
// runaway wait at the 5th call (not the 9th), a park that survives a
// second SIGKILL as it is durable. weir run get shows the
// diagnosis and the commands that resume it; the approval with a note
// resumes the loop, the model is sent the note, and the agent answers.
func TestAgentRunawayGuardCountsAcrossAKill(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	var steps []llmtest.Step
	for range 9 {
		steps = append(steps, llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: []byte(`{"q":"same"}`)}},
			Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}})
	}
	// The answer is played only once the note reached the model.
	steps = append(steps[:5], append([]llmtest.Step{{MatchLastUser: "Stop reading", Text: "done", Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 5}}}, steps[5:]...)...)
	srv := llmtest.New(steps...)
	d := agentDaemon(t, srv)
	d.start("agent-call-ended@4")
	d.register(`
flow(name = "rereading", nodes = [
    agent("a", model = "small", prompt = "Read q", tools = ["testkit.echo"], max_turns = 12),
])
`)
	res, err := d.startRun("rereading", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	id := res.RunID
	d.waitKilled()
	if n := len(srv.Requests()); n != 4 {
		t.Fatalf("%d turns asked before the kill, want 4", n)
	}
	// Recovery resumes the agent, which parks on its runaway wait and is
	// killed as that park is durable: the wait survives.
	d.startToDie("runaway-parked")
	d.start("")
	d.waitForDecision(id, "a@1.runaway.1")
	if n := len(srv.Requests()); n != 5 {
		t.Errorf("%d turns asked, want 5: the guard parks at the 5th identical call", n)
	}
	code, out, errb := d.cli("run", "get", id)
	for _, want := range []string{
		"wait:     a@1.runaway.1 (runaway) at node a",
		`  runaway: testkit.echo {"q":"same"} answered the same 5 times (repeat_limit 5) in turns 1 to 5; 500 input and 50 output tokens since`,
		`  approve: weir run approve ` + id + ` a [--payload '{"note":"TEXT for the model"}']`,
		"  cancel:  weir run cancel " + id,
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("run get: want %q in\n%s%s", want, out, errb)
		}
	}
	if code, _, errb := d.cli("run", "approve", id, "a", "--payload", `{"note":"Stop reading q: it does not change."}`); code != 0 {
		t.Fatalf("approve: %d %s", code, errb)
	}
	o := agentResult(t, d.waitTerminal(id))
	if o.Answer != "done" || o.Turns != 6 {
		t.Errorf("result %+v", o)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := len(srv.Requests()); n != 6 {
			return fmt.Errorf("%d requests reached the model, want 6", n)
		}
		return nil
	})
	if body := string(srv.Requests()[5].Body); !strings.Contains(body, "Stop reading q: it does not change.") {
		t.Errorf("the 6th turn was not sent the note: %s", body)
	}
	d.stop()
}
