package flows

import (
	"fmt"
	"strings"
	"testing"
)

// genFlow writes a flow of n nodes that uses every builtin: tasks with
// args functions, bounded loops through branches, fanouts with lambdas,
// waits, and subflow calls to callees (tasks when there are none).
func genFlow(name string, n int, callees []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "def topic_args(ctx):\n    return {\"topic\": ctx.input[\"topic\"], \"attempt\": ctx.attempt}\n\n")
	fmt.Fprintf(&b, "flow(name = %q, max_depth = 2, nodes = [\n", name)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next = \"n%d\"", i+1)
		}
		switch {
		case i == n-1: // the end: the target of error wires
			fmt.Fprintf(&b, "    task(%q, tool = \"t.idem\", args = {\"done\": True}),\n", id)
		case i%10 == 3:
			fmt.Fprintf(&b, "    branch(%q, cond = lambda ctx: len(ctx.results) > %d, then = \"n%d\", otherwise = \"n%d\", max_visits = 3),\n",
				id, i, min(i+1, n-1), i-2)
		case i%10 == 5:
			fmt.Fprintf(&b, "    fanout(%q, items = lambda ctx: ctx.results[\"n%d\"][\"items\"], tool = \"t.idem\", args = lambda ctx, item: {\"q\": item}, width = 4, depth = 1, max_items = 8, quorum = 0.5, deadline = \"10m\"%s),\n",
				id, i-1, next)
		case i%10 == 7 && len(callees) > 0:
			fmt.Fprintf(&b, "    subflow(%q, flow = %q, args = lambda ctx: {\"in\": ctx.input}, error = \"n%d\", max_visits = 2%s),\n",
				id, callees[i%len(callees)], n-1, next)
		case i%10 == 9:
			fmt.Fprintf(&b, "    wait(%q, timeout = \"1h\", error = \"n%d\"%s),\n", id, n-1, next)
		default:
			fmt.Fprintf(&b, "    task(%q, tool = \"t.idem\", args = topic_args, retries = 2, timeout = \"30s\"%s),\n", id, next)
		}
	}
	b.WriteString("])\n")
	return b.String()
}

// genFlowLua is genFlow in Lua: the same graph, node for node.
func genFlowLua(name string, n int, callees []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "local function topic_args(ctx)\n  return {topic = ctx.input.topic, attempt = ctx.attempt}\nend\n\n")
	fmt.Fprintf(&b, "flow{%q, max_depth = 2, nodes = {\n", name)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next = \"n%d\"", i+1)
		}
		switch {
		case i == n-1:
			fmt.Fprintf(&b, "  task{%q, tool = \"t.idem\", args = {done = true}},\n", id)
		case i%10 == 3:
			fmt.Fprintf(&b, "  branch{%q, cond = function(ctx) local k = 0 for _ in pairs(ctx.results) do k = k + 1 end return k > %d end, [\"then\"] = \"n%d\", otherwise = \"n%d\", max_visits = 3},\n",
				id, i, min(i+1, n-1), i-2)
		case i%10 == 5:
			fmt.Fprintf(&b, "  fanout{%q, items = function(ctx) return ctx.results.n%d.items end, tool = \"t.idem\", args = function(ctx, item) return {q = item} end, width = 4, depth = 1, max_items = 8, quorum = 0.5, deadline = \"10m\"%s},\n",
				id, i-1, next)
		case i%10 == 7 && len(callees) > 0:
			fmt.Fprintf(&b, "  subflow{%q, flow = %q, args = function(ctx) return {[\"in\"] = ctx.input} end, error = \"n%d\", max_visits = 2%s},\n",
				id, callees[i%len(callees)], n-1, next)
		case i%10 == 9:
			fmt.Fprintf(&b, "  wait{%q, timeout = \"1h\", error = \"n%d\"%s},\n", id, n-1, next)
		default:
			fmt.Fprintf(&b, "  task{%q, tool = \"t.idem\", args = topic_args, retries = 2, timeout = \"30s\"%s},\n", id, next)
		}
	}
	b.WriteString("}}\n")
	return b.String()
}

// genFlowSet is count flows of n nodes each, one file per flow; the first
// ten are leaves and every other flow calls two of them.
func genFlowSet(count, n int) []File { return genFlowSetIn(count, n, false) }

// genFlowSetIn is genFlowSet in Starlark, or in Lua.
func genFlowSetIn(count, n int, lua bool) []File {
	files := make([]File, count)
	for i := range files {
		var callees []string
		if i >= 10 {
			callees = []string{fmt.Sprintf("f%04d", i%10), fmt.Sprintf("f%04d", (i+3)%10)}
		}
		name := fmt.Sprintf("f%04d", i)
		if lua {
			files[i] = File{Path: name + ".lua", Src: []byte(genFlowLua(name, n, callees))}
			continue
		}
		files[i] = File{Path: name + ".star", Src: []byte(genFlow(name, n, callees))}
	}
	return files
}

var benchCatalog = MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}}

// registerEach registers files one registration at a time, as flows
// arrive in production, each resolving its calls in the registry.
func registerEach(b *testing.B, files []File) {
	reg := NewRegistry(NewMemoryStore(), benchCatalog)
	for _, f := range files {
		_, ds, err := reg.Register(b.Context(), []File{f})
		if err != nil || len(ds) > 0 {
			b.Fatalf("%s: %v\n%s", f.Path, err, ds)
		}
	}
}

// BenchmarkRegister1000x50 registers 1,000 flows of 50 nodes each, one
// registration per flow.
func BenchmarkRegister1000x50(b *testing.B) {
	files := genFlowSet(1000, 50)
	b.ReportAllocs()
	for b.Loop() {
		registerEach(b, files)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/node")
}

// BenchmarkRegister1000x50Lua is BenchmarkRegister1000x50 with the same
// flows written in Lua.
func BenchmarkRegister1000x50Lua(b *testing.B) {
	files := genFlowSetIn(1000, 50, true)
	b.ReportAllocs()
	for b.Loop() {
		registerEach(b, files)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/node")
}

// BenchmarkRegister10000Nodes registers one flow of 10,000 nodes.
func BenchmarkRegister10000Nodes(b *testing.B) {
	files := []File{{Path: "big.star", Src: []byte(genFlow("big", 10_000, nil))}}
	b.ReportAllocs()
	for b.Loop() {
		registerEach(b, files)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/node")
}

// BenchmarkRegisterScaling shows how registration cost grows with graph
// size: ns/node should stay flat across sizes, for one big flow and for
// many flows alike.
func BenchmarkRegisterScaling(b *testing.B) {
	for _, n := range []int{1250, 2500, 5000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("one_flow_nodes=%d", n), func(b *testing.B) {
			files := []File{{Path: "big.star", Src: []byte(genFlow("big", n, nil))}}
			for b.Loop() {
				registerEach(b, files)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
		})
	}
	for _, count := range []int{125, 250, 500, 1000} {
		b.Run(fmt.Sprintf("flows=%dx50", count), func(b *testing.B) {
			files := genFlowSet(count, 50)
			for b.Loop() {
				registerEach(b, files)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(count*50), "ns/node")
		})
	}
}

// The generated flows must be clean, or the benchmarks would measure the
// wrong thing (and b.Fatalf would stop them).
func TestGeneratedBenchmarkFlowsAreClean(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(NewMemoryStore(), benchCatalog)
	for _, f := range genFlowSet(30, 50) {
		if _, ds, err := reg.Register(t.Context(), []File{f}); err != nil || len(ds) > 0 {
			t.Fatalf("%s: %v\n%s", f.Path, err, ds)
		}
	}
	m, ds := Check([]File{{Path: "big.star", Src: []byte(genFlow("big", 1000, nil))}}, benchCatalog)
	if len(ds) > 0 || len(m.Flows[0].Nodes) != 1000 {
		t.Fatalf("%s", ds)
	}
	// The Lua set is the same graphs.
	lua := NewRegistry(NewMemoryStore(), benchCatalog)
	for _, f := range genFlowSetIn(30, 50, true) {
		if _, ds, err := lua.Register(t.Context(), []File{f}); err != nil || len(ds) > 0 {
			t.Fatalf("%s: %v\n%s", f.Path, err, ds)
		}
	}
	star, _ := Check(genFlowSetIn(12, 50, false), benchCatalog)
	luaM, _ := Check(genFlowSetIn(12, 50, true), benchCatalog)
	for i, f := range star.Flows {
		g := luaM.Flows[i]
		if len(f.Nodes) != len(g.Nodes) {
			t.Fatalf("%s: %d nodes in Starlark, %d in Lua", f.Name, len(f.Nodes), len(g.Nodes))
		}
		for j, n := range f.Nodes {
			m := g.Nodes[j]
			if n.ID != m.ID || n.Kind != m.Kind || n.Next != m.Next || n.Error != m.Error || n.Flow != m.Flow || (n.Args == nil) != (m.Args == nil) {
				t.Fatalf("%s node %d: Starlark %+v, Lua %+v", f.Name, j, n, m)
			}
		}
	}
}

// BenchmarkRegister1000x50Batch registers the same 1,000 flows in one
// registration, as a deploy of a whole repository of flows would: files
// compile in parallel.
func BenchmarkRegister1000x50Batch(b *testing.B) {
	files := genFlowSet(1000, 50)
	b.ReportAllocs()
	for b.Loop() {
		reg := NewRegistry(NewMemoryStore(), benchCatalog)
		if _, ds, err := reg.Register(b.Context(), files); err != nil || len(ds) > 0 {
			b.Fatalf("%v\n%s", err, ds)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/node")
}
