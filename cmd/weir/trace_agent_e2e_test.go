package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/otlptest"
	"github.com/weirhq/weir/runtime/telemetry"
)

// TestTraceAgentTurns: an agent's run through a daemon exporting traces,
// its model the scripted OpenAI-compatible server. The collector gets a
// span per model turn under the agent's visit with the GenAI conventions'
// attributes — the provider, the alias asked for and the model that
// answered, the tokens the server reported, the finish reason — the
// turn's tool call as its event, and an execute_tool span of the call;
// no prompt or completion text.
func TestTraceAgentTurns(t *testing.T) {
	e2e(t, "starts a real daemon exporting traces")
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: "Mailed ann.", Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 5}},
	)
	sink := otlptest.New(t)
	d := agentDaemon(t, srv)
	withTelemetry(t, d, sink.URL)
	d.start("")
	d.register(`
flow(name = "mailer", nodes = [
    agent("a", model = "small", prompt = "Mail ann", tools = ["mail.send"], at_most_once = True, max_turns = 3),
])
`)
	res, v := d.runToEnd("mailer", `{}`, "")
	agentResult(t, v)
	root := telemetry.SpanID(telemetry.SpanKey{Run: res.RunID}).String()
	testutil.Eventually(t, time.Minute, func() error {
		for _, sp := range sink.Spans() {
			if sp.SpanID == root {
				return nil
			}
		}
		return fmt.Errorf("the collector has no root span of %s yet", res.RunID)
	})
	d.stop()

	var visit otlptest.Span
	var turns, calls []otlptest.Span
	for _, sp := range sink.Spans() {
		switch sp.Attrs["gen_ai.operation.name"] {
		case "invoke_agent":
			visit = sp
		case "chat":
			turns = append(turns, sp)
		case "execute_tool":
			calls = append(calls, sp)
		}
	}
	if visit.ParentID != root || visit.Attrs["weir.node"] != "a" {
		t.Fatalf("the agent's visit %+v, want a child of the root %s", visit, root)
	}
	slices.SortFunc(turns, func(a, b otlptest.Span) int {
		return strings.Compare(fmt.Sprint(a.Attrs["weir.turn"]), fmt.Sprint(b.Attrs["weir.turn"]))
	})
	if len(turns) != 2 {
		t.Fatalf("%d model-turn spans, want 2: %+v", len(turns), sink.Spans())
	}
	for i, w := range []struct {
		in, out int64
		finish  string
		tools   []string
	}{{100, 10, "tool_use", []string{"mail.send"}}, {200, 5, "end_turn", nil}} {
		sp := turns[i]
		want := map[string]any{"gen_ai.provider.name": "openai", "gen_ai.request.model": "small", "gen_ai.response.model": "m-1",
			"gen_ai.usage.input_tokens": w.in, "gen_ai.usage.output_tokens": w.out}
		for k, v := range want {
			if sp.Attrs[k] != v {
				t.Errorf("turn %d: %s = %v, want %v", i+1, k, sp.Attrs[k], v)
			}
		}
		if fr, _ := sp.Attrs["gen_ai.response.finish_reasons"].([]string); !slices.Equal(fr, []string{w.finish}) {
			t.Errorf("turn %d: finish reasons %v, want [%s]", i+1, fr, w.finish)
		}
		var tools []string
		for _, e := range sp.Events {
			if e.Name == "gen_ai.tool.call" {
				tools = append(tools, fmt.Sprint(e.Attrs["gen_ai.tool.name"]))
			}
		}
		if !slices.Equal(tools, w.tools) {
			t.Errorf("turn %d: tool-call events %v, want %v", i+1, tools, w.tools)
		}
		if sp.ParentID != visit.SpanID || !sp.Client || sp.Name != "chat small" {
			t.Errorf("turn %d: %q parent %s client %t, want \"chat small\" under the visit %s", i+1, sp.Name, sp.ParentID, sp.Client, visit.SpanID)
		}
		for k := range sp.Attrs {
			if k == "gen_ai.input.messages" || k == "gen_ai.output.messages" || k == "gen_ai.system_instructions" {
				t.Errorf("turn %d carries %s: content is off by default", i+1, k)
			}
		}
	}
	if len(calls) != 1 || calls[0].Attrs["gen_ai.tool.name"] != "mail.send" || calls[0].ParentID != visit.SpanID || !calls[0].OK {
		t.Errorf("tool-call spans %+v, want one of mail.send under the visit, ok", calls)
	}
}

// withTelemetry adds a telemetry block exporting to url to the config
// file an agentDaemon reads.
func withTelemetry(t *testing.T, d *daemon, url string) {
	t.Helper()
	cfg := filepath.Join(d.data, "weir.hcl")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n}\n", url)...)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTraceFanOut: a fan-out of three tool items through a daemon
// exporting traces. The collector gets a cohort span under the fan-out's
// visit with its close reason, and one span per item under the cohort,
// each ended ok, no span id twice.
func TestTraceFanOut(t *testing.T) {
	e2e(t, "starts a real daemon exporting traces")
	sink := otlptest.New(t)
	d := newDaemon(t)
	d.config = fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n}\n", sink.URL)
	d.start("")
	d.register(`
flow(name = "fan", nodes = [
    fanout("fan", items = lambda ctx: [1, 2, 3], tool = "testkit.echo",
           args = lambda ctx, item: {"n": item}, width = 3, depth = 1, max_items = 3, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"fan": ctx.results["fan"]}),
])
`)
	res, v := d.runToEnd("fan", `{}`, "")
	if v.Phase != "completed" {
		t.Fatalf("run %s %+v", v.Phase, v.Error)
	}
	root := telemetry.SpanID(telemetry.SpanKey{Run: res.RunID}).String()
	testutil.Eventually(t, time.Minute, func() error {
		for _, sp := range sink.Spans() {
			if sp.SpanID == root {
				return nil
			}
		}
		return fmt.Errorf("the collector has no root span of %s yet", res.RunID)
	})
	timeline := d.events(res.RunID)
	d.stop()
	spans := sink.Spans()
	var visit, cohort string
	seen := map[string]bool{}
	for _, sp := range spans {
		if seen[sp.SpanID] {
			t.Errorf("span %s (%s) exported twice", sp.SpanID, sp.Name)
		}
		seen[sp.SpanID] = true
		switch {
		case sp.ParentID == root && sp.Attrs["weir.node"] == "fan":
			visit = sp.SpanID
		case strings.HasPrefix(sp.Name, "cohort "):
			cohort = sp.SpanID
			if sp.Attrs["weir.cohort.close_reason"] != "need_met" || !sp.OK {
				t.Errorf("cohort span %+v, want closed need_met, ok", sp)
			}
		}
	}
	items := map[string]bool{}
	for _, sp := range spans {
		switch {
		case strings.HasPrefix(sp.Name, "cohort ") && sp.ParentID != visit:
			t.Errorf("the cohort span's parent %s is not the fan-out's visit %s", sp.ParentID, visit)
		case strings.HasPrefix(sp.Name, "item "):
			n, _ := sp.Attrs["weir.item"].(string)
			if items[n] || sp.ParentID != cohort || !sp.OK || sp.Attrs["weir.item.state"] != "published" {
				t.Errorf("item span %+v: want one per item, under the cohort %s, published", sp, cohort)
			}
			items[n] = true
		}
	}
	if visit == "" || cohort == "" || len(items) != 3 {
		t.Errorf("visit %q cohort %q items %v, want the visit, its cohort and three items", visit, cohort, items)
	}
	if t.Failed() {
		for _, e := range timeline {
			t.Logf("event %s %s attempt %d %v", e.Type, e.Node, e.Attempt, e.Detail)
		}
		for _, sp := range spans {
			t.Logf("span %s %s parent %s %v", sp.SpanID, sp.Name, sp.ParentID, sp.Attrs)
		}
	}
}
