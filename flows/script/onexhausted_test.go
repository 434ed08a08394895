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
	m, ds := Load([]flows.File{{Path: "x.star", Src: []byte(src)}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
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
