package registry

import (
	"fmt"
	"testing"

	"github.com/weirhq/weir/flows/internal/flowtest"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
)

// registerEach registers files one registration at a time, as flows
// arrive in production, each resolving its calls in the registry.
func registerEach(b *testing.B, files []flows.File) {
	reg := NewRegistry(flows.NewMemoryStore(), flowtest.BenchCatalog)
	for _, f := range files {
		_, ds, err := reg.Register(b.Context(), []flows.File{f})
		if err != nil || len(ds) > 0 {
			b.Fatalf("%s: %v\n%s", f.Path, err, ds)
		}
	}
}

// BenchmarkRegister1000x50 registers 1,000 flows of 50 nodes each, one
// registration per flow.
func BenchmarkRegister1000x50(b *testing.B) {
	files := flowtest.GenFlowSet(1000, 50)
	b.ReportAllocs()
	for b.Loop() {
		registerEach(b, files)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/node")
}

// BenchmarkRegister1000x50Lua is BenchmarkRegister1000x50 with the same
// flows written in Lua.
func BenchmarkRegister1000x50Lua(b *testing.B) {
	files := flowtest.GenFlowSetIn(1000, 50, true)
	b.ReportAllocs()
	for b.Loop() {
		registerEach(b, files)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/node")
}

// BenchmarkRegister10000Nodes registers one flow of 10,000 nodes.
func BenchmarkRegister10000Nodes(b *testing.B) {
	files := []flows.File{{Path: "big.star", Src: []byte(flowtest.GenFlow("big", 10_000, nil))}}
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
			files := []flows.File{{Path: "big.star", Src: []byte(flowtest.GenFlow("big", n, nil))}}
			for b.Loop() {
				registerEach(b, files)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
		})
	}
	for _, count := range []int{125, 250, 500, 1000} {
		b.Run(fmt.Sprintf("flows=%dx50", count), func(b *testing.B) {
			files := flowtest.GenFlowSet(count, 50)
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
	reg := NewRegistry(flows.NewMemoryStore(), flowtest.BenchCatalog)
	for _, f := range flowtest.GenFlowSet(30, 50) {
		if _, ds, err := reg.Register(t.Context(), []flows.File{f}); err != nil || len(ds) > 0 {
			t.Fatalf("%s: %v\n%s", f.Path, err, ds)
		}
	}
	m, ds := script.Check([]flows.File{{Path: "big.star", Src: []byte(flowtest.GenFlow("big", 1000, nil))}}, flowtest.BenchCatalog)
	if len(ds) > 0 || len(m.Flows[0].Nodes) != 1000 {
		t.Fatalf("%s", ds)
	}
	// The Lua set is the same graphs.
	lua := NewRegistry(flows.NewMemoryStore(), flowtest.BenchCatalog)
	for _, f := range flowtest.GenFlowSetIn(30, 50, true) {
		if _, ds, err := lua.Register(t.Context(), []flows.File{f}); err != nil || len(ds) > 0 {
			t.Fatalf("%s: %v\n%s", f.Path, err, ds)
		}
	}
	star, _ := script.Check(flowtest.GenFlowSetIn(12, 50, false), flowtest.BenchCatalog)
	luaM, _ := script.Check(flowtest.GenFlowSetIn(12, 50, true), flowtest.BenchCatalog)
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
	files := flowtest.GenFlowSet(1000, 50)
	b.ReportAllocs()
	for b.Loop() {
		reg := NewRegistry(flows.NewMemoryStore(), flowtest.BenchCatalog)
		if _, ds, err := reg.Register(b.Context(), files); err != nil || len(ds) > 0 {
			b.Fatalf("%v\n%s", err, ds)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/node")
}
