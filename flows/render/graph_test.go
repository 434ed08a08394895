package render

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/internal/panics"
)

func TestRender(t *testing.T) {
	t.Parallel()
	mod, ds := script.Load([]flows.File{{Path: "g.star", Src: []byte(`
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
	marks := map[string]Mark{"a": MarkFailed, "c": MarkWaiting, "d": MarkCancelled, "gone": MarkVisited}
	mer, err := Render(f, FormatMermaid, marks)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"flowchart TD", `n_a["a<br/>task x.y"]`, "n_a -.->|error| n_c", "n_a -->|next| n_b",
		`n_b{"b<br/>branch"}`, "n_b -->|then| n_c", "class n_a failed", "class n_c waiting", "class n_d cancelled", "classDef cancelled fill:#cfd8dc"} {
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
	svg, err := Render(f, FormatSVG, marks)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<svg xmlns="http://www.w3.org/2000/svg"`, `<g class="node failed" data-node="a" data-kind="task">`,
		`<g class="node waiting" data-node="c"`, `<g class="node cancelled" data-node="d"`, `fill="#cfd8dc"`, `data-from="a" data-to="c" data-label="error"`,
		`stroke-dasharray`, `fill="#ffcdd2"`, `>task x.y</text>`, `<polygon`} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q:\n%s", want, svg)
		}
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err != nil {
			if err != io.EOF {
				t.Errorf("the svg is not well-formed XML: %v", err)
			}
			break
		}
	}
	if strings.Contains(svg, "gone") {
		t.Errorf("a mark on a node the flow lacks was drawn:\n%s", svg)
	}
	if _, err := Render(f, "png", nil); err == nil {
		t.Error("an unknown format was accepted")
	}
}

// A renderer's fault on a flow it did not expect (a node missing from
// the list, as a damaged stored version could have) is Render's error in
// every format, never a panic.
func TestRenderPanicIsAnError(t *testing.T) {
	t.Parallel()
	good := &flows.Node{ID: "a", Kind: flows.KindTask, Tool: "t.x"}
	for _, f := range []*flows.Flow{
		{Name: "holes", Entry: "a", Nodes: []*flows.Node{good, nil}},
		{Name: "only_hole", Nodes: []*flows.Node{nil}},
	} {
		for _, format := range []string{FormatMermaid, FormatDot, FormatSVG} {
			_, err := Render(f, format, map[string]Mark{"a": MarkVisited})
			var pe *panics.Error
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), f.Name) {
				t.Errorf("%s in %s: %v, want a *panics.Error", f.Name, format, err)
			}
		}
	}
	if _, err := Render(&flows.Flow{Name: "fine", Entry: "a", Nodes: []*flows.Node{good}}, FormatSVG, nil); err != nil {
		t.Errorf("a flow without holes: %v", err)
	}
}
