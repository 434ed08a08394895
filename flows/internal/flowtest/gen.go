package flowtest

import (
	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/flowgen"
)

// benchTools is the one tool the generated flows call, and no
// at-most-once tool.
var benchTools = flowgen.Tools{Idem: "t.idem"}

// GenFlow writes a Starlark flow of n nodes that uses every builtin
// (flowgen.Flow), calling the tool of BenchCatalog.
func GenFlow(name string, n int, callees []string) string {
	return flowgen.Flow(".star", name, n, callees, benchTools)
}

// GenFlowSet is count Starlark flows of n nodes each, one file per flow;
// the first ten are leaves and every other flow calls two of them.
func GenFlowSet(count, n int) []flows.File { return GenFlowSetIn(count, n, false) }

// GenFlowSetIn is GenFlowSet in Starlark, or in Lua.
func GenFlowSetIn(count, n int, lua bool) []flows.File {
	ext := ".star"
	if lua {
		ext = ".lua"
	}
	return flowgen.Set(ext, count, n, benchTools)
}

// BenchCatalog is the one tool the generated flows call.
var BenchCatalog = flows.MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}}
