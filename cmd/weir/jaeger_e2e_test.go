package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/jaegertest"
	"github.com/weirhq/weir/runtime/telemetry"
)

// TestJaegerTraceAcrossKill exports to a real Jaeger v2 (its OTLP/HTTP
// receiver, in-memory storage): a run of an agent and a task is killed
// with SIGKILL right after the model's first answer, before the turn was
// journaled, and the daemon restarted; the trace Jaeger serves through
// its query API is the journal's: one root, every span's parent in the
// trace, no span id twice, one visit span per journaled visit end, one
// span interrupted by restart (the agent's visit the kill cut), one
// model-turn span per journaled turn with the GenAI attributes, and the
// mail call the second turn asked for. Needs WEIR_JAEGER (make
// test-jaeger); skipped otherwise.
func TestJaegerTraceAcrossKill(t *testing.T) {
	bin := jaegertest.Binary(t)
	e2e(t, "starts Jaeger and real daemons")
	j := jaegertest.Start(t, bin)
	mail := llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}}
	srv := llmtest.New(mail, mail, llmtest.Step{Text: "Mailed ann.", Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 5}})
	d := agentDaemon(t, srv)
	withTelemetry(t, d, j.OTLP)
	d.start("")
	d.register(`
flow(name = "mailer", nodes = [
    agent("a", model = "small", prompt = "Mail ann", tools = ["mail.send"], at_most_once = True, max_turns = 3, next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"done": True}),
])
`)
	d.stop()

	d.start("after-tool@1") // the model's first answer, before the turn is journaled
	res, err := d.startRun("mailer", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	d.waitKilled()
	d.start("")
	if v := d.waitTerminal(res.RunID); v.Phase != "completed" {
		t.Fatalf("run %s %+v", v.Phase, v.Error)
	}
	traceID := telemetry.TraceID(res.RunID).String()
	root := telemetry.SpanID(telemetry.SpanKey{Run: res.RunID}).String()
	var spans []jaegertest.Span
	testutil.Eventually(t, 2*time.Minute, func() error {
		var err error
		spans, err = j.Trace(context.Background(), traceID)
		if err != nil {
			return err
		}
		for _, sp := range spans {
			if sp.SpanID == root {
				return nil
			}
		}
		return fmt.Errorf("Jaeger has %d spans of the trace, not its root yet", len(spans))
	})
	timeline := d.events(res.RunID)
	d.stop()
	// Read again once the daemon stopped: all it exported is in Jaeger,
	// a second export of the run too if there had been one.
	spans, err = j.Trace(context.Background(), traceID)
	if err != nil {
		t.Fatal(err)
	}
	ends, turns := map[string]int{}, 0
	tokens := map[string][2]float64{} // journaled turn → its input and output tokens
	for _, e := range timeline {
		switch e.Type {
		case "node_completed", "node_failed":
			ends[e.Node]++
		case "agent_turn":
			turns++
			in, _ := e.Detail["input_tokens"].(float64)
			out, _ := e.Detail["output_tokens"].(float64)
			tokens[fmt.Sprint(e.Detail["turn"])] = [2]float64{in, out}
		}
	}
	ids := map[string]bool{}
	for _, sp := range spans {
		if ids[sp.SpanID] {
			t.Errorf("span %s (%s) is in Jaeger twice", sp.SpanID, sp.OperationName)
		}
		ids[sp.SpanID] = true
	}
	roots, visits, interrupted, chats, calls := 0, map[string]int{}, []string{}, 0, 0
	for _, sp := range spans {
		switch p := sp.Parent(); {
		case p == "":
			roots++
			if sp.SpanID != root {
				t.Errorf("a root span %s (%s) that is not the run's", sp.SpanID, sp.OperationName)
			}
		case !ids[p]:
			t.Errorf("span %s (%s) has parent %s, not in the trace", sp.SpanID, sp.OperationName, p)
		}
		node, _ := sp.Tag("weir.node").(string)
		switch {
		case sp.Tag("gen_ai.operation.name") == "chat":
			chats++
			for k, v := range map[string]any{"gen_ai.provider.name": "openai", "gen_ai.request.model": "small", "gen_ai.response.model": "m-1",
				"span.kind": "client"} {
				if sp.Tag(k) != v {
					t.Errorf("turn span %s: %s = %v, want %v", sp.OperationName, k, sp.Tag(k), v)
				}
			}
			turn, _ := sp.Tag("weir.turn").(string)
			want, ok := tokens[turn]
			in, _ := sp.Tag("gen_ai.usage.input_tokens").(float64)
			out, _ := sp.Tag("gen_ai.usage.output_tokens").(float64)
			if !ok || in != want[0] || out != want[1] {
				t.Errorf("turn span %s (turn %q): tokens %v/%v, want the journaled turn's %v", sp.OperationName, turn, in, out, want)
			}
		case sp.Tag("gen_ai.operation.name") == "execute_tool":
			calls++
		case node == "" || sp.Parent() != root:
		case sp.Tag("weir.interrupted") == true:
			interrupted = append(interrupted, node)
			if sp.Tag("otel.status_code") != "ERROR" || sp.Tag("otel.status_description") != telemetry.Interrupted {
				t.Errorf("interrupted span of %s: status %v %v", node, sp.Tag("otel.status_code"), sp.Tag("otel.status_description"))
			}
		default:
			visits[node]++
		}
	}
	if roots != 1 {
		t.Errorf("%d root spans, want the run's alone", roots)
	}
	if len(interrupted) != 1 || interrupted[0] != "a" {
		t.Errorf("interrupted spans of %v, want one of the agent a", interrupted)
	}
	if fmt.Sprint(visits) != fmt.Sprint(ends) {
		t.Errorf("visit spans by node %v, want one per journaled end %v", visits, ends)
	}
	if chats != turns || turns != 2 || calls != 1 {
		t.Errorf("%d model-turn spans for %d journaled turns (want 2), %d tool-call spans (want 1)", chats, turns, calls)
	}
	// What a person does from the docs: search the service for the run's
	// id; the trace found is the run's.
	found, err := j.Find(context.Background(), "weir", "weir.run_id", res.RunID)
	if err != nil || len(found) != len(spans) || found[0].TraceID != traceID {
		t.Errorf("searching service weir for weir.run_id=%s: %d spans (want the trace's %d): %v", res.RunID, len(found), len(spans), err)
	}
	if t.Failed() {
		for _, e := range timeline {
			t.Logf("event %s %s attempt %d %v", e.Type, e.Node, e.Attempt, e.Detail)
		}
		for _, sp := range spans {
			t.Logf("span %s %s parent %s %+v", sp.SpanID, sp.OperationName, sp.Parent(), sp.Tags)
		}
		t.Logf("jaeger: %s", j.Log())
	}
}
