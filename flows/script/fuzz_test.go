package script

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
)

// FuzzLoad feeds arbitrary scripts to the loader and the checks: they must
// never panic or hang, every diagnostic must be well formed, and a script
// that passes must survive the IR's JSON round trip and have every callable
// evaluable (errors allowed, panics not).
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/check/*.star")
	more, _ := filepath.Glob("testdata/check/*/*.star")
	seeds = append(seeds, more...)
	seeds = append(seeds, "../../examples/research.star", "../../examples/summarize.star", "../../examples/mistakes/newsletter.star")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(`load("lib.star", "helper")
flow(name = "f", nodes = [task("a", tool = "t.idem", args = helper, next = "b"), branch("b", cond = lambda ctx: ctx.attempt > 1, then = "a", max_visits = 2)])`)
	f.Add(`for i in range(1000000 * 1000000):
    pass`)
	f.Add(`x = []
x.append(x)
flow(name = "r", nodes = [task("a", tool = "t.idem", args = {"x": x})])`)
	f.Add(`flow(name = "s", nodes = [subflow("a", flow = "s")], output = lambda ctx: ctx)`)
	// Script bombs the nesting limits stop (limits.go); the memory bombs
	// are in runtime/sandbox's fuzz corpus, where a worker's limits hold.
	f.Add(`x = json.decode("[" * 50000000)`)
	f.Add(`x = []
for i in range(200000):
    x = [x]
y = str(x)`)
	f.Add(`flow(name = "b", nodes = [task("a", tool = "t.idem", args = lambda ctx: {"x": json.decode("[" * 100000)})])`)
	f.Add(`x = {}
for i in range(1000):
    x = {"k": x}
flow(name = "e", nodes = [task("a", tool = "t.idem", args = lambda ctx: {"s": json.encode(x) + repr(x)})])`)
	f.Add(`flow(name = "ag", nodes = [
    agent("a", model = "small", system = "Be brief.", prompt = lambda ctx: "Q: " + ctx.input["topic"],
        tools = ["web.search", "t.once"], approve = ["t.once"], flows = ["leaf"], max_turns = 4,
        max_tokens = 256, output = {"type": "object"}, next = "b"),
    agent("b", model_tool = "llm.chat", prompt = "again", system = lambda ctx: ctx.flow, max_turns = 1),
])
flow(name = "leaf", nodes = [task("x", tool = "t.idem")])`)

	lib := flows.File{Path: "lib.star", Src: []byte("def helper(ctx):\n    return {\"n\": 1}\n")}

	f.Fuzz(func(t *testing.T, script string) {
		fuzzCheck(t, fuzzLoader, fuzzCat, []flows.File{{Path: "fuzz.star", Src: []byte(script)}, lib})
	})
}

// fuzzCat and fuzzLoader are what the fuzz targets check against.
var (
	fuzzCat = flows.MapCatalog{
		"t.idem":     {Name: "t.idem", Idempotent: true},
		"t.once":     {Name: "t.once"},
		"web.search": {Name: "web.search", Idempotent: true},
		"llm.chat":   {Name: "llm.chat", Idempotent: true, Chat: true, Models: []flows.ModelInfo{{Alias: "small", MaxTokens: 1024}}},
	}
	fuzzLoader = Loader{MaxSteps: 100_000, MaxFileBytes: 64 << 10}
)

// fuzzCheck checks files and asserts what must hold for any input: no
// panic, well-formed diagnostics inside the files, and for a clean
// module, IR that round-trips and callables that evaluate (errors
// allowed).
func fuzzCheck(t *testing.T, loader Loader, cat flows.Catalog, files []flows.File) {
	m, ds := loader.Check(files, cat)
	for _, d := range ds {
		if !slices.Contains(flows.AllCodes, d.Code) {
			t.Fatalf("unknown code in %s", d)
		}
		if !slices.ContainsFunc(files, func(f flows.File) bool { return f.Path == d.File }) {
			t.Fatalf("diagnostic outside the files: %s", d)
		}
		if d.Message == "" || strings.ContainsAny(d.Message, "\n\r") {
			t.Fatalf("bad message in %q", d.String())
		}
	}
	if m == nil {
		t.Fatal("nil module")
	}
	if len(ds) > 0 {
		return
	}
	for _, fl := range m.Flows {
		data, err := json.Marshal(&flows.Version{Flow: fl, Sources: m.Sources(fl.Name)})
		if err != nil {
			t.Fatalf("encoding %s: %v", fl.Name, err)
		}
		var v flows.Version
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("decoding %s: %v", fl.Name, err)
		}
		ev, err := loader.NewEvaluator(v.Sources)
		if err != nil {
			t.Fatalf("sources of a clean flow do not re-load: %v", err)
		}
		var refs []*flows.CallableRef
		if v.Flow.Output != nil {
			refs = append(refs, v.Flow.Output)
		}
		for _, n := range v.Flow.Nodes {
			for _, r := range []*flows.CallableRef{n.Args, n.Cond, n.Items, n.Reduce, n.Mature, n.System, n.Prompt} {
				if r != nil {
					refs = append(refs, r)
				}
			}
		}
		for _, r := range refs {
			if !ev.Has(*r) {
				t.Fatalf("re-loaded sources lack %s", r)
			}
			extra := map[string][]any{"reduce": {[]any{}}, "mature": {"item", map[string]any{}}}[r.Param]
			if r.Param == "args" && n(v.Flow, r).Kind == flows.KindFanout {
				extra = []any{"item"}
			}
			_, _ = ev.Call(*r, flows.Context{RunID: "fuzz", Attempt: 1, Input: map[string]any{"topic": "x"}}, extra...)
		}
	}
}

// FuzzLoadLua is FuzzLoad for Lua files, beside a Starlark file that a
// Lua flow may call.
func FuzzLoadLua(f *testing.F) {
	for _, p := range []string{"../../examples/research.lua", "../../examples/summarize.lua", "../../examples/run/digest.lua"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(`flow{"f", nodes = {task{"a", tool = "t.idem", args = function(ctx) return {n = #ctx.input.topic} end, next = "b"},
  branch{"b", cond = function(ctx) return ctx.attempt > 1 end, ["then"] = "a", max_visits = 2}}}`)
	f.Add(`while true do end`)
	f.Add(`local t = {} t.t = t flow{"r", nodes = {task{"a", tool = "t.idem", args = {x = t}}}}`)
	f.Add(`flow{"s", nodes = {subflow{"a", flow = "leaf"}}, output = function(ctx) return ctx end}`)
	f.Add(`flow{"w", nodes = {wait{"w", event = "a.b", match = function(ctx) return ctx.input.k end}}}
schedule{"s", flow = "w", cron = "0 9 * * *", timezone = "Europe/Paris", input = function(tick) return {k = tick.time} end}
on_event{"a.c", flow = "w", filter = function(ev) return ev.key ~= nil end}`)
	f.Add(`local s = string.rep("x", 1e9)`)
	f.Add(`flow{"ag", nodes = {agent{"a", model = "small", prompt = function(ctx) return "Q: " .. ctx.input.topic end,
  tools = {"web.search", "t.once"}, approve = {"t.once"}, flows = {"leaf"}, max_turns = 4, output = object{}}}}`)
	f.Add(`flow{"e", nodes = {fanout{"f", items = function(ctx) return {} end, tool = "t.idem", width = 1, depth = 1, max_items = 2,
  reduce = function(ctx, results, items) return array{} end, mature = function(ctx, item, result) return 0 end}}}`)
	leaf := flows.File{Path: "leaf.star", Src: []byte(`flow(name = "leaf", nodes = [task("x", tool = "t.idem")])` + "\n")}
	f.Fuzz(func(t *testing.T, script string) {
		fuzzCheck(t, fuzzLoader, fuzzCat, []flows.File{{Path: "fuzz.lua", Src: []byte(script)}, leaf})
	})
}

func n(f *flows.Flow, r *flows.CallableRef) *flows.Node {
	if node := f.Node(r.Node); node != nil {
		return node
	}
	return &flows.Node{}
}
