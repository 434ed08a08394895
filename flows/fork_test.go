package flows

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func testFlow(name string, nodes ...*Node) *Flow {
	for i, n := range nodes {
		if n.Pos.File == "" {
			n.Pos = Pos{File: name + ".star", Line: i + 1, Col: 1}
		}
	}
	f := &Flow{Name: name, Entry: nodes[0].ID, Nodes: nodes}
	f.Seal()
	return f
}

var forkTools = map[string]ToolInfo{
	"t.read":  {Name: "t.read", Effect: EffectRead},
	"t.idem":  {Name: "t.idem", Idempotent: true},
	"t.once":  {Name: "t.once"},
	"t.once2": {Name: "t.once2", Effect: EffectAtMostOnce},
	"llm":     {Name: "llm", Effect: EffectRead, Chat: true},
}

func forkLookup(fl ...*Flow) EffectLookup {
	return EffectLookup{
		Tool: func(n string) (ToolInfo, bool) { t, ok := forkTools[n]; return t, ok },
		Flow: func(n string) *Flow {
			for _, f := range fl {
				if f.Name == n {
					return f
				}
			}
			return nil
		},
	}
}

func siteKeys(ss []EffectSite) []string {
	var out []string
	for _, s := range ss {
		k := s.Flow + "." + s.Node + ":" + s.Tool
		if s.Via != "" {
			k += "<" + s.Via
		}
		out = append(out, k)
	}
	return out
}

func TestEffectSites(t *testing.T) {
	t.Parallel()
	child := testFlow("child",
		&Node{ID: "c1", Kind: KindTask, Tool: "t.read", Next: "c2"},
		&Node{ID: "c2", Kind: KindTask, Tool: "t.once2"})
	readOnly := testFlow("ro", &Node{ID: "r", Kind: KindTask, Tool: "t.read"})
	line := testFlow("line",
		&Node{ID: "a", Kind: KindTask, Tool: "t.once", Next: "b"},
		&Node{ID: "b", Kind: KindTask, Tool: "t.read", Next: "c"},
		&Node{ID: "c", Kind: KindTask, Tool: "t.idem", Next: "d"},
		&Node{ID: "d", Kind: KindTask, Tool: "t.once", Error: "e"},
		&Node{ID: "e", Kind: KindTask, Tool: "t.missing"})
	loop := testFlow("loop",
		&Node{ID: "a", Kind: KindTask, Tool: "t.once", Next: "b"},
		&Node{ID: "b", Kind: KindBranch, Then: "a", Otherwise: "c"},
		&Node{ID: "c", Kind: KindTask, Tool: "t.read"})
	mixed := testFlow("mixed",
		&Node{ID: "start", Kind: KindTask, Tool: "t.read", Next: "fan"},
		&Node{ID: "fan", Kind: KindFanout, Tool: "t.once", Next: "sub"},
		&Node{ID: "sub", Kind: KindSubflow, Flow: "child", Next: "ag"},
		&Node{ID: "ag", Kind: KindAgent, ModelTool: "llm", Tools: []string{"t.read", "t.once", "t.once2"}, Approve: []string{"t.once"}, Flows: []string{"ro", "gone"}, Next: "ffan"},
		&Node{ID: "ffan", Kind: KindFanout, Flow: "child"})
	for _, tt := range []struct {
		name string
		f    *Flow
		from string
		want []string
	}{
		{"from the start every at-most-once site, unknown tools included", line, "a", []string{"line.a:t.once", "line.d:t.once", "line.e:t.missing"}},
		{"read and idempotent tools need no leave", line, "b", []string{"line.d:t.once", "line.e:t.missing"}},
		{"the error wire is walked", line, "d", []string{"line.d:t.once", "line.e:t.missing"}},
		{"the last node alone", line, "e", []string{"line.e:t.missing"}},
		{"a loop back reaches nodes before the point", loop, "b", []string{"loop.a:t.once"}},
		{"no such node: nothing reachable", line, "zz", nil},
		{"fan-out tool, subflow walked, approved agent tools skipped, agent flows walked, unreadable flow counted",
			mixed, "start", []string{"mixed.fan:t.once", "child.c2:t.once2<mixed.sub", "mixed.ag:t.once2", "mixed.ag:flow gone<mixed.ag"}},
		{"a child flow walked once", mixed, "ffan", []string{"child.c2:t.once2<mixed.ffan"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := siteKeys(EffectSites(tt.f, tt.from, forkLookup(child, readOnly)))
			if !slices.Equal(got, tt.want) {
				t.Errorf("sites %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEffectSiteNamesItsLine(t *testing.T) {
	t.Parallel()
	f := testFlow("f", &Node{ID: "a", Kind: KindTask, Tool: "t.once", Pos: Pos{File: "f.star", Line: 7, Col: 5}})
	ss := EffectSites(f, "a", forkLookup())
	if len(ss) != 1 || !strings.HasPrefix(ss[0].String(), "f.star:7:5: f.a calls t.once") {
		t.Fatalf("sites %v", ss)
	}
}

func TestReachable(t *testing.T) {
	t.Parallel()
	f := testFlow("f",
		&Node{ID: "a", Kind: KindTask, Next: "b"},
		&Node{ID: "b", Kind: KindBranch, Then: "c", Otherwise: "d"},
		&Node{ID: "c", Kind: KindTask},
		&Node{ID: "d", Kind: KindTask, Error: "a"})
	if got := Reachable(f, "b"); !slices.Equal(got, []string{"b", "c", "d", "a"}) {
		t.Errorf("reachable %v", got)
	}
	if got := Reachable(f, "c"); !slices.Equal(got, []string{"c"}) {
		t.Errorf("reachable %v", got)
	}
}

func TestCompatible(t *testing.T) {
	t.Parallel()
	old := testFlow("f",
		&Node{ID: "a", Kind: KindTask, Tool: "t.read", Next: "b"},
		&Node{ID: "b", Kind: KindSubflow, Flow: "child", Next: "c"},
		&Node{ID: "ag", Kind: KindAgent, ModelTool: "llm", OutputSchema: json.RawMessage(`{"type": "object"}`), Next: "c"},
		&Node{ID: "c", Kind: KindTask, Tool: "t.once"})
	for _, tt := range []struct {
		name  string
		nodes []*Node
		at    string
		done  []string
		want  []string
	}{
		{"the same graph fits", old.Nodes, "c", []string{"a", "b", "ag"}, nil},
		{"args and wires may change; the point's tool may change",
			[]*Node{{ID: "a", Kind: KindTask, Tool: "t.read", Retries: 3}, {ID: "b", Kind: KindSubflow, Flow: "child"},
				{ID: "ag", Kind: KindAgent, ModelTool: "other", OutputSchema: json.RawMessage(`{"type":"object"}`)}, {ID: "c", Kind: KindTask, Tool: "t.idem"}},
			"c", []string{"a", "b", "ag"}, nil},
		{"the point is gone", old.Nodes[:3], "c", []string{"a"}, []string{"c: the new version has no node c"}},
		{"the point changed kind",
			[]*Node{old.Nodes[0], {ID: "c", Kind: KindWait}}, "c", nil, []string{"c: a task in the run's version, a wait in the new one"}},
		{"a copied node is gone, another's tool changed, a subflow's flow changed, an agent's schema changed",
			[]*Node{{ID: "a", Kind: KindTask, Tool: "t.idem"}, {ID: "b", Kind: KindSubflow, Flow: "other"},
				{ID: "ag", Kind: KindAgent, OutputSchema: json.RawMessage(`{"type":"string"}`)}, {ID: "c", Kind: KindTask, Tool: "t.once"}},
			"c", []string{"ag", "b", "a", "gone"},
			[]string{`a: its result was made by tool "t.read"; the new version calls "t.idem"`,
				`ag: its answer was checked against another output_schema than the new version declares`,
				`b: its result was made by flow "child"; the new version starts "other"`,
				"gone: the new version has no node gone"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes := make([]*Node, len(tt.nodes))
			for i, n := range tt.nodes {
				c := *n
				nodes[i] = &c
			}
			var got []string
			for _, m := range Compatible(old, testFlow("f", nodes...), tt.at, tt.done) {
				got = append(got, m.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("misfits\n %q\nwant\n %q", got, tt.want)
			}
		})
	}
}

// A parked run's compatibility, for each kind of change a deploy makes:
// an added node fits; a removed node it holds a result of, a renamed wait
// it is parked at or has open, a narrowed output schema of an agent whose
// answer it holds, and the parked node's own tool changed (its work is
// half done) do not.
func TestCompatibleParked(t *testing.T) {
	t.Parallel()
	old := testFlow("f",
		&Node{ID: "a", Kind: KindTask, Tool: "t.read", Next: "ag"},
		&Node{ID: "ag", Kind: KindAgent, ModelTool: "llm", OutputSchema: json.RawMessage(`{"type": "object"}`), Next: "hold"},
		&Node{ID: "hold", Kind: KindWait, Next: "c"},
		&Node{ID: "c", Kind: KindTask, Tool: "t.once"})
	withNodes := func(change func(ns []*Node) []*Node) *Flow {
		ns := make([]*Node, len(old.Nodes))
		for i, n := range old.Nodes {
			c := *n
			ns[i] = &c
		}
		return testFlow("f", change(ns)...)
	}
	for _, tt := range []struct {
		name  string
		new   *Flow
		at    string
		waits []string
		want  []string
	}{
		{"an added node", withNodes(func(ns []*Node) []*Node { return append(ns, &Node{ID: "d", Kind: KindTask, Tool: "t.read"}) }), "hold", []string{"hold"}, nil},
		{"a removed node", withNodes(func(ns []*Node) []*Node { return ns[1:] }), "hold", []string{"hold"}, []string{"a: the new version has no node a"}},
		{"a renamed wait", withNodes(func(ns []*Node) []*Node { ns[2].ID = "review"; return ns }), "hold", []string{"hold"},
			[]string{"hold: the run is parked at hold, which the new version does not have"}},
		{"a renamed open wait", withNodes(func(ns []*Node) []*Node { ns[2].ID = "review"; return ns }), "", []string{"hold"},
			[]string{"hold: the run has an open wait at hold, which the new version does not have"}},
		{"a narrowed schema", withNodes(func(ns []*Node) []*Node {
			ns[1].OutputSchema = json.RawMessage(`{"type": "object", "required": ["x"]}`)
			return ns
		}), "hold", []string{"hold"}, []string{"ag: its answer was checked against another output_schema than the new version declares (a migration checks the run's own answer against it)"}},
		{"the parked node's tool", withNodes(func(ns []*Node) []*Node { ns[0].Tool = "t.idem"; return ns }), "a", nil,
			[]string{`a: its result was made by tool "t.read"; the new version calls "t.idem"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			done := []string{"a", "ag"}
			if tt.at == "a" {
				done = nil
			}
			var got []string
			for _, m := range CompatibleParked(old, tt.new, tt.at, done, tt.waits) {
				got = append(got, m.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("misfits\n %q\nwant\n %q", got, tt.want)
			}
		})
	}
}
