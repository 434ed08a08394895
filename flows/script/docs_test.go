package script

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

// readDoc reads docs/name.
func readDoc(t *testing.T, name string) []byte {
	t.Helper()
	doc, err := os.ReadFile("../../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// pythonBlocks returns the python code blocks of docs/name, each as the
// regexp match whose [1] is the code, and fails the test if there are
// fewer than atLeast: a doc whose fences changed would check nothing.
func pythonBlocks(t *testing.T, name string, atLeast int) [][]string {
	t.Helper()
	blocks := regexp.MustCompile("(?s)```python\n(.*?)```").FindAllStringSubmatch(string(readDoc(t, name)), -1)
	if len(blocks) < atLeast {
		t.Fatalf("found %d python blocks in docs/%s", len(blocks), name)
	}
	return blocks
}

// Every Python snippet in docs/flows.md loads: examples that do not run
// teach the wrong thing. Snippets may use plan_args and a node b without
// declaring them; snippets with load() need other files and are skipped.
// Agent snippets also pass every check against the test catalog, since
// most of what can be wrong with an agent needs the catalog to see.
func TestDocsSnippetsLoad(t *testing.T) {
	t.Parallel()
	blocks := pythonBlocks(t, "flows.md", 10)
	const prelude = "def plan_args(ctx):\n    return {}\nb = task(\"b\", tool = \"t.x\")\n"
	checked, agents := 0, 0
	for i, b := range blocks {
		code := b[1]
		if strings.Contains(code, "load(") {
			continue
		}
		// Signatures (flow(name, nodes, ...)) are documentation, not code.
		if regexp.MustCompile(`^\w+\(id|^flow\(name, nodes|^schedule\(name, flow|^on_event\(event, flow`).MatchString(code) {
			continue
		}
		checked++
		_, ds := Load([]flows.File{flowtest.Src("snippet.star", prelude+code)})
		if len(ds) > 0 {
			t.Errorf("docs/flows.md python block %d does not load:\n%s\n%s", i+1, code, ds)
		}
		if strings.Contains(code, "agent(") {
			agents++
			if _, ds := Check([]flows.File{flowtest.Src("snippet.star", code)}, flowtest.Catalog(t, "testdata/catalog.json")); len(ds) > 0 {
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
	blocks := pythonBlocks(t, "agents.md", 2)
	for i, b := range blocks {
		code := b[1]
		if strings.HasPrefix(code, "agent(") {
			code = "flow(name = \"snippet\", nodes = [\n" + code + "])\n"
		}
		if _, ds := Check([]flows.File{flowtest.Src("agents.star", code)}, flowtest.Catalog(t, "testdata/catalog.json")); len(ds) > 0 {
			t.Errorf("docs/agents.md python block %d does not pass the checks:\n%s\n%s", i+1, code, ds)
		}
	}
}

// Every Lua snippet in docs/flows.md loads; one that declares flows
// passes every check beside the flows it calls, and is the Starlark
// snippet before it in the other language: the same nodes and wires, and
// every callable answers the same ctx with the same value.
func TestDocsLuaSnippetsCheck(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "flows.md")
	block := regexp.MustCompile("(?s)```(python|lua)\n(.*?)```")
	var python string
	pythonEnd, lua, nflows := 0, 0, 0
	summarize := flowtest.ReadFiles(t, "../../examples/summarize.lua")
	for _, ix := range block.FindAllStringSubmatchIndex(string(doc), -1) {
		kind, code := string(doc[ix[2]:ix[3]]), string(doc[ix[4]:ix[5]])
		if kind == "python" {
			python, pythonEnd = code, ix[1]
			continue
		}
		lua++
		const prelude = "local function plan_args(ctx) return {} end\n"
		if _, ds := Load([]flows.File{flowtest.Src("snippet.lua", prelude+code)}); len(ds) > 0 {
			t.Errorf("docs/flows.md lua block %d does not load:\n%s\n%s", lua, code, ds)
			continue
		}
		inLua := strings.TrimSpace(string(doc[pythonEnd:ix[0]])) == "In Lua:"
		if !strings.Contains(code, "flow{") {
			if inLua && (strings.Contains(code, "schedule{") || strings.Contains(code, "on_event{")) {
				sameAsStarlark(t, code, python) // declarations of flows elsewhere
			}
			continue // nodes alone: there is no flow to check or run
		}
		nflows++
		files := []flows.File{flowtest.Src("snippet.lua", code)}
		if !strings.Contains(code, `flow{"summarize"`) {
			files = append(files, summarize...)
		}
		if _, ds := Check(files, flowtest.Catalog(t, "testdata/catalog.json")); len(ds) > 0 {
			t.Errorf("docs/flows.md lua block %d does not pass the checks:\n%s\n%s", lua, code, ds)
			continue
		}
		if inLua {
			sameAsStarlark(t, code, python)
		}
	}
	if lua < 9 || nflows < 3 {
		t.Errorf("found %d lua blocks, %d declaring flows, in docs/flows.md: every builtin has one", lua, nflows)
	}
}

// sameAsStarlark checks that the flows luaSrc declares are those
// starSrc declares: node for node, wire for wire, and each callable
// answering one ctx (which has what every snippet reads) alike.
func sameAsStarlark(t *testing.T, luaSrc, starSrc string) {
	t.Helper()
	evs := map[string]*Evaluator{}
	for _, f := range []flows.File{flowtest.Src("snippet.lua", luaSrc), flowtest.Src("snippet.star", starSrc)} {
		ev, err := NewEvaluator([]flows.File{f})
		if err != nil {
			t.Errorf("%s: %v\n%s", f.Path, err, f.Src)
			return
		}
		evs[f.Path] = ev
	}
	ctx := flows.Context{
		RunID: "run-1", Attempt: 1,
		Input:   map[string]any{"hits": []any{map[string]any{"q": "rivers"}}, "claim": "rivers are long", "topic": "rivers"},
		Results: map[string]any{"draft": map[string]any{"answer": "short"}, "research": map[string]any{"answer": "long"}},
	}
	lm, sm := evs["snippet.lua"].ls.mod, evs["snippet.star"].ls.mod
	sameDecls(t, evs["snippet.lua"], evs["snippet.star"])
	if len(lm.Flows) != len(sm.Flows) {
		t.Errorf("the lua snippet declares %d flows, the Starlark one before it %d:\n%s", len(lm.Flows), len(sm.Flows), luaSrc)
		return
	}
	for _, lf := range lm.Flows {
		sf := sm.Flow(lf.Name)
		if sf == nil {
			t.Errorf("flow %s: not in the Starlark snippet before it", lf.Name)
			continue
		}
		var lg, sg []string
		for _, g := range []struct {
			f   *flows.Flow
			out *[]string
		}{{lf, &lg}, {sf, &sg}} {
			for _, n := range g.f.Nodes {
				*g.out = append(*g.out, fmt.Sprint(n.ID, n.Kind, n.Wires()))
			}
		}
		if !reflect.DeepEqual(lg, sg) {
			t.Errorf("flow %s: lua nodes %v, Starlark %v", lf.Name, lg, sg)
		}
		refs := []flows.CallableRef{{Flow: lf.Name, Param: "output"}}
		for _, n := range lf.Nodes {
			for _, p := range paramNames {
				refs = append(refs, flows.CallableRef{Flow: lf.Name, Node: n.ID, Param: p})
			}
		}
		for _, ref := range refs {
			if evs["snippet.lua"].Has(ref) != evs["snippet.star"].Has(ref) {
				t.Errorf("%s: a callable in one language only", ref)
				continue
			}
			if !evs["snippet.lua"].Has(ref) {
				continue
			}
			lv, lerr := evs["snippet.lua"].Call(ref, ctx)
			sv, serr := evs["snippet.star"].Call(ref, ctx)
			if lerr != nil || serr != nil || !reflect.DeepEqual(lv, sv) {
				t.Errorf("%s: lua answers %#v (%v), Starlark %#v (%v)", ref, lv, lerr, sv, serr)
			}
		}
	}
}

// sameDecls checks that two evaluators' sources declare the same
// schedules and triggers, whose callables answer one tick or one event
// alike.
func sameDecls(t *testing.T, lua, star *Evaluator) {
	t.Helper()
	lm, sm := lua.ls.mod, star.ls.mod
	if len(lm.Schedules) != len(sm.Schedules) || len(lm.Triggers) != len(sm.Triggers) {
		t.Errorf("lua declares %d schedules and %d triggers, Starlark %d and %d", len(lm.Schedules), len(lm.Triggers), len(sm.Schedules), len(sm.Triggers))
		return
	}
	var calls []struct {
		ref flows.CallableRef
		arg any
	}
	for i, ls := range lm.Schedules {
		a, b := *ls, *sm.Schedules[i]
		a.Pos, a.Site, a.SourceHash, b.Pos, b.Site, b.SourceHash = flows.Pos{}, nil, "", flows.Pos{}, nil, ""
		if !reflect.DeepEqual(a, b) {
			t.Errorf("schedule %s: lua %+v, Starlark %+v", ls.Name, a, b)
		}
		if ls.InputFn != nil {
			calls = append(calls, struct {
				ref flows.CallableRef
				arg any
			}{*ls.InputFn, map[string]any{"time": "2026-12-01T09:00:00+01:00", "schedule": ls.Name}})
		}
	}
	ev := map[string]any{"name": "ticket.created", "id": "e-1", "key": "T-1", "payload": map[string]any{"title": "rivers", "priority": "high"}}
	for i, lt := range lm.Triggers {
		a, b := *lt, *sm.Triggers[i]
		a.Pos, a.Site, a.SourceHash, b.Pos, b.Site, b.SourceHash = flows.Pos{}, nil, "", flows.Pos{}, nil, ""
		if !reflect.DeepEqual(a, b) {
			t.Errorf("trigger %s: lua %+v, Starlark %+v", lt.Name, a, b)
		}
		for _, ref := range []*flows.CallableRef{lt.Input, lt.Filter} {
			if ref != nil {
				calls = append(calls, struct {
					ref flows.CallableRef
					arg any
				}{*ref, ev})
			}
		}
	}
	for _, c := range calls {
		lv, lerr := lua.Call(c.ref, flows.Context{}, c.arg)
		sv, serr := star.Call(c.ref, flows.Context{}, c.arg)
		if lerr != nil || serr != nil || !reflect.DeepEqual(lv, sv) {
			t.Errorf("%s: lua answers %#v (%v), Starlark %#v (%v)", c.ref, lv, lerr, sv, serr)
		}
	}
}
