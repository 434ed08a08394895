package flowgen_test

import (
	"encoding/json"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/internal/flowgen"
)

// The generated flows pass every check in both languages and are, node
// for node, the same graph; the at-most-once nodes are there only when
// an at-most-once tool is given.
func TestGeneratedFlowsCheckAndAgree(t *testing.T) {
	t.Parallel()
	cat := flows.MapCatalog{"t": {Name: "t", Idempotent: true}, "m": {Name: "m"}}
	for _, tools := range []flowgen.Tools{{Idem: "t"}, {Idem: "t", AtMostOnce: "m"}} {
		graphs := map[string]map[string]string{}
		for _, ext := range flowgen.Exts {
			m, ds := script.Check(flowgen.Set(ext, 12, 30, tools), cat)
			if len(ds) > 0 {
				t.Fatalf("%s %+v: %s", ext, tools, ds)
			}
			g := map[string]string{}
			atMostOnce := 0
			for _, f := range m.Flows {
				if len(f.Nodes) != 30 {
					t.Errorf("%s: flow %s has %d nodes, want 30", ext, f.Name, len(f.Nodes))
				}
				for _, n := range f.Nodes {
					if n.AtMostOnce {
						atMostOnce++
					}
				}
				b, err := json.Marshal(graph(f))
				if err != nil {
					t.Fatal(err)
				}
				g[f.Name] = string(b)
			}
			if (atMostOnce > 0) != (tools.AtMostOnce != "") {
				t.Errorf("%s %+v: %d at-most-once nodes", ext, tools, atMostOnce)
			}
			graphs[ext] = g
		}
		if len(graphs[".star"]) != 12 {
			t.Fatalf("%d Starlark flows, want 12", len(graphs[".star"]))
		}
		for name, g := range graphs[".star"] {
			if graphs[".lua"][name] != g {
				t.Errorf("flow %s: Lua %s, Starlark %s", name, graphs[".lua"][name], g)
			}
		}
	}
}

// graph is what a flow's nodes are and where they lead, without positions.
func graph(f *flows.Flow) []string {
	var out []string
	for _, n := range f.Nodes {
		out = append(out, string(n.Kind)+" "+n.ID+" "+n.Tool+n.Flow+" "+n.Next+" "+n.Then+" "+n.Otherwise+" "+n.Error)
	}
	return out
}
