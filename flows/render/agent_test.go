package render

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
	"github.com/weirhq/weir/flows/script"
)

func TestRenderAgent(t *testing.T) {
	t.Parallel()
	m, ds := script.Check([]flows.File{flowtest.Src("a.star", `
flow(name = "g", nodes = [
    agent("research", model = "small", prompt = "go", max_turns = 8,
        tools = ["web.search", "mail.send"], approve = ["mail.send"], flows = ["leaf"], next = "done"),
    task("done", tool = "t.idem"),
])
flow(name = "leaf", nodes = [task("a", tool = "t.idem")])
`)}, flowtest.Catalog(t, "../script/testdata/catalog.json"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
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
