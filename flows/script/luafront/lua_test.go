package luafront_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/flows/script/luafront"
)

// Every module and function that reaches outside the sandbox, loads code
// or reads a clock or randomness is absent.
func TestLuaSandboxForbiddenAbsent(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"_G", "os", "io", "debug", "package", "coroutine", "channel", "load", "loadstring", "loadfile", "dofile",
		"require", "module", "collectgarbage", "getfenv", "setfenv", "newproxy", "math.random",
		"math.randomseed", "string.dump",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := fmt.Sprintf("assert(%s == nil, %q)\n", name, name+" is present") + flowtest.LuaLeaf
			if _, ds := script.Load(flowtest.LuaFile(src)); len(ds) > 0 {
				t.Fatalf("%s", ds)
			}
		})
	}
	// Using one is a script error at its line.
	_, ds := script.Load(flowtest.LuaFile("local t = os.time()\n" + flowtest.LuaLeaf))
	if len(ds) != 1 || ds[0].Code != flows.CodeScript || ds[0].Line != 1 {
		t.Fatalf("os.time(): %s", ds)
	}
}

// luaLoop runs n iterations of an empty loop and declares a flow.
func luaLoop(n int) []flows.File {
	return flowtest.LuaFile(fmt.Sprintf("for i = 1, %d do end\n", n) + flowtest.LuaLeaf)
}

// The instruction limit is exact and deterministic: the least limit a
// script loads under is found once, loads again, and one less fails with
// the step-limit message.
func TestLuaStepLimitExact(t *testing.T) {
	t.Parallel()
	loads := func(limit uint64) bool {
		_, ds := script.Loader{MaxSteps: limit}.Load(luaLoop(100))
		return len(ds) == 0
	}
	lo, hi := uint64(1), uint64(10_000)
	if !loads(hi) {
		t.Fatalf("does not load under %d steps", hi)
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if loads(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	k := lo
	if k < 100 || k > 1000 {
		t.Fatalf("a 100-iteration loop takes %d instructions", k)
	}
	for range 3 {
		if !loads(k) {
			t.Fatalf("loads under %d once, not again", k)
		}
	}
	_, ds := script.Loader{MaxSteps: k - 1}.Load(luaLoop(100))
	if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || !strings.Contains(ds[0].Message, "script limit (steps): step limit exceeded") {
		t.Fatalf("under %d steps: %s", k-1, ds)
	}
	// One more iteration costs more.
	if _, ds := (script.Loader{MaxSteps: k}).Load(luaLoop(101)); len(ds) == 0 {
		t.Fatalf("101 iterations load under the limit of 100")
	}
}

// A callable has its own allowance and reports ErrStepLimit.
func TestLuaCallableStepLimit(t *testing.T) {
	t.Parallel()
	src := `flow{"f", nodes = {task{"a", tool = "t", args = function(ctx)
  local n = 0
  while true do n = n + 1 end
end}}}`
	ev, err := script.Loader{MaxSteps: 10_000}.NewEvaluator(flowtest.LuaFile(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ev.Call(flows.CallableRef{Flow: "f", Node: "a", Param: "args"}, flows.Context{RunID: "r", Attempt: 1})
	var ce *flows.CallError
	if !errors.Is(err, flows.ErrStepLimit) || !errors.As(err, &ce) || ce.Pos.Line != 3 {
		t.Fatalf("got %v", err)
	}
}

func TestLuaStringCaps(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, ok, tooBig string }{
		{"string.rep", `string.rep("ab", %d / 2)`, `string.rep("ab", %d / 2 + 1)`},
		{"table.concat", `table.concat({string.rep("a", %d / 2), string.rep("b", %d / 2)})`, `table.concat({string.rep("a", %d / 2), string.rep("b", %d / 2)}, "-")`},
		{"string.gsub", `string.gsub(string.rep("a", %d / 2), "a", "bb")`, `string.gsub(string.rep("a", %d / 2), "a", "bbb")`},
		{"..", `string.rep("a", %d / 2) .. string.rep("b", %d / 2)`, `string.rep("a", %d / 2) .. "x" .. string.rep("b", %d / 2)`},
		{"..", `(function(s) return s .. s end)(string.rep("a", %d / 2))`, `(function(s) for i = 1, 30 do s = s .. s end return s end)("ab")`},
		{"string.gsub", `string.gsub(string.rep("a", %d / 2), "a", "b", 2)`, `string.gsub(string.rep("a", %d / 2), "a", string.rep("b", %d / 2), 2)`},
		{"string.format", `(function(a) return string.format("%s%s%s%s", a, a, a, a) end)(string.rep("a", %d / 4))`, `(function(a) return string.format("%s%s%s%s", a, a, a, a) end)(string.rep("a", %d / 2))`},
		{"string.format", `string.format("%s%s", string.rep("a", %d / 2), string.rep("b", %d / 2))`, `string.format("%s-%s", string.rep("a", %d / 2), string.rep("b", %d / 2))`},
		{"string.format", `string.format("%1000000s%s", "a", string.rep("b", 48576))`, `string.format("%1000000s%1000000s", "a", "b")`},
		{"json.encode", `json.encode(array{string.rep("a", %d / 2 - 4), string.rep("b", %d / 2 - 4)})`, `json.encode(array{string.rep("a", %d / 2 - 3), string.rep("b", %d / 2 - 3)})`},
		{"json.encode", `json.encode({k = string.rep("a", %d - 9)})`, `(function(a) local t = {} for i = 1, 2000 do t[i] = a end return json.encode(t) end)(string.rep("a", %d / 2))`},
		{"json.encode", `json.encode(string.rep("\0", 174762))`, `json.encode(string.rep("\0", 174763))`}, // 6 bytes of JSON each, 2 quotes
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			expr := func(f string) string {
				return strings.ReplaceAll(f, "%d", fmt.Sprint(luafront.LuaMaxStringBytes))
			}
			if _, ds := script.Load(flowtest.LuaFile("local s = " + expr(tt.ok) + "\n" + flowtest.LuaLeaf)); len(ds) > 0 {
				t.Fatalf("at the limit: %s", ds)
			}
			_, ds := script.Load(flowtest.LuaFile("local s = " + expr(tt.tooBig) + "\n" + flowtest.LuaLeaf))
			if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 1 || !strings.Contains(ds[0].Message, "script limit (size): "+tt.name) {
				t.Fatalf("over the limit: %s", ds)
			}
		})
	}
}

func TestLuaFileSizeCap(t *testing.T) {
	t.Parallel()
	src := flowtest.LuaLeaf + "-- " + strings.Repeat("x", 100)
	_, ds := script.Loader{MaxFileBytes: 64}.Load(flowtest.LuaFile(src))
	if len(ds) != 1 || ds[0].Code != flows.CodeInvalid || !strings.Contains(ds[0].Message, "more than the limit") {
		t.Fatalf("%s", ds)
	}
}

// A callable cannot carry state from one call to the next, and table
// iteration order does not vary: every call answers the same.
func TestLuaCallableDeterministic(t *testing.T) {
	t.Parallel()
	src := `calls = 0
flow{"f", nodes = {task{"a", tool = "t", args = function(ctx)
  calls = calls + 1
  local keys = {}
  for k in pairs({zeta = 1, alpha = 2, mid = 3, beta = 4, omega = 5}) do keys[#keys + 1] = k end
  return {calls = calls, keys = table.concat(keys, ","), run = ctx.run_id}
end}}}`
	ev, err := script.NewEvaluator(flowtest.LuaFile(src))
	if err != nil {
		t.Fatal(err)
	}
	ref := flows.CallableRef{Flow: "f", Node: "a", Param: "args"}
	first, err := ev.Call(ref, flows.Context{RunID: "r", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if first.(map[string]any)["calls"] != int64(1) {
		t.Fatalf("first call: %v", first)
	}
	for range 20 {
		got, err := ev.Call(ref, flows.Context{RunID: "r", Attempt: 1})
		if err != nil || !reflect.DeepEqual(got, first) {
			t.Fatalf("got %v (%v), first call %v", got, err, first)
		}
	}
}

// irOf loads files and returns each flow's IR as JSON without positions
// and hashes, which differ between languages by design.
func irOf(t *testing.T, files []flows.File) map[string]string {
	t.Helper()
	m, ds := script.Check(files, flowtest.Catalog(t, "../testdata/catalog.json"))
	if len(ds) > 0 {
		t.Fatalf("%s", ds)
	}
	out := map[string]string{}
	for _, f := range m.Flows {
		c := *f
		c.Pos, c.Hash, c.SourceHash = flows.Pos{}, "", ""
		// Projections are compiled from Starlark lambdas only: a Lua
		// callable is evaluated as a script, to the same values.
		c.Projections = nil
		c.Nodes = nil
		for _, n := range f.Nodes {
			nc := *n
			nc.Pos, nc.Site = flows.Pos{}, nil
			c.Nodes = append(c.Nodes, &nc)
		}
		b, err := json.MarshalIndent(&c, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = string(b)
	}
	return out
}

// The Lua examples compile to the same IR as the Starlark ones.
func TestLuaExamplesSameIR(t *testing.T) {
	t.Parallel()
	star := irOf(t, flowtest.ReadFiles(t, "../../../examples/research.star", "../../../examples/summarize.star"))
	lua := irOf(t, flowtest.ReadFiles(t, "../../../examples/research.lua", "../../../examples/summarize.lua"))
	if len(star) != 2 || !reflect.DeepEqual(star, lua) {
		t.Fatalf("starlark IR:\n%v\nlua IR:\n%v", star, lua)
	}
}

func TestLuaEvaluateResearch(t *testing.T) {
	t.Parallel()
	ev, err := script.NewEvaluator(flowtest.ReadFiles(t, "../../../examples/research.lua"))
	if err != nil {
		t.Fatal(err)
	}
	f := ev.Flow("research")
	ctx := flows.Context{
		RunID: "run-1", Attempt: 1, Input: map[string]any{"topic": "rivers"},
		Results: map[string]any{
			"plan":   map[string]any{"queries": []any{"rivers of europe", "longest river"}},
			"search": map[string]any{"results": []any{map[string]any{"url": "a"}}},
			"write":  map[string]any{"text": ""},
		},
	}
	tests := []struct {
		ref   *flows.CallableRef
		extra []any
		want  any
	}{
		{f.Node("plan").Args, nil, map[string]any{"topic": "rivers"}},
		{f.Node("search").Items, nil, []any{"rivers of europe", "longest river"}},
		{f.Node("search").Args, []any{"longest river"}, map[string]any{"q": "longest river"}},
		{f.Node("write").Args, nil, map[string]any{"hits": []any{map[string]any{"url": "a"}}}},
		{f.Node("check").Cond, nil, false},
		{f.Node("give_up").Args, nil, map[string]any{"body": "failed"}},
	}
	for _, tt := range tests {
		got, err := ev.Call(*tt.ref, ctx, tt.extra...)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %#v (%v), want %#v", tt.ref, got, err, tt.want)
		}
	}
	// A run-time error carries the Lua position.
	_, err = ev.Call(*f.Node("check").Cond, flows.Context{RunID: "r", Attempt: 1})
	var ce *flows.CallError
	if !errors.As(err, &ce) || ce.Pos.File != "../../../examples/research.lua" || ce.Pos.Line != 28 {
		t.Fatalf("got %v", err)
	}
}

// One JSON mapping: integers beyond 2^53 are refused, an empty table is
// an object unless array{} says otherwise, mixed tables are refused.
func TestLuaJSONMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args string
		want any    // the constant's value, or
		err  string // the E_SCRIPT message's substance
	}{
		{`{}`, map[string]any{}, ""},
		{`object{}`, map[string]any{}, ""},
		{`{xs = array{}, n = 9007199254740992, f = 1.5, b = false}`, map[string]any{"xs": []any{}, "n": int64(1 << 53), "f": 1.5, "b": false}, ""},
		{`{xs = {1, "two", {3}}}`, map[string]any{"xs": []any{int64(1), "two", []any{int64(3)}}}, ""},
		{`{n = 9007199254740994}`, nil, "beyond 2^53"},
		{`{xs = {1, 2, k = 3}}`, nil, "both list elements and named keys"},
		{`{xs = {[2] = 1}}`, nil, "neither 1..n nor strings"},
		{`{xs = {"a", nil, "c"}}`, nil, "neither 1..n nor strings"},
		{`{xs = {1, 2}, f = (function() return 1, 2 end)()}`, map[string]any{"xs": []any{int64(1), int64(2)}, "f": int64(1)}, ""},
		{`{xs = array{k = 1}}`, nil, "array{} with named keys"},
	}
	for _, tt := range tests {
		src := fmt.Sprintf(`flow{"f", nodes = {task{"a", tool = "t", args = %s}}}`, tt.args)
		if tt.err != "" {
			_, ds := script.Load(flowtest.LuaFile(src))
			if len(ds) != 1 || ds[0].Code != flows.CodeScript || !strings.Contains(ds[0].Message, tt.err) {
				t.Errorf("%s: %s", tt.args, ds)
			}
			continue
		}
		ev, err := script.NewEvaluator(flowtest.LuaFile(src))
		if err != nil {
			t.Errorf("%s: %v", tt.args, err)
			continue
		}
		got, err := ev.Call(flows.CallableRef{Flow: "f", Node: "a", Param: "args"}, flows.Context{})
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %#v (%v), want %#v", tt.args, got, err, tt.want)
		}
	}
}

func TestLuaDiagnostics(t *testing.T) {
	t.Parallel()
	src := `flow{"bad",
  nodes = {
    task{"a", tool = "t",
      next = "nowhere",
      retries = -1},
    task{"a", tool = "t"},
    fanout{"f", items = {1, 2}, tool = "t", args = function(ctx, item, extra, more) end},
  },
}
flow{"bad", nodes = {task{"z", tool = "t"}}}
`
	_, ds := script.Load([]flows.File{
		{Path: "bad.lua", Src: []byte(src)},
		{Path: "script.lua", Src: []byte("\nflow{\"b\", nodes = {branch{\"b\", cond = true, next = \"a\"}}}\n")},
		{Path: "syn.lua", Src: []byte("flow{\"x\" nodes = {}}\n")},
	})
	var got []string
	for _, d := range ds {
		got = append(got, d.String())
	}
	want := []string{
		`bad.lua:4: E_UNKNOWN_NODE: task "a": next = "nowhere" names no node of flow "bad"`,
		`bad.lua:5: E_INVALID: task "a": retries = -1, must not be negative`,
		`bad.lua:6: E_DUPLICATE: flow "bad": node id "a" is already used at bad.lua:3`,
		`bad.lua:7: E_FANOUT_BOUNDS: fanout "f": must declare depth (generations of delegation below the fanout), a positive constant`,
		`bad.lua:7: E_FANOUT_BOUNDS: fanout "f": must declare max_items (the most items it may fan out over), a positive constant`,
		`bad.lua:7: E_FANOUT_BOUNDS: fanout "f": must declare width (children in flight at once), a positive constant`,
		`bad.lua:7: E_INVALID: fanout "f": args is called as args(ctx, item), but the function takes 4 parameters`,
		`bad.lua:7: E_UNREACHABLE: fanout "f": no wire of flow "bad" leads here from the entry node "a"`,
		`bad.lua:10: E_DUPLICATE: flow "bad" is already declared at bad.lua:1`,
		`script.lua:2: E_SCRIPT: branch: unexpected keyword argument "next": a branch has no next; it follows then when cond is truthy, otherwise when not`,
		`syn.lua:1: E_SYNTAX: syntax error near "nodes"`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Unbounded recursion ends with an error, not a crash, and json works.
func TestLuaRecursionAndJSON(t *testing.T) {
	// Concatenation keeps Lua's meaning: numbers, __concat, errors.
	if _, ds := script.Load(flowtest.LuaFile(`local m = setmetatable({}, {__concat = function(a, b) return "m" end})
assert(1 .. 2 == "12" and "a" .. 1.5 == "a1.5" and m .. "x" == "m" and "x" .. m == "m")
assert(not pcall(function() return "a" .. {} end))
` + flowtest.LuaLeaf)); len(ds) > 0 {
		t.Fatalf("concat: %s", ds)
	}
	t.Parallel()
	_, ds := script.Load(flowtest.LuaFile("local function f(n) return f(n + 1) + 1 end\nf(1)\n" + flowtest.LuaLeaf))
	if len(ds) != 1 || ds[0].Code != flows.CodeScript || ds[0].Line != 1 {
		t.Fatalf("recursion: %s", ds)
	}
	src := `flow{"j", nodes = {task{"a", tool = "t", args = function(ctx)
  local v = json.decode(json.encode({xs = array{}, o = object{}, n = 3, s = "x"}))
  return {text = json.encode(v), n = v.n}
end}}}`
	ev, err := script.NewEvaluator(flowtest.LuaFile(src))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ev.Call(flows.CallableRef{Flow: "j", Node: "a", Param: "args"}, flows.Context{})
	want := map[string]any{"text": `{"n":3,"o":{},"s":"x","xs":[]}`, "n": int64(3)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v (%v), want %#v", got, err, want)
	}
}

// One evaluator serves concurrent calls: each runs in its own sandbox.
func TestLuaEvaluatorConcurrent(t *testing.T) {
	t.Parallel()
	ev, err := script.NewEvaluator(flowtest.ReadFiles(t, "../../../examples/research.lua"))
	if err != nil {
		t.Fatal(err)
	}
	ref := *ev.Flow("research").Node("search").Args
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			q := fmt.Sprint("query ", i)
			got, err := ev.Call(ref, flows.Context{RunID: "r", Attempt: 1}, q)
			if err == nil && !reflect.DeepEqual(got, map[string]any{"q": q}) {
				err = fmt.Errorf("got %v for %s", got, q)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !ev.Accepts(*ev.Flow("research").Node("search").Args, 2) || ev.Accepts(*ev.Flow("research").Node("plan").Args, 2) {
		t.Error("Accepts does not follow the Lua functions' parameters")
	}
}

// gopher-lua compiles s = (f(s)), s a function's last parameter, so that
// f receives itself; the sandbox pads every parameter list so that no
// script's parameter is last. .. (a call in the sandbox) in the last named
// field of a table is one value, as in Lua.
func TestLuaParenthesizedCallOnLastParameter(t *testing.T) {
	t.Parallel()
	src := `
local function twice(a, b) return a .. b end
local function grow(s) for i = 1, 3 do s = (twice(s, s)) end return s end
assert(grow("ab") == string.rep("ab", 8), "s = (f(s, s)) on a parameter")
local function cat(p, s) s = s .. s return s end
assert(cat(1, "x") == "xx", ".. on a last parameter")
local function arity(a, b) return select("#", a, b) end
assert(arity(1, 2, 3) == 2, "extra arguments are dropped")
local n = task{"n", tool = "t", next = "a" .. "b"}
flow{"f", nodes = {task{"a", tool = "t", args = function(ctx) return {x = (twice(ctx.input.s, ctx.input.s))} end}}}
` + flowtest.LuaLeaf
	if _, ds := script.Load(flowtest.LuaFile(src)); len(ds) > 0 {
		t.Fatal(ds)
	}
	ev, err := script.NewEvaluator(flowtest.LuaFile(src))
	if err != nil {
		t.Fatal(err)
	}
	ref := flows.CallableRef{Flow: "f", Node: "a", Param: "args"}
	if !ev.Accepts(ref, 1) || ev.Accepts(ref, 2) {
		t.Errorf("args(ctx) is taken as another arity")
	}
	got, err := ev.Call(ref, flows.Context{RunID: "r", Attempt: 1, Input: map[string]any{"s": "ab"}})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"x": "abab"}) {
		t.Errorf("args = %#v, %v", got, err)
	}
	// The pad is not counted: a two-parameter args is still refused.
	_, ds := script.Load(flowtest.LuaFile(`flow{"f", nodes = {task{"a", tool = "t", args = function(ctx, x) return {} end}}}`))
	if len(ds) != 1 || !strings.Contains(ds[0].Message, "takes 2 parameters") {
		t.Errorf("got %s", ds)
	}
}

// on_exhausted is checked in Lua as in Starlark, and reaches the IR.
func TestLuaOnExhausted(t *testing.T) {
	t.Parallel()
	src := `flow{"f", on_exhausted = "park",
  nodes = {
    task{"a", tool = "t", next = "b"},
    task{"b", tool = "t", on_exhausted = "fail", next = "c"},
    task{"c", tool = "t", on_exhausted = "prak"},
  },
}
`
	_, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(src)}})
	want := `x.lua:5: E_INVALID: task "c": on_exhausted = "prak", want "fail"`
	if len(ds) != 1 || !strings.HasPrefix(ds[0].String(), want) {
		t.Fatalf("got %v, want one diagnostic starting %s", ds, want)
	}
	m, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(strings.Replace(src, `"prak"`, `"park"`, 1))}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	f := m.Flows[0]
	if got := []string{f.Node("a").OnExhausted, f.Node("b").OnExhausted, f.Node("c").OnExhausted}; !slices.Equal(got, []string{"park", "fail", "park"}) {
		t.Errorf("on_exhausted %v, want [park fail park]", got)
	}
}

// A fanout's and an agent's on_unknown and unknown_timeout are checked in
// Lua by the same check as a task's, and reach the IR.
func TestLuaOnUnknownFanoutAgent(t *testing.T) {
	t.Parallel()
	src := `flow{"f",
  nodes = {
    fanout{"a", items = {1, 2}, tool = "t", width = 2, depth = 1, max_items = 2, on_unknown = "ask", unknown_timeout = "2h", next = "b"},
    agent{"b", prompt = "p", model = "small", max_turns = 2, on_unknown = "ask", next = "c"},
    agent{"c", prompt = "p", model = "small", max_turns = 2, unknown_timeout = "1h"},
  },
}
`
	_, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(src)}})
	want := `x.lua:5: E_INVALID: agent "c": unknown_timeout = "1h" bounds an unknown wait, which only on_unknown = "ask" parks on`
	if len(ds) != 1 || ds[0].String() != want {
		t.Fatalf("got %v, want %s", ds, want)
	}
	m, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(strings.Replace(src, `unknown_timeout = "1h"`, `on_unknown = "fail"`, 1))}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	f := m.Flows[0]
	if got := []string{f.Node("a").OnUnknown, f.Node("b").OnUnknown, f.Node("c").OnUnknown}; !slices.Equal(got, []string{"ask", "ask", "fail"}) || f.Node("a").UnknownTimeout != 2*time.Hour {
		t.Errorf("on_unknown %v, unknown_timeout %v; want [ask ask fail] and 2h", got, f.Node("a").UnknownTimeout)
	}
}

// on_unknown and unknown_timeout are checked in Lua as in Starlark, and
// reach the IR.
func TestLuaOnUnknown(t *testing.T) {
	t.Parallel()
	src := `flow{"f",
  nodes = {
    task{"a", tool = "t", on_unknown = "ask", unknown_timeout = "1h", next = "b"},
    task{"b", tool = "t", on_unknown = "fail", next = "c"},
    task{"c", tool = "t", on_unknown = "asks"},
  },
}
`
	_, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(src)}})
	want := `x.lua:5: E_INVALID: task "c": on_unknown = "asks", want "fail"`
	if len(ds) != 1 || !strings.HasPrefix(ds[0].String(), want) || !strings.Contains(ds[0].String(), `(did you mean "ask"?)`) {
		t.Fatalf("got %v, want one diagnostic starting %s", ds, want)
	}
	m, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(strings.Replace(src, `"asks"`, `"ask"`, 1))}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	f := m.Flows[0]
	if got := []string{f.Node("a").OnUnknown, f.Node("b").OnUnknown, f.Node("c").OnUnknown}; !slices.Equal(got, []string{"ask", "fail", "ask"}) || f.Node("a").UnknownTimeout != time.Hour {
		t.Errorf("on_unknown %v, unknown_timeout %v; want [ask fail ask] and 1h", got, f.Node("a").UnknownTimeout)
	}
}

// An agent's runaway guard (repeat_limit, error_limit, on_runaway) is
// checked in Lua by the same check as in Starlark, refused at its line,
// and reaches the IR.
func TestLuaAgentRunawayGuard(t *testing.T) {
	t.Parallel()
	src := `flow{"f",
  nodes = {
    agent{"a", prompt = "p", model = "small", max_turns = 2, repeat_limit = 3, error_limit = 4, on_runaway = "fail", next = "b"},
    agent{"b", prompt = "p", model = "small", max_turns = 2, repeat_limit = 0},
  },
}
`
	_, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(src)}})
	want := `x.lua:4: E_AGENT_BOUNDS: agent "b": repeat_limit = 0, must be between 2 and 1000 (leave it out for the default, 5)`
	if len(ds) != 1 || ds[0].String() != want {
		t.Fatalf("got %v, want %s", ds, want)
	}
	m, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(strings.Replace(src, `repeat_limit = 0`, `on_runaway = "ask"`, 1))}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	a, b := m.Flows[0].Node("a"), m.Flows[0].Node("b")
	if a.RepeatLimit != 3 || a.ErrorLimit != 4 || a.OnRunaway != "fail" || b.RepeatLimitOrDefault() != 5 || b.ErrorLimitOrDefault() != 3 || b.OnRunaway != "ask" {
		t.Errorf("a %d %d %q, b %d %d %q", a.RepeatLimit, a.ErrorLimit, a.OnRunaway, b.RepeatLimitOrDefault(), b.ErrorLimitOrDefault(), b.OnRunaway)
	}
}

// A flow's on_budget is the default of its agents; an agent's own wins.
func TestLuaOnBudget(t *testing.T) {
	t.Parallel()
	src := `flow{"f", on_budget = "ask",
  nodes = {
    agent{"a", prompt = "p", model = "small", max_turns = 2, next = "b"},
    agent{"b", prompt = "p", model = "small", max_turns = 2, on_budget = "fail"},
  },
}
`
	m, ds := script.Load([]flows.File{{Path: "x.lua", Src: []byte(src)}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if a, b := m.Flows[0].Node("a").OnBudget, m.Flows[0].Node("b").OnBudget; a != "ask" || b != "fail" {
		t.Errorf("on_budget %q %q, want ask fail", a, b)
	}
}
