package flows

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestModelToolName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 60)
	for _, tc := range []struct {
		name, model string // model "": no model name
	}{
		{"web.search", "web__search"},
		{"llm.chat", "llm__chat"},
		{"notes.put-v2", "notes__put-v2"},
		{"summarize", "summarize"},
		{"Research_2", "Research_2"},
		{"a.b.c", "a__b__c"},
		{"a..b", "a____b"},
		{long + ".abc", long + "__abc"}, // 65 characters
		{long + ".ab", long + "__ab"},   // 64: the most providers accept
		{"my__tool", ""},
		{"a_.b", ""},
		{"a._b", ""},
		{"x.y_", "x__y_"},
		{"_x.y", "_x__y"},
		{"web search", ""},
		{"wéb.search", ""},
		{"", ""},
	} {
		got, err := ModelToolName(tc.name)
		want := tc.model
		if len(want) > MaxModelToolName {
			want = ""
		}
		switch {
		case want == "" && err == nil:
			t.Errorf("ModelToolName(%q) = %q, want an error", tc.name, got)
		case want != "" && (err != nil || got != want):
			t.Errorf("ModelToolName(%q) = %q, %v; want %q", tc.name, got, err, want)
		case want != "":
			back, err := ToolNameFromModel(got)
			if err != nil || back != tc.name {
				t.Errorf("ToolNameFromModel(%q) = %q, %v; want %q", got, back, err, tc.name)
			}
		}
	}
}

func TestToolNameFromModelRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"",
		"web___search", // three underscores: no name maps there
		"a_____b",
		"web.search", // a dot is not in the providers' alphabet
		"my tool",
		strings.Repeat("a", MaxModelToolName+1),
	} {
		if name, err := ToolNameFromModel(s); err == nil {
			t.Errorf("ToolNameFromModel(%q) = %q, want an error", s, name)
		}
	}
	if name, err := ToolNameFromModel("summarize"); err != nil || name != "summarize" {
		t.Errorf("plain name: %q, %v", name, err)
	}
}

// The mapping is one-to-one on every name it accepts: no two names reach
// a model under the same name.
func TestModelToolNameIsInjective(t *testing.T) {
	t.Parallel()
	alphabet := []byte{'a', '_', '.', '-'}
	seen := map[string]string{}
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		if len(prefix) > 0 {
			name := string(prefix)
			if m, err := ModelToolName(name); err == nil {
				if prev, dup := seen[m]; dup {
					t.Fatalf("%q and %q both map to %q", prev, name, m)
				}
				seen[m] = name
				if back, err := ToolNameFromModel(m); err != nil || back != name {
					t.Fatalf("%q -> %q -> %q, %v", name, m, back, err)
				}
			}
		}
		if len(prefix) == 6 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	if len(seen) < 100 {
		t.Fatalf("only %d names mapped", len(seen))
	}
}

func loadAgent(t *testing.T, script string) (*Module, *Node) {
	t.Helper()
	m, ds := Check([]File{src("a.star", script)}, testCatalog(t))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	for _, f := range m.Flows {
		for _, n := range f.Nodes {
			if n.Kind == KindAgent {
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
	want := Node{
		ID: "research", Kind: KindAgent, ModelTool: DefaultModelTool, Model: "small",
		System: &CallableRef{Flow: "r", Node: "research", Param: "system"},
		Prompt: &CallableRef{Flow: "r", Node: "research", Param: "prompt"},
		Tools:  []string{"web.search", "mail.send"}, Flows: []string{"leaf"}, Approve: []string{"mail.send"},
		MaxTurns: 8, MaxTokens: 512, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Timeout: n.Timeout, Cost: 40, Pos: n.Pos,
	}
	got := *n
	got.site = nil
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
	c := Context{RunID: "r1", Attempt: 1, Input: map[string]any{"topic": "rivers"}}
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

func TestParseCatalogModels(t *testing.T) {
	t.Parallel()
	c, err := ParseCatalog([]byte(`{"tools": [{"name": "llm.chat", "idempotent": true, "chat": true, "description": "One model turn.",
		"models": [{"alias": "small", "max_tokens": 1024}, {"alias": "any"}]}, {"name": "a.b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := c.LookupTool("llm.chat")
	if !info.Chat || len(info.Models) != 2 || info.Description != "One model turn." {
		t.Fatalf("llm.chat = %+v", info)
	}
	if m, ok := info.Model("small"); !ok || m.MaxTokens != 1024 {
		t.Errorf("small = %+v, %v", m, ok)
	}
	if m, ok := info.Model("any"); !ok || m.MaxTokens != 0 {
		t.Errorf("any = %+v, %v", m, ok)
	}
	if _, ok := info.Model("big"); ok {
		t.Error("unknown alias found")
	}
	if info, _ := c.LookupTool("a.b"); info.Chat || info.Models != nil {
		t.Errorf("a.b = %+v", info)
	}
	for _, bad := range []string{
		`{"tools": [{"name": "a.b", "models": [{"alias": "x"}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": ""}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": "x"}, {"alias": "x"}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": "x", "max_tokens": -1}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": "x", "price": 1}]}]}`,
	} {
		if _, err := ParseCatalog([]byte(bad)); err == nil {
			t.Errorf("ParseCatalog(%s) accepted", bad)
		}
	}
}

func TestRenderAgent(t *testing.T) {
	t.Parallel()
	m, _ := loadAgent(t, `
flow(name = "g", nodes = [
    agent("research", model = "small", prompt = "go", max_turns = 8,
        tools = ["web.search", "mail.send"], approve = ["mail.send"], flows = ["leaf"], next = "done"),
    task("done", tool = "t.idem"),
])
flow(name = "leaf", nodes = [task("a", tool = "t.idem")])
`)
	f := m.Flow("g")
	mer, err := Render(f, FormatMermaid, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `n_research{{"research<br/>agent small via llm.chat ≤8 turns<br/>tools: web.search, mail.send ✋<br/>flows: leaf"}}`
	if !strings.Contains(mer, want) {
		t.Errorf("mermaid lacks %s:\n%s", want, mer)
	}
	dot, err := Render(f, FormatDot, map[string]Mark{"research": MarkWaiting})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"research" [label="research\nagent small via llm.chat ≤8 turns\ntools: web.search, mail.send ✋\nflows: leaf", shape=hexagon`,
		`"research" -> "done" [label="next"]`} {
		if !strings.Contains(dot, want) {
			t.Errorf("dot lacks %s:\n%s", want, dot)
		}
	}
}
