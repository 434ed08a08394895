package script

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
)

// on_exhausted reaches the IR: a task's own value wins over its flow's
// default, and a node shared by two flows takes each flow's default.
func TestOnExhaustedIR(t *testing.T) {
	t.Parallel()
	src := `shared = task("s", tool = "t.idem")
flow(name = "parks", on_exhausted = "park", nodes = [
    task("a", tool = "t.idem", next = "b"),
    task("b", tool = "t.idem", on_exhausted = "fail", next = "s"),
    shared,
])
flow(name = "plain", nodes = [
    task("a", tool = "t.idem", on_exhausted = "park", next = "s"),
    shared,
])
`
	m := mustLoad(t, []flows.File{{Path: "x.star", Src: []byte(src)}})
	want := map[string]string{"parks.a": "park", "parks.b": "fail", "parks.s": "park", "plain.a": "park", "plain.s": ""}
	for _, f := range m.Flows {
		for _, n := range f.Nodes {
			if got := n.OnExhausted; got != want[f.Name+"."+n.ID] {
				t.Errorf("%s.%s: on_exhausted %q, want %q", f.Name, n.ID, got, want[f.Name+"."+n.ID])
			}
		}
	}
	if !m.Flows[0].Node("a").Parks() || m.Flows[0].Node("b").Parks() {
		t.Error("Parks disagrees with on_exhausted")
	}
}

// A misspelt on_exhausted keyword stops the script with the parameter
// it likely meant.
func TestOnExhaustedKeywordSuggested(t *testing.T) {
	t.Parallel()
	_, ds := Load([]flows.File{{Path: "x.star", Src: []byte(`flow(name = "f", nodes = [task("a", tool = "t.idem", on_exhaust = "park")])`)}})
	if len(ds) != 1 || !strings.Contains(ds[0].String(), "did you mean on_exhausted?") {
		t.Fatalf("got %v, want a suggestion of on_exhausted", ds)
	}
}

// A fanout of a tool takes its own on_exhausted (a flow's default is its
// tasks'); a fanout of child runs refuses "park", and a misspelling is
// refused.
func TestOnExhaustedFanout(t *testing.T) {
	t.Parallel()
	src := `flow(name = "parks", on_exhausted = "park", nodes = [
    fanout("a", items = [1], tool = "t.idem", width = 1, depth = 1, max_items = 1, on_exhausted = "park", next = "b"),
    fanout("b", items = [1], tool = "t.idem", width = 1, depth = 1, max_items = 1),
])
`
	m := mustLoad(t, []flows.File{{Path: "x.star", Src: []byte(src)}})
	if f := m.Flows[0]; !f.Node("a").Parks() || f.Node("b").OnExhausted != "" {
		t.Errorf("a %q, b %q: want park and the flow's default not taken", f.Node("a").OnExhausted, f.Node("b").OnExhausted)
	}
	for _, tt := range []struct{ node, want string }{
		{`fanout("a", items = [1], flow = "c", width = 1, depth = 1, max_items = 1, on_exhausted = "park")`, `on_exhausted = "park" applies to tool calls`},
		{`fanout("a", items = [1], tool = "t.idem", width = 1, depth = 1, max_items = 1, on_exhausted = "prak")`, `on_exhausted = "prak", want "fail"`},
	} {
		src := `flow(name = "f", nodes = [` + tt.node + `])
flow(name = "c", nodes = [task("x", tool = "t.idem")])
`
		_, ds := Load([]flows.File{{Path: "x.star", Src: []byte(src)}})
		if len(ds) != 1 || !strings.Contains(ds[0].String(), tt.want) {
			t.Errorf("%s: got %v, want one diagnostic saying %s", tt.node, ds, tt.want)
		}
	}
}
