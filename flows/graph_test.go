package flows

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	t.Parallel()
	mod, ds := Load([]File{{Path: "g.star", Src: []byte(`
flow(name = "g", nodes = [
    task("a", tool = "x.y", next = "b", error = "c"),
    branch("b", cond = lambda ctx: True, then = "c", otherwise = "d"),
    wait("c", next = "d"),
    task("d", tool = "x.z"),
])`)}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	f := mod.Flow("g")
	marks := map[string]Mark{"a": MarkFailed, "c": MarkWaiting, "gone": MarkVisited}
	mer, err := Render(f, FormatMermaid, marks)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"flowchart TD", `n_a["a<br/>task x.y"]`, "n_a -.->|error| n_c", "n_a -->|next| n_b",
		`n_b{"b<br/>branch"}`, "n_b -->|then| n_c", "class n_a failed", "class n_c waiting"} {
		if !strings.Contains(mer, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, mer)
		}
	}
	if strings.Contains(mer, "gone") {
		t.Errorf("a mark on a node the flow lacks was drawn:\n%s", mer)
	}
	dot, err := Render(f, FormatDot, marks)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`digraph "g"`, `"a" -> "c" [label="error", style=dashed]`, `"b" [label="b\nbranch", shape=diamond]`, `fillcolor="#ffcdd2"`} {
		if !strings.Contains(dot, want) {
			t.Errorf("dot lacks %q:\n%s", want, dot)
		}
	}
	if _, err := Render(f, "svg", nil); err == nil {
		t.Error("an unknown format was accepted")
	}
}
