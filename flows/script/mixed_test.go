package script_test

import (
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
	"github.com/weirhq/weir/flows/registry"
	"github.com/weirhq/weir/flows/script"
)

// A Starlark flow calls a Lua flow; cycles and depth are seen through the
// language boundary.
func TestLuaMixedRegistration(t *testing.T) {
	t.Parallel()
	files := []flows.File{
		{Path: "top.star", Src: []byte(`flow(name = "top", nodes = [subflow("s", flow = "mid")])` + "\n")},
		{Path: "mid.lua", Src: []byte(`flow{"mid", nodes = {subflow{"s", flow = "leaf"}}}` + "\n" + flowtest.LuaLeaf)},
	}
	reg := registry.NewRegistry(flows.NewMemoryStore(), flows.MapCatalog{"t": {Name: "t", Idempotent: true}})
	vs, ds, err := reg.Register(t.Context(), files)
	if err != nil || len(ds) > 0 || len(vs) != 3 {
		t.Fatalf("%d versions, %v, %s", len(vs), err, ds)
	}
	m, _ := script.Check(files, flows.MapCatalog{"t": {Name: "t", Idempotent: true}})
	if d, ok := m.Depth("top"); !ok || d != 2 {
		t.Fatalf("depth of top: %d %v", d, ok)
	}
	cyclic := []flows.File{
		{Path: "a.star", Src: []byte(`flow(name = "a", nodes = [subflow("s", flow = "b")])` + "\n")},
		{Path: "b.lua", Src: []byte(`flow{"b", nodes = {subflow{"s", flow = "a"}}}` + "\n")},
	}
	_, ds = script.Check(cyclic, flows.MapCatalog{})
	if !ds.Has(flows.CodeCycle) {
		t.Fatalf("no cycle found: %s", ds)
	}
	// Starlark cannot load() a Lua file.
	_, ds = script.Load([]flows.File{{Path: "a.star", Src: []byte(`load("b.lua", "x")` + "\n")}, {Path: "b.lua", Src: []byte(flowtest.LuaLeaf)}})
	if len(ds) != 1 || ds[0].Code != flows.CodeLoad {
		t.Fatalf("load of a Lua file: %s", ds)
	}
}
