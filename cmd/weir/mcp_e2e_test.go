package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
)

// mcpDaemon is a daemon whose mcp plugin bridges in the demo MCP server
// over stdio, its journal in the returned file. Its plugins directory is
// its own: the manifest made at launch is cached there.
func mcpDaemon(t *testing.T, moreConfig ...string) (*daemon, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "journal")
	body := fmt.Sprintf(`servers = {
    demo = { command = [%q, "-journal", %q] }
  }
  trust_annotations = ["demo"]`, testutil.Program(t, "demo-mcp"), journal)
	return mcpDaemonWith(t, body, moreConfig...), journal
}

// mcpDaemonWith is mcpDaemon with the body of the plugin's block given.
func mcpDaemonWith(t *testing.T, body string, moreConfig ...string) *daemon {
	t.Helper()
	d := newDaemon(t)
	d.plugins = t.TempDir()
	for _, p := range []string{"testkit", "mcp", "llm"} {
		if _, err := host.Install(d.plugins, testutil.Plugin(t, p), nil); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(t.TempDir(), "weir.hcl")
	src := fmt.Sprintf(`
plugin "mcp" {
  %s
}
%s
`, body, strings.Join(moreConfig, "\n"))
	if err := os.WriteFile(conf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	d.serveArgs = []string{"--config", conf}
	return d
}

func journalLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

const mcpFlow = `
flow(
    name = "ticket",
    nodes = [
        task("look", tool = "mcp.demo-lookup-item", args = lambda ctx: {"key": ctx.input["key"]}, retries = 2, next = "note"),
        task("note", tool = "mcp.demo-append", args = lambda ctx: {"line": ctx.input["key"]},
             at_most_once = True, next = "done"),
        task("done", tool = "mcp.demo-echo", args = lambda ctx: {"text": ctx.results["note"]}),
    ],
)
`

// TestMCPToolsInAFlow: a flow calls an MCP server's tools through a real
// daemon (an idempotent one with retries, a non-idempotent one at most
// once), and registration refuses a tool the server does not offer.
func TestMCPToolsInAFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon and MCP server")
	}
	t.Parallel()
	d, journal := mcpDaemon(t)
	d.start("")
	d.register(mcpFlow)
	_, v := d.runToEnd("ticket", `{"key":"T-1"}`, "")
	if v.Phase != apitypes.PhaseCompleted || string(v.Output) != `"1 lines"` {
		t.Fatalf("run %s output %s error %+v\n%s", v.Phase, v.Output, v.Error, d.log())
	}
	if l := journalLines(t, journal); len(l) != 1 || l[0] != "T-1" {
		t.Fatalf("journal %q", l)
	}
	_, err := d.api.FlowRegister(context.Background(), apitypes.SourceFile{Path: "bad.star", Src: `
flow(name = "bad", nodes = [task("x", tool = "mcp.demo-nope", args = lambda ctx: {})])
`})
	var de *client.DiagnosticsError
	if !errors.As(err, &de) || len(de.Diagnostics) == 0 || de.Diagnostics[0].Code != "E_UNKNOWN_TOOL" {
		t.Fatalf("a flow naming a tool the server does not offer: %v", err)
	}
	// A retry on the non-idempotent MCP tool is refused like any other's.
	_, err = d.api.FlowRegister(context.Background(), apitypes.SourceFile{Path: "retry.star", Src: `
flow(name = "retry", nodes = [task("x", tool = "mcp.demo-append", args = lambda ctx: {"line": "r"}, retries = 1)])
`})
	if !errors.As(err, &de) || len(de.Diagnostics) == 0 || de.Diagnostics[0].Code != "E_AT_MOST_ONCE" {
		t.Fatalf("retries on a non-idempotent MCP tool: %v", err)
	}
	d.stop()
}

const mcpHoldFlow = `
flow(
    name = "hold",
    nodes = [
        task("note", tool = "mcp.demo-append", args = lambda ctx: {"line": "held", "hold": True},
             at_most_once = True, next = "after", error = "unknown"),
        task("after", tool = "testkit.echo", args = lambda ctx: {"sent": True}),
        task("unknown", tool = "testkit.echo", args = lambda ctx: {"unknown": True}),
    ],
)
`

// TestMCPCrashAtMostOnce kills the daemon with SIGKILL while a
// non-idempotent MCP call is in the server's hands: after the restart the
// node takes its error wire with E_OUTCOME_UNKNOWN and the call is never
// made again.
func TestMCPCrashAtMostOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a real daemon")
	}
	t.Parallel()
	d, journal := mcpDaemon(t)
	d.start("")
	d.register(mcpHoldFlow)
	res, err := d.startRun("hold", `{}`, "req-hold")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if l := journalLines(t, journal); len(l) != 1 {
			return fmt.Errorf("the MCP server has not seen the call: journal %q\n%s", l, d.log())
		}
		return nil
	})
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d.waitKilled()

	d.start("")
	v := d.waitTerminal(res.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"unknown":true`) {
		t.Fatalf("run %s output %s error %+v, want the error wire\n%s", v.Phase, v.Output, v.Error, d.log())
	}
	var code string
	for _, e := range d.events(v.ID) {
		if e.Type == "node_failed" && e.Node == "note" {
			code, _ = e.Detail["code"].(string)
		}
	}
	if code != engine.CodeOutcomeUnknown {
		t.Errorf("note failed with %q, want %s", code, engine.CodeOutcomeUnknown)
	}
	held := 0
	for _, l := range journalLines(t, journal) {
		if l == "held" {
			held++
		}
	}
	if held != 1 {
		t.Errorf("the non-idempotent MCP call ran %d times, want exactly once: %q", held, journalLines(t, journal))
	}
	d.stop()
}

// TestMCPToolInAnAgent: an agent offers an MCP server's tool to a model
// (under the name the chat contract maps it to), the model calls it, and
// its result reaches the model's next turn, through a real daemon.
func TestMCPToolInAnAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon and MCP server")
	}
	t.Parallel()
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "mcp__demo-echo", Arguments: json.RawMessage(`{"text":"egret-42"}`)}}},
		llmtest.Step{Text: "The echo said heron."},
	)
	srv.StartT(t)
	d, _ := mcpDaemon(t, fmt.Sprintf(`plugin "llm" {
  providers = {
    local = { kind = "openai", base_url = %q }
  }
  models = {
    small = { provider = "local", model = "m-1", max_tokens = 256 }
  }
}`, srv.OpenAIBaseURL()))
	d.start("")
	d.register(`
flow(name = "echoer", nodes = [
    agent("a", model = "small", prompt = "Echo a bird.", tools = ["mcp.demo-echo"], max_turns = 3),
])
`)
	_, v := d.runToEnd("echoer", `{}`, "")
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), "The echo said heron.") {
		t.Fatalf("run %s output %s error %+v\n%s", v.Phase, v.Output, v.Error, d.log())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"name":"mcp__demo-echo"`) {
		t.Fatalf("the model was not offered the MCP tool: %d requests", len(reqs))
	}
	var second struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	last := second.Messages[len(second.Messages)-1]
	if last.Role != "tool" || !strings.Contains(last.Content, "egret-42") {
		t.Fatalf("the MCP tool's result did not reach the model: %+v", last)
	}
	d.stop()
}

const mcpKilledFlow = `
flow(
    name = "once",
    nodes = [
        task("note", tool = "mcp.demo-append", args = lambda ctx: {"line": "once", "hold": True},
             at_most_once = True, next = "after", error = "unknown"),
        task("after", tool = "testkit.echo", args = lambda ctx: {"sent": True}),
        task("unknown", tool = "testkit.echo", args = lambda ctx: {"unknown": True}),
    ],
)

flow(name = "retried", nodes = [
    task("note", tool = "mcp.again-append", args = lambda ctx: {"line": "retried", "hold_once": True}, retries = 2),
])
`

// TestMCPHTTPServerKilledMidCall kills a streamable HTTP MCP server while
// it runs a call of a real daemon's run: an at-most-once call takes its
// error wire with E_OUTCOME_UNKNOWN and is not made again; an idempotent
// one (the operator lists it) is retried, with the same key, once the
// server is back.
func TestMCPHTTPServerKilledMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon and MCP server")
	}
	t.Parallel()
	journal := filepath.Join(t.TempDir(), "journal")
	srv := testutil.StartListener(t, testutil.Program(t, "demo-mcp"), "-journal", journal)
	// Two blocks for the one server: demo's append is at most once,
	// again's (the operator's word) idempotent.
	d := mcpDaemonWith(t, fmt.Sprintf(`servers = {
    demo  = { url = "http://%[1]s/mcp" }
    again = { url = "http://%[1]s/mcp" }
  }
  idempotent = ["again-append"]`, srv.Addr), `
engine {
  retry_base = "10ms"
  retry_max  = "100ms"
}`)
	d.start("")
	d.register(mcpKilledFlow)
	count := func(line string) int {
		n := 0
		for _, l := range journalLines(t, journal) {
			if l == line {
				n++
			}
		}
		return n
	}
	sent := func(line string) {
		testutil.Eventually(t, 30*time.Second, func() error {
			if count(line) != 1 {
				return fmt.Errorf("the MCP server has not seen the call: journal %q\n%s", journalLines(t, journal), d.log())
			}
			return nil
		})
	}

	once, err := d.startRun("once", `{}`, "req-once")
	if err != nil {
		t.Fatal(err)
	}
	sent("once")
	srv.Kill()
	v := d.waitTerminal(once.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"unknown":true`) {
		t.Fatalf("run %s output %s error %+v, want the error wire\n%s", v.Phase, v.Output, v.Error, d.log())
	}
	for _, e := range d.events(v.ID) {
		if e.Type == "node_failed" && e.Node == "note" && e.Detail["code"] != engine.CodeOutcomeUnknown {
			t.Errorf("note failed with %v, want %s", e.Detail["code"], engine.CodeOutcomeUnknown)
		}
	}
	srv.Restart()

	retried, err := d.startRun("retried", `{}`, "req-retried")
	if err != nil {
		t.Fatal(err)
	}
	sent("retried")
	srv.Kill()
	srv.Restart()
	v = d.waitTerminal(retried.RunID)
	if v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run %s output %s error %+v, want completed by a retry\n%s", v.Phase, v.Output, v.Error, d.log())
	}
	if n := count("retried"); n != 2 {
		t.Errorf("the idempotent call reached the server %d times, want 2 (the try the server died in, and the retry)", n)
	}
	if n := count("once"); n != 1 {
		t.Errorf("the at-most-once call reached the server %d times, want 1", n)
	}
}
