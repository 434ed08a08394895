package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// Prices of the model "small" in the daemons' llm block (budget units per
// million tokens).
const agentInputCost, agentOutputCost = 1000, 4000

// startUntilDecision starts a run of flow with input {} and waits for it
// to ask for a decision on wait; it returns the run's id.
func (d *daemon) startUntilDecision(flow, wait string) string {
	d.t.Helper()
	res, err := d.startRun(flow, `{}`, "")
	if err != nil {
		d.t.Fatal(err)
	}
	d.waitForDecision(res.RunID, wait)
	return res.RunID
}

// waitForDecision waits, through weir run wait --until decision, for run
// id to ask for a decision on wait alone.
func (d *daemon) waitForDecision(id, wait string) {
	d.t.Helper()
	if code, out, errb := d.cli("run", "wait", id, "--until", "decision"); code != 0 || out != wait+"\n" {
		d.t.Fatalf("run wait --until decision: %d %q %s, want %s", code, out, errb, wait)
	}
}

// agentDaemon is a daemon whose llm plugin talks to srv, the scripted
// OpenAI-compatible server, through a plugin block in its config file.
func agentDaemon(t *testing.T, srv *llmtest.Server) *daemon {
	t.Helper()
	srv.StartT(t)
	d := newDaemon(t)
	cfg := filepath.Join(d.data, "weir.hcl")
	hcl := fmt.Sprintf(`plugin "llm" {
  providers = {
    local = { kind = "openai", base_url = %q }
  }
  models = {
    small = { provider = "local", model = "m-1", input_cost = %d, output_cost = %d, max_tokens = 256 }
  }
}
`, srv.OpenAIBaseURL(), agentInputCost, agentOutputCost)
	if err := os.WriteFile(cfg, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	d.serveArgs = []string{"--config", cfg}
	return d
}

// agentOutput is an agent node's result.
type agentOutput struct {
	Answer string `json:"answer"`
	Turns  int    `json:"turns"`
	Usage  struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

func agentResult(t *testing.T, v *apitypes.Run) agentOutput {
	t.Helper()
	var out agentOutput
	if v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run %s %+v", v.Phase, v.Error)
	}
	if err := json.Unmarshal(v.Output, &out); err != nil {
		t.Fatalf("output %s: %v", v.Output, err)
	}
	return out
}

func mailCall(to string) llmtest.ToolCall {
	return llmtest.ToolCall{Name: "mail__send", Arguments: json.RawMessage(fmt.Sprintf(`{"to":%q,"body":"hello"}`, to))}
}

const approverFlow = `
flow(name = "approver", nodes = [
    agent("a", model = "small", prompt = "Mail ann and bob", tools = ["mail.send"], approve = ["mail.send"], max_turns = 3),
])
`

// TestAgentApprovalThroughTheDaemon: a model turn proposes two mails; a
// script waits for the decisions with 'weir run wait --until decision',
// sees both with what each would send, is refused a decision by node
// while two are open, survives a kill -9 while they wait, rejects one
// (the model is told the reason) and approves the other, and the daemon
// is killed right after that mail went out: after the restart the mail
// is not sent again (the model is told its outcome is unknown), one mail
// in all, and the tokens billed are the tokens journaled.
func TestAgentApprovalThroughTheDaemon(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com"), mailCall("bob@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: "Mailed ann only.", Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 5}},
	)
	d := agentDaemon(t, srv)
	d.start("")
	d.register(approverFlow)
	res, err := d.startRun("approver", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	id := res.RunID
	code, out, errb := d.cli("run", "wait", id, "--until", "decision")
	if code != 0 || out != "a@1.1.0\na@1.1.1\n" {
		t.Fatalf("run wait --until decision: %d %q %s", code, out, errb)
	}
	code, out, _ = d.cli("run", "get", id)
	for _, want := range []string{"wait:     a@1.1.1 (approval) at node a", `"tool":"mail.send"`, `"to":"bob@example.com"`,
		"reject:  weir run reject " + id + " a@1.1.1 --reason TEXT"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("run get: want %q in\n%s", want, out)
		}
	}
	if code, _, errb := d.cli("run", "approve", id, "a"); code == 0 || !strings.Contains(errb, "E_AMBIGUOUS_WAIT") || !strings.Contains(errb, "a@1.1.0, a@1.1.1") {
		t.Errorf("approve by node with two open: exit %d %s", code, errb)
	}
	if d.outbox() != 0 {
		t.Fatal("a mail went out before anyone approved it")
	}

	// kill -9 while the proposals wait: they are still there, same ids.
	_ = d.cmd.Process.Kill()
	<-d.exited
	d.start("after-tool@1") // the next tool to return is the approved mail
	if code, out, errb := d.cli("run", "wait", id, "--decision", "a@1.1.1"); code != 0 || out != "a@1.1.1\n" {
		t.Fatalf("after the restart: %d %q %s", code, out, errb)
	}
	if code, out, errb := d.cli("run", "reject", id, "a@1.1.1", "--reason", "not bob"); code != 0 || !strings.Contains(out, "rejected "+id+" at a (wait a@1.1.1)") {
		t.Fatalf("reject: %d %s %s", code, out, errb)
	}
	if code, out, errb := d.cli("run", "approve", id, "a@1.1.0"); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %d %s %s", code, out, errb)
	}
	d.waitKilled()
	if n := d.outbox(); n != 1 {
		t.Fatalf("outbox has %d mails at the kill, want 1", n)
	}
	d.start("")
	v := d.waitTerminal(id)
	o := agentResult(t, v)
	if o.Answer != "Mailed ann only." || o.Turns != 2 {
		t.Errorf("result %+v", o)
	}
	if n := d.outbox(); n != 1 {
		t.Errorf("outbox has %d mails, want 1: a call is never run twice", n)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests reached the model, want 2", len(reqs))
	}
	// The approved mail went out and its answer was lost to the kill:
	// the mail plugin's probe finds it in the outbox, and the model is
	// told its result, not that the outcome is unknown.
	for _, want := range []string{"E_REJECTED", "not bob", `\"sent_at\"`} {
		if !strings.Contains(string(reqs[1].Body), want) {
			t.Errorf("the second turn does not tell the model %q: %s", want, reqs[1].Body)
		}
	}
	if strings.Contains(string(reqs[1].Body), "E_OUTCOME_UNKNOWN") {
		t.Errorf("the model was told the mail's outcome is unknown although the probe knew it: %s", reqs[1].Body)
	}
	if b := srv.Billed(); b.InputTokens != o.Usage.InputTokens || b.OutputTokens != o.Usage.OutputTokens {
		t.Errorf("billed %+v, journaled %+v: no turn was cut by these kills", b, o.Usage)
	}
	if code, _, errb := d.cli("run", "approve", id, "a@1.1.0"); code == 0 || !strings.Contains(errb, "E_ALREADY_DECIDED") {
		t.Errorf("a second decision: exit %d %s", code, errb)
	}
	d.stop()
}

const mailerFlow = `
flow(name = "mailer", nodes = [
    agent("a", model = "small", prompt = "Mail ann", tools = ["mail.send"], at_most_once = True, max_turns = 4),
])
`

// TestAgentKilledDuringTurnAndCall: the daemon is killed with SIGKILL
// three times: while the model streams a turn, after a turn was answered
// and billed but before it was journaled, and after the non-idempotent
// call that turn asked for had run but was not recorded. The tokens the
// server billed are at most the tokens journaled plus one turn per kill
// during a turn, and the mail went out once.
func TestAgentKilledDuringTurnAndCall(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	ask := func(u int64) llmtest.Step {
		return llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: u, OutputTokens: 10}}
	}
	hold := make(chan struct{})
	streaming := ask(99)
	streaming.Hold = hold
	srv := llmtest.New(streaming, ask(100), ask(101), llmtest.Step{Text: "done", Usage: &llmtest.Usage{InputTokens: 150, OutputTokens: 5}})
	d := agentDaemon(t, srv)
	d.start("")
	d.register(mailerFlow)
	res, err := d.startRun("mailer", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		if n := len(srv.Requests()); n != 1 {
			return fmt.Errorf("%d requests reached the model", n)
		}
		return nil
	})
	_ = d.cmd.Process.Kill() // mid-stream
	<-d.exited
	close(hold)

	d.startToDie("after-tool@1") // the turn asked again: its answer, before it is journaled
	if srv.Turns() != 2 || d.outbox() != 0 {
		t.Fatalf("at the second kill: %d turns answered, %d mails", srv.Turns(), d.outbox())
	}
	d.startToDie("after-tool@2") // the turn asked again, then the mail it asks for
	if srv.Turns() != 3 || d.outbox() != 1 {
		t.Fatalf("at the third kill: %d turns answered, %d mails", srv.Turns(), d.outbox())
	}
	d.start("")
	o := agentResult(t, d.waitTerminal(res.RunID))
	if o.Answer != "done" || o.Turns != 2 {
		t.Errorf("result %+v", o)
	}
	if n := d.outbox(); n != 1 {
		t.Errorf("%d mails, want 1", n)
	}
	reqs := srv.Requests()
	// The mail went out before the third kill and its answer was lost;
	// the probe finds it in the outbox, so the model is told its result.
	if len(reqs) != 4 || !strings.Contains(string(reqs[3].Body), `\"sent_at\"`) || strings.Contains(string(reqs[3].Body), "E_OUTCOME_UNKNOWN") {
		t.Fatalf("%d requests; the last must tell the model the mail's result, which the probe found", len(reqs))
	}
	// Two kills fell during a turn: at most those two turns (99/10 and
	// 100/10) were paid and not journaled.
	b := srv.Billed()
	if b.InputTokens > o.Usage.InputTokens+99+100 || b.OutputTokens > o.Usage.OutputTokens+2*10 || b.InputTokens != 450 || o.Usage.InputTokens != 251 {
		t.Errorf("billed %+v, journaled %+v: want billed ≤ journaled + the two turns cut by kills", b, o.Usage)
	}
	d.stop()
}

// TestAgentEditSurvivesKills: a proposed mail is edited through the CLI
// and the daemon is killed with SIGKILL twice between the decision and
// the call: once as the decision is durable and before its answer, once
// as the agent has queued the edited call and before it runs. Before the
// edit, the wait shows the proposal's digest and the commands bound to
// it, and an edit the tool's schema refuses or that names another digest
// is refused with the wait left open. After the restarts the mail goes
// out once, with the edited arguments, and the model is told the call
// ran with them.
func TestAgentEditSurvivesKills(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: "Mailed eve instead.", Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 5}},
	)
	d := agentDaemon(t, srv)
	d.start("after-decide")
	d.register(`
flow(name = "editing", nodes = [
    agent("a", model = "small", prompt = "Mail ann", tools = ["mail.send"], approve = ["mail.send"], max_turns = 3),
])
`)
	id := d.startUntilDecision("editing", "a@1.1.0")
	code, out, errb := d.cli("run", "get", id, "--json")
	var got struct {
		Waits []struct {
			ID      string `json:"id"`
			Digest  string `json:"digest"`
			Edit    string `json:"edit"`
			Respond string `json:"respond"`
		} `json:"waits"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.Waits) != 1 || len(got.Waits[0].Digest) != 64 {
		t.Fatalf("run get --json: %d %s %s", code, out, errb)
	}
	digest := got.Waits[0].Digest
	if w := got.Waits[0]; w.Edit != "weir run approve "+id+" a --payload ARGS --digest "+digest ||
		w.Respond != "weir run respond "+id+" a --result JSON --digest "+digest {
		t.Errorf("the commands shown: %+v", w)
	}
	code, out, _ = d.cli("run", "get", id)
	for _, want := range []string{"  digest:  " + digest + "\n", "  edit:    weir run approve " + id + " a --payload ARGS --digest " + digest + "\n",
		"  respond: weir run respond " + id + " a --result JSON --digest " + digest + "\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("run get: want %q in\n%s", want, out)
		}
	}
	edited := `{"to":"eve@example.com","body":"edited"}`
	if code, _, errb := d.cli("run", "approve", id, "a", "--payload", `{"to":"eve@example.com"}`, "--digest", digest); code == 0 || !strings.Contains(errb, "E_BAD_INPUT") || !strings.Contains(errb, "body") {
		t.Errorf("an edit without a required field: exit %d %s", code, errb)
	}
	if code, _, errb := d.cli("run", "approve", id, "a", "--payload", edited, "--digest", strings.Repeat("0", 64)); code == 0 || !strings.Contains(errb, "E_STALE_DECISION") {
		t.Errorf("an edit naming another proposal: exit %d %s", code, errb)
	}
	if code, out, errb := d.cli("run", "wait", id, "--decision", "a@1.1.0"); code != 0 || out != "a@1.1.0\n" {
		t.Fatalf("the refused decisions did not leave the wait open: %d %q %s", code, out, errb)
	}

	// The edit is durable, and the daemon dies before it answers.
	if code, _, _ := d.cli("run", "approve", id, "a", "--payload", edited, "--digest", digest); code == 0 {
		t.Error("the approval was answered although the daemon was killed before its answer")
	}
	d.waitKilled()
	// Recovery resumes the agent, which queues the edited call and dies.
	d.startToDie("agent-calls-queued")
	if n := d.outbox(); n != 0 {
		t.Fatalf("outbox has %d mails before the call ran, want 0", n)
	}
	d.start("")
	o := agentResult(t, d.waitTerminal(id))
	if o.Answer != "Mailed eve instead." || o.Turns != 2 {
		t.Errorf("result %+v", o)
	}
	b, err := os.ReadFile(filepath.Join(d.data, "plugin-state", "mail", "outbox.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var mail struct{ To, Body string }
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &mail) != nil ||
		mail.To != "eve@example.com" || mail.Body != "edited" {
		t.Fatalf("outbox %s: want one mail, with the edit", b)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests reached the model, want 2", len(reqs))
	}
	for _, want := range []string{`edited_arguments`, `eve@example.com`, `A person edited the arguments`} {
		if !strings.Contains(string(reqs[1].Body), want) {
			t.Errorf("the second turn does not tell the model %q: %s", want, reqs[1].Body)
		}
	}
	var approved []map[string]any
	for _, e := range d.events(id) {
		if e.Type == "approved" {
			approved = append(approved, e.Detail)
		}
	}
	if len(approved) != 1 || approved[0]["proposed_digest"] != digest || approved[0]["edited_digest"] == nil || approved[0]["edited_digest"] == digest {
		t.Errorf("approved events %v: want one with both digests", approved)
	}
	if code, _, errb := d.cli("run", "respond", id, "a@1.1.0", "--result", `{}`); code == 0 || !strings.Contains(errb, "E_ALREADY_DECIDED") {
		t.Errorf("a second decision: exit %d %s", code, errb)
	}
	d.stop()
}

// TestAgentRespondThroughTheDaemon: a proposed mail is answered in the
// tool's place with weir run respond. A result the tool's output schema
// refuses is E_BAD_RESULT and leaves the wait open; the response taken
// survives a SIGKILL right after it is durable, the mail never goes out,
// and the model is told the response as the call's result.
func TestAgentRespondThroughTheDaemon(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: "A person answered for the mail.", Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 5}},
	)
	d := agentDaemon(t, srv)
	d.start("after-decide")
	d.register(approverFlow)
	id := d.startUntilDecision("approver", "a@1.1.0")
	if code, _, errb := d.cli("run", "respond", id, "a", "--result", `{"id": 5}`); code == 0 || !strings.Contains(errb, "E_BAD_RESULT") || !strings.Contains(errb, "/id") {
		t.Errorf("a response the output schema refuses: exit %d %s", code, errb)
	}
	if code, out, errb := d.cli("run", "wait", id, "--decision", "a@1.1.0"); code != 0 || out != "a@1.1.0\n" {
		t.Fatalf("the refused response did not leave the wait open: %d %q %s", code, out, errb)
	}
	if code, _, _ := d.cli("run", "respond", id, "a", "--result", `{"id": "by-hand"}`); code == 0 {
		t.Error("the response was answered although the daemon was killed before its answer")
	}
	d.waitKilled()
	d.start("")
	o := agentResult(t, d.waitTerminal(id))
	if o.Answer != "A person answered for the mail." || o.Turns != 2 {
		t.Errorf("result %+v", o)
	}
	if n := d.outbox(); n != 0 {
		t.Errorf("outbox has %d mails, want none: a responded call never runs", n)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `by-hand`) {
		t.Fatalf("%d requests reached the model; the second must carry the response", len(reqs))
	}
	if code, _, errb := d.cli("run", "approve", id, "a@1.1.0"); code == 0 || !strings.Contains(errb, "E_ALREADY_DECIDED") {
		t.Errorf("a second decision: exit %d %s", code, errb)
	}
	d.stop()
}
