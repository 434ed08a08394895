package script

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

func loadAgent(t *testing.T, script string) (*flows.Module, *flows.Node) {
	t.Helper()
	m, ds := Check([]flows.File{flowtest.Src("a.star", script)}, flowtest.Catalog(t, "testdata/catalog.json"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	for _, f := range m.Flows {
		for _, n := range f.Nodes {
			if n.Kind == flows.KindAgent {
				return m, n
			}
		}
	}
	t.Fatal("no agent node")
	return nil, nil
}

func TestAgentIR(t *testing.T) {
	t.Parallel()
	m, n := loadAgent(t, `
flow(name = "r", nodes = [
    agent("research", model = "small", system = "Cite sources.",
        prompt = lambda ctx: "Research: " + ctx.input["topic"],
        tools = ["web.search", "mail.send"], flows = ["leaf"], approve = ["mail.send"],
        max_turns = 8, max_tokens = 512, output = {"type": "object"}, timeout = "10m", cost = 40),
])
flow(name = "leaf", nodes = [task("a", tool = "t.idem")])
`)
	want := flows.Node{
		ID: "research", Kind: flows.KindAgent, ModelTool: DefaultModelTool, Model: "small",
		System: &flows.CallableRef{Flow: "r", Node: "research", Param: "system"},
		Prompt: &flows.CallableRef{Flow: "r", Node: "research", Param: "prompt"},
		Tools:  []string{"web.search", "mail.send"}, Flows: []string{"leaf"}, Approve: []string{"mail.send"},
		MaxTurns: 8, MaxTokens: 512, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout: n.Timeout, Cost: 40, Pos: n.Pos,
	}
	got := *n
	got.Site = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("agent node\n got %+v\nwant %+v", got, want)
	}
	if n.Timeout.Minutes() != 10 {
		t.Errorf("timeout %v", n.Timeout)
	}
	if calls := m.Flow("r").Calls(); len(calls) != 1 || !slices.Equal(calls[0].Callees(), []string{"leaf"}) {
		t.Errorf("calls %v", calls)
	}
	if d, ok := m.Depth("r"); !ok || d != 1 {
		t.Errorf("depth %d, %v; an offered flow is a subflow call", d, ok)
	}

	data, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"kind":"agent"`, `"model_tool":"llm.chat"`, `"model":"small"`, `"tools":["web.search","mail.send"]`,
		`"flows":["leaf"]`, `"approve":["mail.send"]`, `"max_turns":8`, `"max_tokens":512`, `"output_schema":{"type":"object"}`,
		`"prompt":{"flow":"r","node":"research","param":"prompt"}`} {
		if !strings.Contains(string(data), s) {
			t.Errorf("encoding lacks %s: %s", s, data)
		}
	}

	// The prompt and system are evaluated like any callable: a
	// function is called with ctx, a constant string returned as it is.
	ev, err := NewEvaluator(m.Sources("r"))
	if err != nil {
		t.Fatal(err)
	}
	c := flows.Context{RunID: "r1", Attempt: 1, Input: map[string]any{"topic": "rivers"}}
	if got, err := ev.Call(*n.Prompt, c); err != nil || got != "Research: rivers" {
		t.Errorf("prompt = %v, %v", got, err)
	}
	if got, err := ev.Call(*n.System, c); err != nil || got != "Cite sources." {
		t.Errorf("system = %v, %v", got, err)
	}
}

func TestAgentModelToolDefaults(t *testing.T) {
	t.Parallel()
	_, n := loadAgent(t, `flow(name = "v", nodes = [agent("a", model_tool = "llm.chat", prompt = "hi", max_turns = 1)])`)
	if n.ModelTool != "llm.chat" || n.Model != "" || n.System != nil || n.MaxTokens != 0 || n.OutputSchema != nil {
		t.Errorf("model_tool alone: %+v", n)
	}
	_, n = loadAgent(t, `flow(name = "v", nodes = [agent("a", model = "large", prompt = "hi", max_turns = 1, max_tokens = 8192)])`)
	if n.ModelTool != DefaultModelTool || n.Model != "large" || n.MaxTokens != 8192 {
		t.Errorf("model alone: %+v", n)
	}
}
