package flows

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every Python snippet in docs/flows.md loads: examples that do not run
// teach the wrong thing. Snippets may use plan_args and a node b without
// declaring them; snippets with load() need other files and are skipped.
// Agent snippets also pass every check against the test catalog, since
// most of what can be wrong with an agent needs the catalog to see.
func TestDocsSnippetsLoad(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/flows.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```python\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 10 {
		t.Fatalf("found %d python blocks in docs/flows.md", len(blocks))
	}
	const prelude = "def plan_args(ctx):\n    return {}\nb = task(\"b\", tool = \"t.x\")\n"
	checked, agents := 0, 0
	for i, b := range blocks {
		code := b[1]
		if strings.Contains(code, "load(") {
			continue
		}
		// Signatures (flow(name, nodes, ...)) are documentation, not code.
		if regexp.MustCompile(`^\w+\(id|^flow\(name, nodes`).MatchString(code) {
			continue
		}
		checked++
		_, ds := Load([]File{src("snippet.star", prelude+code)})
		if len(ds) > 0 {
			t.Errorf("docs/flows.md python block %d does not load:\n%s\n%s", i+1, code, ds)
		}
		if strings.Contains(code, "agent(") {
			agents++
			if _, ds := Check([]File{src("snippet.star", code)}, testCatalog(t)); len(ds) > 0 {
				t.Errorf("docs/flows.md python block %d does not pass the checks:\n%s\n%s", i+1, code, ds)
			}
		}
	}
	if agents == 0 {
		t.Error("no agent snippet was checked")
	}
	if checked < 8 {
		t.Errorf("only %d python blocks were checked", checked)
	}
}

// Every Python snippet in docs/agents.md passes every check against the
// test catalog; a lone agent(...) is checked as the only node of a flow.
func TestAgentsDocSnippetsCheck(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```python\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d python blocks in docs/agents.md", len(blocks))
	}
	for i, b := range blocks {
		code := b[1]
		if strings.HasPrefix(code, "agent(") {
			code = "flow(name = \"snippet\", nodes = [\n" + code + "])\n"
		}
		if _, ds := Check([]File{src("agents.star", code)}, testCatalog(t)); len(ds) > 0 {
			t.Errorf("docs/agents.md python block %d does not pass the checks:\n%s\n%s", i+1, code, ds)
		}
	}
}

// Every Lua snippet in docs/flows.md loads, and passes every check beside
// the flows it calls.
func TestDocsLuaSnippetsCheck(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/flows.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```lua\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) == 0 {
		t.Fatal("no lua blocks in docs/flows.md")
	}
	summarize := readStar(t, "../examples/summarize.lua")
	for i, b := range blocks {
		files := append([]File{src("snippet.lua", b[1])}, summarize...)
		if _, ds := Check(files, testCatalog(t)); len(ds) > 0 {
			t.Errorf("docs/flows.md lua block %d does not pass the checks:\n%s\n%s", i+1, b[1], ds)
		}
	}
}
