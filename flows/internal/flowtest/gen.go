package flowtest

import (
	"fmt"
	"strings"

	"github.com/weirhq/weir/flows"
)

// GenFlow writes a flow of n nodes that uses every builtin: tasks with
// args functions, bounded loops through branches, fanouts with lambdas,
// waits, and subflow calls to callees (tasks when there are none).
func GenFlow(name string, n int, callees []string) string {
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

// GenFlowLua is GenFlow in Lua: the same graph, node for node.
func GenFlowLua(name string, n int, callees []string) string {
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

// GenFlowSet is count flows of n nodes each, one file per flow; the first
// ten are leaves and every other flow calls two of them.
func GenFlowSet(count, n int) []flows.File { return GenFlowSetIn(count, n, false) }

// GenFlowSetIn is GenFlowSet in Starlark, or in Lua.
func GenFlowSetIn(count, n int, lua bool) []flows.File {
	files := make([]flows.File, count)
	for i := range files {
		var callees []string
		if i >= 10 {
			callees = []string{fmt.Sprintf("f%04d", i%10), fmt.Sprintf("f%04d", (i+3)%10)}
		}
		name := fmt.Sprintf("f%04d", i)
		if lua {
			files[i] = flows.File{Path: name + ".lua", Src: []byte(GenFlowLua(name, n, callees))}
			continue
		}
		files[i] = flows.File{Path: name + ".star", Src: []byte(GenFlow(name, n, callees))}
	}
	return files
}

// BenchCatalog is the one tool the generated flows call.
// BenchCatalog is the one tool the generated flows call.
var BenchCatalog = flows.MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}}
