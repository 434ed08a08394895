package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/weirhq/weir/runtime/engine/internal/traceexport"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/telemetry"
)

// tracedAgent runs a two-turn agent (a kv.get call, then the answer) on
// an engine exporting traces to memory, content captured or not, and
// returns the exported chat spans' attributes by span name, and the
// run's first turn record.
func tracedAgent(t *testing.T, capture bool) (map[string]map[string]string, *store.AgentTurn) {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	x := telemetry.NewWithExporter(mem, telemetry.Options{Sample: 1, CaptureContent: capture})
	t.Cleanup(func() { _ = x.Shutdown(context.Background()) })
	m := newFakeModel(askTools(use(10, 2), tc("c1", "kv.get", `{"key":"<secret>"}`)), answer("the value is v-<secret>", use(20, 3)))
	fk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: fk, Traces: x}, m)
	if !b.eng.services.StopNamed("traceexport") {
		t.Fatal("no trace-export service")
	}
	run := b.run(t, "research", `{"topic":"<secret>"}`)
	svc := traceexport.New(traceHost{b.eng}, b.eng.st, fk, x, TraceOutbox)
	if res := svc.RunOnce(context.Background()); res.Err != nil || res.Runs != 1 {
		t.Fatalf("export pass %+v", res)
	}
	out := map[string]map[string]string{}
	for _, s := range mem.GetSpans() {
		if !strings.HasPrefix(s.Name, "chat ") {
			continue
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		out[s.Name+" "+attrs["weir.turn"]] = attrs
	}
	return out, b.turns(t, run.ID)[0]
}

// With content capture on, each model turn's span carries what its
// request held new and the model's answer in the GenAI conventions'
// shape: turn 1 the system instructions and the user prompt, which only
// then are journaled (on turn 1's record), turn 2 the tool's result; each
// the answer with its tool calls and finish reason. Off (the default),
// no span carries any and no prompt is journaled.
func TestAgentTraceContentOnlyWhenCaptured(t *testing.T) {
	t.Parallel()
	spans, first := tracedAgent(t, true)
	t1, t2 := spans["chat small 1"], spans["chat small 2"]
	if t1 == nil || t2 == nil {
		t.Fatalf("chat spans %v", spans)
	}
	if t1["gen_ai.request.max_tokens"] != "100" {
		t.Errorf("turn 1's gen_ai.request.max_tokens = %q, want the model's 100", t1["gen_ai.request.max_tokens"])
	}
	if first.Prompt == nil || first.Prompt.User != "Research <secret>" || first.Prompt.System != "Be brief." {
		t.Fatalf("turn 1's prompt %+v", first.Prompt)
	}
	var in1, out1, in2, out2, sys []map[string]any
	for _, d := range []struct {
		attr string
		into *[]map[string]any
		m    map[string]string
	}{{"gen_ai.input.messages", &in1, t1}, {"gen_ai.output.messages", &out1, t1}, {"gen_ai.input.messages", &in2, t2},
		{"gen_ai.output.messages", &out2, t2}, {"gen_ai.system_instructions", &sys, t1}} {
		if err := json.Unmarshal([]byte(d.m[d.attr]), d.into); err != nil {
			t.Fatalf("%s %q: %v", d.attr, d.m[d.attr], err)
		}
	}
	if len(in1) != 1 || in1[0]["role"] != "user" || !strings.Contains(t1["gen_ai.input.messages"], "Research \\u003csecret\\u003e") {
		t.Errorf("turn 1's input %s", t1["gen_ai.input.messages"])
	}
	if len(sys) != 1 || sys[0]["content"] != "Be brief." {
		t.Errorf("system instructions %s", t1["gen_ai.system_instructions"])
	}
	if len(out1) != 1 || out1[0]["role"] != "assistant" || out1[0]["finish_reason"] != "tool_use" || !strings.Contains(t1["gen_ai.output.messages"], `"type":"tool_call"`) {
		t.Errorf("turn 1's output %s", t1["gen_ai.output.messages"])
	}
	if len(in2) != 1 || in2[0]["role"] != "tool" || !strings.Contains(t2["gen_ai.input.messages"], "v-\\u003csecret\\u003e") {
		t.Errorf("turn 2's input %s: want the tool's result", t2["gen_ai.input.messages"])
	}
	if len(out2) != 1 || !strings.Contains(t2["gen_ai.output.messages"], "the value is") {
		t.Errorf("turn 2's output %s", t2["gen_ai.output.messages"])
	}

	spans, first = tracedAgent(t, false)
	if first.Prompt != nil {
		t.Errorf("a prompt journaled without content capture: %+v", first.Prompt)
	}
	for name, attrs := range spans {
		for k := range attrs {
			if strings.Contains(k, "messages") || strings.Contains(k, "instructions") {
				t.Errorf("span %s carries %s without content capture", name, k)
			}
		}
	}
	if len(spans) != 2 {
		t.Errorf("chat spans %v", spans)
	}
}

// CutContent cuts on a rune boundary and says so.
func TestCutContent(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", telemetry.MaxContentBytes)
	got := telemetry.CutContent(long)
	if len(got) > telemetry.MaxContentBytes || !strings.HasSuffix(got, "…") || !json.Valid([]byte(`"`+got+`"`)) {
		t.Fatalf("cut to %d bytes, ends %q", len(got), got[len(got)-8:])
	}
	if telemetry.CutContent("short") != "short" {
		t.Fatal("a short text was cut")
	}
}
