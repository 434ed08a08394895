package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/registry"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/host"
)

// genFlow writes a flow of n nodes over the installed tools that uses every
// builtin: tasks with args functions and retries, bounded loops through
// branches, fan-outs, waits, at-most-once mail, and subflow calls to
// callees (plain tasks when there are none).
func genFlow(name string, n int, callees []string) string {
	var b strings.Builder
	b.WriteString("def topic_args(ctx):\n    return {\"topic\": ctx.input[\"topic\"], \"attempt\": ctx.attempt}\n\n")
	fmt.Fprintf(&b, "flow(name = %q, max_depth = 2, nodes = [\n", name)
	end := fmt.Sprintf("n%d", n-1)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next = \"n%d\"", i+1)
		}
		switch {
		case i == n-1:
			fmt.Fprintf(&b, "    task(%q, tool = \"testkit.echo\", args = {\"done\": True}),\n", id)
		case i%10 == 3:
			fmt.Fprintf(&b, "    branch(%q, cond = lambda ctx: len(ctx.results) > %d, then = \"n%d\", otherwise = \"n%d\", max_visits = 3),\n",
				id, i, i+1, i-2)
		case i%10 == 5:
			fmt.Fprintf(&b, "    fanout(%q, items = lambda ctx: ctx.results[\"n%d\"][\"items\"], tool = \"testkit.echo\", args = lambda ctx, item: {\"q\": item}, width = 4, depth = 1, max_items = 8, quorum = 0.5, deadline = \"10m\"%s),\n",
				id, i-1, next)
		case i%10 == 7 && len(callees) > 0:
			fmt.Fprintf(&b, "    subflow(%q, flow = %q, args = lambda ctx: {\"topic\": ctx.input[\"topic\"]}, error = %q, max_visits = 2%s),\n",
				id, callees[i%len(callees)], end, next)
		case i%10 == 8:
			fmt.Fprintf(&b, "    task(%q, tool = \"mail.send\", args = lambda ctx: {\"to\": \"ops@example.com\", \"body\": ctx.input[\"topic\"]}, at_most_once = True, error = %q%s),\n",
				id, end, next)
		case i%10 == 9:
			fmt.Fprintf(&b, "    wait(%q, timeout = \"1h\", error = %q%s),\n", id, end, next)
		default:
			fmt.Fprintf(&b, "    task(%q, tool = \"testkit.echo\", args = topic_args, retries = 2, timeout = \"30s\"%s),\n", id, next)
		}
	}
	b.WriteString("])\n")
	return b.String()
}

// genFlowLua is genFlow in Lua: the same graph, node for node.
func genFlowLua(name string, n int, callees []string) string {
	var b strings.Builder
	b.WriteString("local function topic_args(ctx)\n  return {topic = ctx.input.topic, attempt = ctx.attempt}\nend\n\n")
	b.WriteString("local function count(t)\n  local k = 0\n  for _ in pairs(t) do k = k + 1 end\n  return k\nend\n\n")
	fmt.Fprintf(&b, "flow{%q, max_depth = 2, nodes = {\n", name)
	end := fmt.Sprintf("n%d", n-1)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next = \"n%d\"", i+1)
		}
		switch {
		case i == n-1:
			fmt.Fprintf(&b, "  task{%q, tool = \"testkit.echo\", args = {done = true}},\n", id)
		case i%10 == 3:
			fmt.Fprintf(&b, "  branch{%q, cond = function(ctx) return count(ctx.results) > %d end, [\"then\"] = \"n%d\", otherwise = \"n%d\", max_visits = 3},\n",
				id, i, i+1, i-2)
		case i%10 == 5:
			fmt.Fprintf(&b, "  fanout{%q, items = function(ctx) return ctx.results.n%d.items end, tool = \"testkit.echo\", args = function(ctx, item) return {q = item} end, width = 4, depth = 1, max_items = 8, quorum = 0.5, deadline = \"10m\"%s},\n",
				id, i-1, next)
		case i%10 == 7 && len(callees) > 0:
			fmt.Fprintf(&b, "  subflow{%q, flow = %q, args = function(ctx) return {topic = ctx.input.topic} end, error = %q, max_visits = 2%s},\n",
				id, callees[i%len(callees)], end, next)
		case i%10 == 8:
			fmt.Fprintf(&b, "  task{%q, tool = \"mail.send\", args = function(ctx) return {to = \"ops@example.com\", body = ctx.input.topic} end, at_most_once = true, error = %q%s},\n",
				id, end, next)
		case i%10 == 9:
			fmt.Fprintf(&b, "  wait{%q, timeout = \"1h\", error = %q%s},\n", id, end, next)
		default:
			fmt.Fprintf(&b, "  task{%q, tool = \"testkit.echo\", args = topic_args, retries = 2, timeout = \"30s\"%s},\n", id, next)
		}
	}
	b.WriteString("}}\n")
	return b.String()
}

// generators write the generated flow of genFlow in a flow language, by
// the file extension the language's files take.
var generators = map[string]func(name string, n int, callees []string) string{
	".star": genFlow,
	".lua":  genFlowLua,
}

// genFlowSet is count flows of n nodes in the language of ext (a key of
// generators), one file each; the first ten are leaves and every other
// flow calls two of them.
func genFlowSet(ext string, count, n int) []apitypes.SourceFile {
	gen := generators[ext]
	files := make([]apitypes.SourceFile, count)
	for i := range files {
		var callees []string
		if i >= 10 {
			callees = []string{fmt.Sprintf("f%04d", i%10), fmt.Sprintf("f%04d", (i+3)%10)}
		}
		name := fmt.Sprintf("f%04d", i)
		files[i] = apitypes.SourceFile{Path: name + ext, Src: gen(name, n, callees)}
	}
	return files
}

// registration is scenario 7: 1,000 flows of 50 nodes, registered one
// request per flow as flows arrive in production, and one flow of 10,000
// nodes, both through the real daemon's POST /v1/flows (check, store, and
// the HTTP round trip). The limit beside each is the same registration in
// process on registry.Registry with an in-memory version store and the
// installed plugins' catalog: the cost of checking alone.
func registration(b *bench) ([]row, error) {
	catDir, err := b.dir("catalog")
	if err != nil {
		return nil, err
	}
	cat, err := host.LoadCatalog(b.plugins, catDir)
	if err != nil {
		return nil, err
	}
	set := genFlowSet(".star", 1000, 50)
	luaSet := genFlowSet(".lua", 1000, 50)
	big := []apitypes.SourceFile{{Path: "big.star", Src: genFlow("big", 10_000, nil)}}

	inProcess := func(batches [][]apitypes.SourceFile) (time.Duration, error) {
		reg := registry.NewRegistry(flows.NewMemoryStore(), cat)
		start := time.Now()
		for _, files := range batches {
			in := make([]flows.File, len(files))
			for i, f := range files {
				in[i] = flows.File{Path: f.Path, Src: []byte(f.Src)}
			}
			if _, ds, err := reg.Register(b.ctx, in); err != nil || len(ds.Errors()) > 0 {
				return 0, fmt.Errorf("in process: %v %v", err, ds)
			}
		}
		return time.Since(start), nil
	}
	viaDaemon := func(name string, batches [][]apitypes.SourceFile) (time.Duration, error) {
		d, err := b.startDaemon(name)
		if err != nil {
			return 0, err
		}
		defer d.Kill()
		c := d.Client()
		start := time.Now()
		for _, files := range batches {
			if _, err := c.FlowRegister(b.ctx, files...); err != nil {
				return 0, fmt.Errorf("%s: %w", files[0].Path, err)
			}
		}
		return time.Since(start), nil
	}

	each := make([][]apitypes.SourceFile, len(set))
	luaEach := make([][]apitypes.SourceFile, len(luaSet))
	for i := range set {
		each[i] = set[i : i+1]
		luaEach[i] = luaSet[i : i+1]
	}
	cases := []struct {
		figure  string
		batches [][]apitypes.SourceFile
	}{
		{"register 1,000 flows × 50 nodes, one request each", each},
		{"register 1,000 Lua flows × 50 nodes, one request each", luaEach},
		{"register 1,000 flows × 50 nodes, one request", [][]apitypes.SourceFile{set}},
		{"register one flow of 10,000 nodes", [][]apitypes.SourceFile{big}},
	}
	var rows []row
	for i, c := range cases {
		size := 0
		for _, files := range c.batches {
			body, err := json.Marshal(apitypes.RegisterRequest{Files: files})
			if err != nil {
				return rows, err
			}
			size = max(size, len(body))
		}
		if size > api.MaxRegisterBody {
			rows = append(rows, row{figure: c.figure, value: fmt.Sprintf("not sent: %d bytes exceed the %d-byte body limit", size, api.MaxRegisterBody)})
			continue
		}
		floor, err := inProcess(c.batches)
		if err != nil {
			return rows, err
		}
		got, err := viaDaemon(fmt.Sprintf("register%d", i), c.batches)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row{figure: c.figure + " (daemon)", value: dur(got),
			limit: "in process " + dur(floor), ratio: ratio(float64(got) / float64(floor)), target: verdict("< 1 s", got < time.Second)})
	}
	return rows, nil
}
