package luafront_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
	"github.com/weirhq/weir/flows/script"
)

// The frontier pattern %f, which gopher-lua lacks, works as in Lua 5.1.
func TestLuaPatternFrontier(t *testing.T) {
	t.Parallel()
	src := `assert(string.gsub("THE (quick) fox", "%f[%a]%a+", "W") == "W (W) W", "frontier")` + "\n" + flowtest.LuaLeaf
	if _, ds := script.Load(flowtest.LuaFile(src)); len(ds) > 0 {
		t.Fatal(ds)
	}
}

// Malformed patterns are script errors that say what is wrong.
func TestLuaPatternErrors(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		`string.find("a", "%")`:                 "malformed pattern (ends with '%')",
		`string.find("a", "[a")`:                "malformed pattern (missing ']')",
		`string.find("a", "(a")`:                "unfinished capture",
		`string.find("a", "a)")`:                "invalid pattern capture",
		`string.find("a", "%1")`:                "invalid capture index",
		`string.gsub("a", "a", "%2")`:           "invalid capture index",
		`string.gsub("a", "a", {a = {}})`:       "invalid replacement value (a table)",
		`string.find("a", "%b(")`:               "missing arguments to '%b'",
		`string.find("a", "%fa")`:               "missing '[' after '%f' in pattern",
		`string.find("a", string.rep("(", 33))`: "too many captures",
	} {
		_, ds := script.Load(flowtest.LuaFile("local x = " + expr + "\n" + flowtest.LuaLeaf))
		if len(ds) != 1 || ds[0].Code != flows.CodeScript || ds[0].Line != 1 || !strings.Contains(ds[0].Message, want) {
			t.Errorf("%s: got %s, want %q", expr, ds, want)
		}
	}
}

// A pattern that backtracks without end counts every step against the
// step limit, at load time and in a callable, and so ends with it.
func TestLuaPathologicalPatternHitsStepLimit(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		`string.find(string.rep("a", 40), string.rep("a*", 40) .. "b")`,
		`string.match(string.rep("a", 40), string.rep("a?", 40) .. string.rep("a", 40) .. "b")`,
		`string.gsub(string.rep("a", 40), string.rep("a-", 40) .. "b", "")`,
		`(function() for w in string.gmatch(string.rep("a", 40), string.rep(".*", 40) .. "b") do end end)()`,
		`string.find(string.rep("a", 524288), ".-b")`,
	} {
		_, ds := script.Loader{MaxSteps: 1_000_000}.Load(flowtest.LuaFile("local x = " + expr + "\n" + flowtest.LuaLeaf))
		if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 1 || !strings.Contains(ds[0].Message, "step limit exceeded") {
			t.Errorf("%s: got %s", expr, ds)
		}
	}
	src := `flow{"f", nodes = {task{"a", tool = "t", args = function(ctx)
  return {x = string.find(string.rep("a", 40), string.rep("a*", 40) .. "b")}
end}}}`
	ev, err := script.Loader{MaxSteps: 1_000_000}.NewEvaluator(flowtest.LuaFile(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ev.Call(flows.CallableRef{Flow: "f", Node: "a", Param: "args"}, flows.Context{RunID: "r", Attempt: 1})
	if !errors.Is(err, flows.ErrStepLimit) {
		t.Fatalf("got %v", err)
	}
}

// A pattern's steps are counted exactly: the same work passes or fails
// at the same limit every time, and more work needs more steps.
func TestLuaPatternStepsExact(t *testing.T) {
	t.Parallel()
	load := func(limit uint64, n int) bool {
		src := fmt.Sprintf("local x = string.find(string.rep(\"a\", %d), \"a*b\")\n", n) + flowtest.LuaLeaf
		_, ds := script.Loader{MaxSteps: limit}.Load(flowtest.LuaFile(src))
		return len(ds) == 0
	}
	lo, hi := uint64(1), uint64(1_000_000)
	for lo < hi {
		mid := (lo + hi) / 2
		if load(mid, 100) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo < 100*100/2 {
		t.Fatalf("a quadratic search of 100 bytes took %d steps", lo)
	}
	for range 3 {
		if !load(lo, 100) || load(lo-1, 100) {
			t.Fatalf("the limit of %d steps is not exact", lo)
		}
	}
	if load(lo, 101) {
		t.Fatalf("101 bytes pass under the limit of 100")
	}
}

// Building strings costs steps by the byte: a loop of a few instructions
// that copies a mebibyte each time ends with the step limit after a few
// megabytes, not after a hundred gigabytes. (The fuzz target stalled on
// such loops: each took minutes.)
func TestLuaStringWorkCountsSteps(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`local t = s .. "x"`,
		`local t = string.rep("x", 1000000)`,
		`local t = s:upper()`,
		`local t = s:reverse()`,
		`local t = string.format("%s%s", s, "y")`,
		`local t = table.concat({s})`,
		`local t = s:gsub("y", "")`,
		`local t = s:find("y", 1, true)`,
		`local t = json.encode(s)`,
		`local t = json.decode('"' .. s .. '"')`,
		`local t = s:sub(2)`,
	} {
		src := "local s = string.rep(\"x\", 999999)\nfor i = 1, 100000 do " + body + " end\n" + flowtest.LuaLeaf
		_, ds := script.Loader{MaxSteps: 100_000}.Load(flowtest.LuaFile(src))
		if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 2 || !strings.Contains(ds[0].Message, "step limit exceeded") {
			t.Errorf("%s: got %s", body, ds)
		}
	}
}

// string.byte and unpack return at most LuaMaxResults values, as Lua
// 5.1's stack allows.
func TestLuaResultsCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ok, tooMany string }{
		{`local t = {s:byte(1, 8000)}`, `local t = {s:byte(1, -1)}`},
		{`local t = {unpack(l, 1, 8000)}`, `local t = {unpack(l)}`},
	} {
		pre := "local s = string.rep(\"x\", 8001) local l = {s:byte(1, 8000)} l[8001] = 1\n"
		if _, ds := script.Load(flowtest.LuaFile(pre + c.ok + "\n" + flowtest.LuaLeaf)); len(ds) > 0 {
			t.Errorf("%s: %s", c.ok, ds)
		}
		_, ds := script.Load(flowtest.LuaFile(pre + c.tooMany + "\n" + flowtest.LuaLeaf))
		if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 2 || !strings.Contains(ds[0].Message, "8001 results, more than the limit of 8000") {
			t.Errorf("%s: got %s", c.tooMany, ds)
		}
	}
}
