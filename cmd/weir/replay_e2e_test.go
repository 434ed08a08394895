package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// refundFlow retries a flaky lookup, branches on the amount, waits for a
// person's approval of a large refund and mails it, at most once.
const refundFlow = `flow(name = "refund", nodes = [
    task("look", tool = "testkit.fail", args = {"times": 1}, retries = 2, next = "big"),
    branch("big", cond = lambda ctx: ctx.input["amount"] > 100, then = "ask", otherwise = "mail"),
    wait("ask", next = "mail"),
    task("mail", tool = "mail.send", args = lambda ctx: {"to": ctx.input["to"], "body": "refund of %d: %s" % (ctx.input["amount"], ctx.results["ask"]["note"])}, at_most_once = True),
])
`

// TestRecordedRunReplaysAsATest: a run on a real daemon (a retried call,
// a branch, a person's approval with a payload, an at-most-once mail)
// exported with weir run export replays with weir test to a pass; the
// flow with its branch condition changed diverges at that line (exit 1);
// the recording edited by hand is refused naming the file (exit 2); and
// no replay ever sends a mail: the mail plugin's outbox keeps the run's
// one.
func TestRecordedRunReplaysAsATest(t *testing.T) {
	d := servingDaemon(t)
	d.register(refundFlow)
	res, err := d.startRun("refund", `{"amount": 250, "to": "ann@example.com"}`, "")
	if err != nil {
		t.Fatal(err)
	}
	d.runIs(res.RunID, "waiting", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting })
	if _, err := d.api.RunApprove(context.Background(), res.RunID, "ask", json.RawMessage(`{"note": "ok by bo"}`)); err != nil {
		t.Fatal(err)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run ended %s: %+v\n%s", v.Phase, v.Error, d.log())
	}
	if n := d.outbox(); n != 1 {
		t.Fatalf("outbox holds %d mails after the run", n)
	}

	dir := t.TempDir()
	code, out, errb := d.cli("run", "export", res.RunID, "--redact", "/to")
	if code != 0 || !strings.HasPrefix(out, "{") || strings.Contains(out, "ann@example.com") {
		t.Fatalf("run export: exit %d\n%s%s", code, out, errb)
	}
	recording := filepath.Join(dir, "refund.weirrun")
	if err := os.WriteFile(recording, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errb := d.cli("test", recording); code != 0 || !strings.Contains(out, "PASS") || !strings.Contains(out, "4 steps") {
		t.Fatalf("test of the recording: exit %d\n%s%s", code, out, errb)
	}

	changed := filepath.Join(dir, "refund.star")
	src := strings.Replace(refundFlow, `ctx.input["amount"] > 100`, `ctx.input["amount"] > 1000`, 1)
	if err := os.WriteFile(changed, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errb = d.cli("test", "--flow", changed, recording)
	if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, changed+":3:") || !strings.Contains(out, "branch big") {
		t.Fatalf("test against the changed branch: exit %d\n%s%s", code, out, errb)
	}

	data, _ := os.ReadFile(recording)
	edited := filepath.Join(dir, "edited.weirrun")
	if err := os.WriteFile(edited, bytes.Replace(data, []byte(`ok by bo`), []byte(`ok by me`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errb = d.cli("test", "--json", edited)
	if code != 2 || !strings.Contains(out, "E_RECORDING_CHECKSUM") || !strings.Contains(out, edited) {
		t.Fatalf("test of an edited recording: exit %d\n%s%s", code, out, errb)
	}
	if n := d.outbox(); n != 1 {
		t.Errorf("outbox holds %d mails after the replays; the run's one only", n)
	}
	d.stop()
}

// TestCounterfactualThroughTheLLMPlugin: an agent run on a daemon, its
// model the llm plugin over the scripted server, is recorded; weir test
// --model asks its turns again, through the llm plugin launched from the
// plugins directory with the config's blocks, of another model, which
// proposes a mail instead of the lookup: the diff shows both calls, the
// replay stops at the mail (an at-most-once tool is never called in a
// replay) and the outbox stays empty.
func TestCounterfactualThroughTheLLMPlugin(t *testing.T) {
	e2e(t, "starts a real daemon and the llm plugin")
	srv := llmtest.NewScript(llmtest.Script{Steps: []llmtest.Step{
		{Match: `"model":"m-1"`, ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: json.RawMessage(`{"q":"weather"}`)}}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		{Match: `"model":"m-1"`, Text: "Sunny.", Usage: &llmtest.Usage{InputTokens: 150, OutputTokens: 3}},
		{Match: `"model":"m-2"`, ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 20}},
	}})
	d := agentDaemon(t, srv)
	cfg := filepath.Join(d.data, "weir.hcl")
	hcl, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	two := strings.Replace(string(hcl), `max_tokens = 256 }`, `max_tokens = 256 }
    large = { provider = "local", model = "m-2", max_tokens = 256 }`, 1)
	if err := os.WriteFile(cfg, []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start("")
	d.register(`flow(name = "look", nodes = [
    agent("a", model = "small", prompt = "What is the weather?", tools = ["testkit.echo", "mail.send"], at_most_once = True, max_turns = 3),
])
`)
	res, err := d.startRun("look", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run ended %s %+v\n%s", v.Phase, v.Error, d.log())
	}
	code, out, errb := d.cli("run", "export", res.RunID)
	if code != 0 {
		t.Fatalf("run export: exit %d %s", code, errb)
	}
	recording := filepath.Join(t.TempDir(), "look.weirrun")
	if err := os.WriteFile(recording, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	// The replay's default wall-time bound (a minute) is a user's; this
	// one launches the llm plugin on a machine make test loads fully.
	code, out, errb = d.cli("--plugins", d.plugins, "test", "--timeout", "10m", "--model", "large", "--config", cfg, recording)
	for _, want := range []string{"FAIL", "a@1 turn 1: differs", "recorded: testkit.echo", "replayed: mail.send", "never called in a replay"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("counterfactual: exit %d, want %q in\n%s%s", code, want, out, errb)
		}
	}
	if n := d.outbox(); n != 0 {
		t.Errorf("outbox holds %d mails: a replay sent one", n)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("the model server got %d requests: the run's two and the counterfactual's one", n)
	}
	d.stop()
}
