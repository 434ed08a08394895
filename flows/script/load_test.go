package script

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

func TestStepLimitEndsLoops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		loader Loader
		src    string
		pos    flows.Pos
		code   flows.Code
		msg    string
	}{
		{
			name:   "nested loops, default limit",
			loader: Loader{},
			src:    "def spin():\n    n = 0\n    for i in range(10000000):\n        for j in range(10000000):\n            n += 1\n    return n\nspin()\n",
			pos:    flows.Pos{File: "spin.star", Line: 5, Col: 15},
			code:   flows.CodeScriptLimit,
			msg:    "step limit exceeded: the script ran more than 10000000 steps",
		},
		{
			name:   "top-level loop, small limit",
			loader: Loader{MaxSteps: 5000},
			src:    "n = 0\nfor i in range(4000):\n    n += i\n",
			pos:    flows.Pos{File: "spin.star", Line: 2, Col: 1},
			code:   flows.CodeScriptLimit,
			msg:    "more than 5000 steps",
		},
		{
			name:   "a range no loop could finish",
			loader: Loader{},
			src:    "for i in range(1000000 * 1000000):\n    pass\n",
			pos:    flows.Pos{File: "spin.star", Line: 1, Col: 10},
			code:   flows.CodeScript,
			msg:    "longer than the step limit",
		},
		{
			name:   "list of a huge range is refused before allocating",
			loader: Loader{},
			src:    "x = list(range(1 << 40))\n",
			pos:    flows.Pos{File: "spin.star", Line: 1, Col: 10},
			code:   flows.CodeScript,
			msg:    "longer than the step limit",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := tt.loader.Load([]flows.File{flowtest.Src("spin.star", tt.src)})
			if len(ds) != 1 || ds[0].Code != tt.code || ds[0].Pos != tt.pos || !strings.Contains(ds[0].Message, tt.msg) {
				t.Fatalf("got %q, want one %s at %s containing %q", ds, tt.code, tt.pos, tt.msg)
			}
		})
	}
}

func TestEachLoadedFileHasItsOwnStepAllowance(t *testing.T) {
	t.Parallel()
	// Each file spends about 3,000 steps: under a 4,000-step limit, but
	// not if the two shared one allowance.
	files := []flows.File{
		flowtest.Src("a.star", "load(\"b.star\", \"n\")\nm = 0\nfor i in range(300):\n    m += i\n"),
		flowtest.Src("b.star", "n = 0\nfor i in range(300):\n    n += i\n"),
	}
	if _, ds := (Loader{MaxSteps: 4000}).Load(files); len(ds) != 0 {
		t.Fatalf("got %s", ds)
	}
	if _, ds := (Loader{MaxSteps: 2000}).Load(files); !ds.Has(flows.CodeScriptLimit) || ds[0].File != "b.star" {
		t.Fatalf("a 2,000-step limit should stop b.star; got %q", ds)
	}
}

func TestLoadRefusesBadFileSets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files []flows.File
		want  string
	}{
		{"duplicate path", []flows.File{flowtest.Src("a.star", ""), flowtest.Src("./a.star", "")}, "a.star: E_DUPLICATE: file a.star is given twice"},
		{"no path", []flows.File{flowtest.Src("", "")}, "<file 1>: E_INVALID: a flow file needs a path"},
		{"too big", []flows.File{flowtest.Src("big.star", strings.Repeat("#", 101))}, "big.star: E_INVALID: file is 101 bytes, more than the limit of 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := (Loader{MaxFileBytes: 100}).Load(tt.files)
			if got := strings.TrimSpace(ds.String()); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadIsDeterministic(t *testing.T) {
	t.Parallel()
	files := flowtest.ReadFiles(t, "../../examples/research.star", "../../examples/summarize.star")
	m1 := mustLoad(t, files)
	m2, _ := Load([]flows.File{files[1], files[0]}) // order given does not matter
	for _, name := range []string{"research", "summarize"} {
		a, _ := json.Marshal(m1.Flow(name))
		b, _ := json.Marshal(m2.Flow(name))
		if string(a) != string(b) {
			t.Errorf("%s: two loads differ:\n%s\n%s", name, a, b)
		}
	}
	if m1.Flow("research").Hash == m1.Flow("summarize").Hash {
		t.Error("two flows share a version hash")
	}

	// Changing one byte of summarize changes its version, not research's.
	changed := []flows.File{files[0], {Path: files[1].Path, Src: append([]byte("# x\n"), files[1].Src...)}}
	m3, _ := Load(changed)
	if m3.Flow("summarize").Hash == m1.Flow("summarize").Hash {
		t.Error("summarize's hash did not change with its source")
	}
	if m3.Flow("research").Hash != m1.Flow("research").Hash {
		t.Error("research's hash changed though its sources did not")
	}
}

func TestSourcesAreTheDeclaringFileAndItsLoads(t *testing.T) {
	t.Parallel()
	files := []flows.File{
		flowtest.Src("flows/main.star", `load("lib/helpers.star", "make_flow")`+"\nmake_flow(\"main\")\n"),
		flowtest.Src("flows/lib/helpers.star", `load("consts.star", "TOOL")
def make_flow(name):
    flow(name = name, nodes = [task("a", tool = TOOL, args = lambda ctx: {"n": ctx.input["n"] + 1})])
`),
		flowtest.Src("flows/lib/consts.star", `TOOL = "t.idem"`),
		flowtest.Src("flows/other.star", `flow(name = "other", nodes = [task("a", tool = "t.idem")])`),
	}
	m := mustLoad(t, files)
	var paths []string
	for _, f := range m.Sources("main") {
		paths = append(paths, f.Path)
	}
	if got, want := strings.Join(paths, " "), "flows/lib/consts.star flows/lib/helpers.star flows/main.star"; got != want {
		t.Errorf("sources of main: %s, want %s", got, want)
	}
	f := m.Flow("main")
	if f.SourceHash != flows.HashSources(m.Sources("main")) {
		t.Error("SourceHash is not the hash of Sources")
	}
	// The node's position is where task() was called: in the helper.
	if got := f.Nodes[0].Pos.String(); got != "flows/lib/helpers.star:3:32" {
		t.Errorf("node position %s", got)
	}
	// The sources alone evaluate the flow's callables.
	ev, err := NewEvaluator(m.Sources("main"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ev.Call(*f.Nodes[0].Args, flows.Context{Input: map[string]any{"n": 41.0}})
	if err != nil {
		t.Fatal(err)
	}
	if got.(map[string]any)["n"] != int64(42) {
		t.Errorf("args = %v", got)
	}
}

func TestPositionsPointAtCallsAndArguments(t *testing.T) {
	t.Parallel()
	m := mustLoad(t, flowtest.ReadFiles(t, "../../examples/research.star"))
	f := m.Flow("research")
	if got := f.Pos.String(); got != "../../examples/research.star:10:1" {
		t.Errorf("flow at %s", got)
	}
	plan := f.Node("plan")
	if got := plan.Pos.String(); got != "../../examples/research.star:16:9" {
		t.Errorf("plan at %s", got)
	}
	if got := plan.ArgPos("next").String(); got != "../../examples/research.star:16:61" {
		t.Errorf("plan's next at %s", got)
	}
	if got := plan.ArgPos("no_such_param"); got != plan.Pos {
		t.Errorf("an unwritten argument is at %s, want the call's position", got)
	}
}

func TestNodeValuesExposeIDAndKind(t *testing.T) {
	t.Parallel()
	m := mustLoad(t, []flows.File{flowtest.Src("w.star", `
a = task("first", tool = "t.idem")
b = wait("second", timeout = "1h")
if a.id != "first" or b.kind != "wait":
    fail("node attributes")
flow(name = "wired", nodes = [task(a.id + "_x", tool = "t.idem", next = b.id), b])
`)})
	if got := m.Flow("wired").Nodes[0].ID; got != "first_x" {
		t.Errorf("node id %q", got)
	}
}

func TestDurationsInTheIR(t *testing.T) {
	t.Parallel()
	m := mustLoad(t, flowtest.ReadFiles(t, "../../examples/research.star"))
	f := m.Flow("research")
	search, approve := f.Node("search"), f.Node("approve")
	if search.Deadline.String() != "10m0s" || search.Grace.String() != "30s" || search.Quorum != 0.75 {
		t.Errorf("search: deadline %v grace %v quorum %v", search.Deadline, search.Grace, search.Quorum)
	}
	if approve.Timeout.Hours() != 30*24 {
		t.Errorf("approve timeout %v", approve.Timeout)
	}
	if f.MaxDepth != 4 || f.Budget != 200 || f.Entry != "plan" {
		t.Errorf("flow max_depth %d budget %d entry %q", f.MaxDepth, f.Budget, f.Entry)
	}
}

// TestQuorumTakesAnInt: quorum = 1 is quorum = 1.0, as Python takes an
// int where a float is wanted; a string is still refused, by name.
func TestQuorumTakesAnInt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		quorum string
		want   float64
		diag   string
	}{
		{"1", 1, ""},
		{"1.0", 1, ""},
		{"0.5", 0.5, ""},
		{"2", 0, "quorum = 2"},
		{`"all"`, 0, `for parameter "quorum": got string, want a number`},
	} {
		m, ds := Load([]flows.File{flowtest.Src("q.star", `flow(name = "q", nodes = [fanout("f", items = [1, 2], tool = "t.idem", width = 2, depth = 1, max_items = 2, quorum = `+tc.quorum+`)])`)})
		if tc.diag != "" {
			if len(ds) == 0 || !strings.Contains(ds.String(), tc.diag) {
				t.Errorf("quorum = %s: %v, want %q", tc.quorum, ds, tc.diag)
			}
			continue
		}
		if len(ds) > 0 {
			t.Errorf("quorum = %s: %v", tc.quorum, ds)
			continue
		}
		if got := m.Flow("q").Node("f").Quorum; got != tc.want {
			t.Errorf("quorum = %s: %v, want %v", tc.quorum, got, tc.want)
		}
	}
}
