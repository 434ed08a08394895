// Package flowgen writes the generated flows that the benchmarks and the
// loader's tests register: flows of any size that use every builtin, in
// Starlark or in Lua, node for node the same graph. The flows packages'
// tests (through flows/internal/flowtest) and the bench driver share it,
// so that the figures of both are about the same flows.
package flowgen

import (
	"fmt"
	"strings"

	"github.com/weirhq/weir/flows"
)

// Tools are the tools a generated flow calls.
type Tools struct {
	// Idem is the idempotent tool of the tasks and the fan-outs.
	Idem string
	// AtMostOnce, if set, is the tool every tenth node, from the ninth
	// on, calls at most once; when empty those nodes are tasks of Idem.
	AtMostOnce string
}

// language is how one flow language writes each kind of node of the
// generated graph. Each format takes its arguments in the order Flow
// passes them (see the comments).
type language struct {
	prelude, open, close string
	end                  string // id, tool
	branch               string // id, i, then, otherwise
	fanout               string // id, the node whose items it reads, tool, next
	subflow              string // id, callee, the error target, next
	atMostOnce           string // id, tool, the error target, next
	wait                 string // id, the error target, next
	task                 string // id, tool, next
}

var languages = map[string]language{
	".star": {
		prelude:    "def topic_args(ctx):\n    return {\"topic\": ctx.input[\"topic\"], \"attempt\": ctx.attempt}\n\n",
		open:       "flow(name = %q, max_depth = 2, nodes = [\n",
		close:      "])\n",
		end:        "    task(%q, tool = %q, args = {\"done\": True}),\n",
		branch:     "    branch(%q, cond = lambda ctx: len(ctx.results) > %d, then = \"n%d\", otherwise = \"n%d\", max_visits = 3),\n",
		fanout:     "    fanout(%q, items = lambda ctx: ctx.results[\"n%d\"][\"items\"], tool = %q, args = lambda ctx, item: {\"q\": item}, width = 4, depth = 1, max_items = 8, quorum = 0.5, deadline = \"10m\"%s),\n",
		subflow:    "    subflow(%q, flow = %q, args = lambda ctx: {\"topic\": ctx.input[\"topic\"]}, error = %q, max_visits = 2%s),\n",
		atMostOnce: "    task(%q, tool = %q, args = lambda ctx: {\"to\": \"ops@example.com\", \"body\": ctx.input[\"topic\"]}, at_most_once = True, error = %q%s),\n",
		wait:       "    wait(%q, timeout = \"1h\", error = %q%s),\n",
		task:       "    task(%q, tool = %q, args = topic_args, retries = 2, timeout = \"30s\"%s),\n",
	},
	".lua": {
		prelude: "local function topic_args(ctx)\n  return {topic = ctx.input.topic, attempt = ctx.attempt}\nend\n\n" +
			"local function count(t)\n  local k = 0\n  for _ in pairs(t) do k = k + 1 end\n  return k\nend\n\n",
		open:       "flow{%q, max_depth = 2, nodes = {\n",
		close:      "}}\n",
		end:        "  task{%q, tool = %q, args = {done = true}},\n",
		branch:     "  branch{%q, cond = function(ctx) return count(ctx.results) > %d end, [\"then\"] = \"n%d\", otherwise = \"n%d\", max_visits = 3},\n",
		fanout:     "  fanout{%q, items = function(ctx) return ctx.results.n%d.items end, tool = %q, args = function(ctx, item) return {q = item} end, width = 4, depth = 1, max_items = 8, quorum = 0.5, deadline = \"10m\"%s},\n",
		subflow:    "  subflow{%q, flow = %q, args = function(ctx) return {topic = ctx.input.topic} end, error = %q, max_visits = 2%s},\n",
		atMostOnce: "  task{%q, tool = %q, args = function(ctx) return {to = \"ops@example.com\", body = ctx.input.topic} end, at_most_once = true, error = %q%s},\n",
		wait:       "  wait{%q, timeout = \"1h\", error = %q%s},\n",
		task:       "  task{%q, tool = %q, args = topic_args, retries = 2, timeout = \"30s\"%s},\n",
	},
}

// Exts are the file endings Flow writes, one per flow language.
var Exts = []string{".star", ".lua"}

// Flow writes, in the language of the file ending ext (one of Exts), a
// flow of n nodes that uses every builtin: tasks with args functions and
// retries, bounded loops through branches, fan-outs with functions,
// waits, at-most-once calls when tools has such a tool, and subflow calls
// to callees (tasks when there are none). Every error wire goes to the
// last node.
func Flow(ext, name string, n int, callees []string, tools Tools) string {
	l, ok := languages[ext]
	if !ok {
		panic("flowgen: no flow language writes " + ext)
	}
	var b strings.Builder
	b.WriteString(l.prelude)
	fmt.Fprintf(&b, l.open, name)
	end := fmt.Sprintf("n%d", n-1)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next = \"n%d\"", i+1)
		}
		switch {
		case i == n-1:
			fmt.Fprintf(&b, l.end, id, tools.Idem)
		case i%10 == 3:
			fmt.Fprintf(&b, l.branch, id, i, i+1, i-2)
		case i%10 == 5:
			fmt.Fprintf(&b, l.fanout, id, i-1, tools.Idem, next)
		case i%10 == 7 && len(callees) > 0:
			fmt.Fprintf(&b, l.subflow, id, callees[i%len(callees)], end, next)
		case i%10 == 8 && tools.AtMostOnce != "":
			fmt.Fprintf(&b, l.atMostOnce, id, tools.AtMostOnce, end, next)
		case i%10 == 9:
			fmt.Fprintf(&b, l.wait, id, end, next)
		default:
			fmt.Fprintf(&b, l.task, id, tools.Idem, next)
		}
	}
	b.WriteString(l.close)
	return b.String()
}

// Set is count flows of n nodes in the language of ext, one file per
// flow, named f0000, f0001, ...; the first ten are leaves and every other
// flow calls two of them.
func Set(ext string, count, n int, tools Tools) []flows.File {
	files := make([]flows.File, count)
	for i := range files {
		var callees []string
		if i >= 10 {
			callees = []string{fmt.Sprintf("f%04d", i%10), fmt.Sprintf("f%04d", (i+3)%10)}
		}
		name := fmt.Sprintf("f%04d", i)
		files[i] = flows.File{Path: name + ext, Src: []byte(Flow(ext, name, n, callees, tools))}
	}
	return files
}

// Chain is a Starlark flow of n tasks, one after another, each calling
// tool with its own index: the plainest durable run of n steps.
func Chain(name string, n int, tool string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flow(name = %q, nodes = [\n", name)
	for i := range n {
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next = \"s%d\"", i+1)
		}
		fmt.Fprintf(&b, "    task(\"s%d\", tool = %q, args = {\"i\": %d}%s),\n", i, tool, i, next)
	}
	b.WriteString("])\n")
	return b.String()
}
