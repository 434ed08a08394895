package script

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	lua "github.com/yuin/gopher-lua"
)

// The sandbox's pattern functions answer as gopher-lua's own do, on
// every kind of pattern item (where gopher-lua answers no value, they
// answer nil, as Lua does).
func TestLuaPatternsMatchGopherLua(t *testing.T) {
	t.Parallel()
	exprs := []string{
		`string.find("hello world", "o w")`,
		`string.find("hello world", "o", 6)`,
		`string.find("hello world", "l+")`,
		`string.find("hello", "l", -2)`,
		`string.find("hello", "xyz")`,
		`string.find("a.b", ".", 1, true)`,
		`string.find("key = value", "(%w+)%s*=%s*(%w+)")`,
		`string.find("hello", "()ll()")`,
		`string.find("", "")`,
		`string.match("  trim me  ", "^%s*(.-)%s*$")`,
		`string.match("2024-01-02", "(%d+)-(%d+)-(%d+)")`,
		`string.match("abc", "^b")`,
		`string.match("abc", "c$")`,
		`string.match("a$c", "a$c")`,
		`string.match("THE (quick) fox", "%((%a+)%)")`,
		`string.match("f(a(b)c)d", "%b()")`,
		`string.match("hello", "h?ello")`,
		`string.match("ello", "h?ello")`,
		`string.match("aaa", "a-b")`,
		`string.match("aaab", "a-b")`,
		`string.match("x=1, y=2", "[^,]+")`,
		`string.match("ABC def", "[%u]+")`,
		`string.match("a-b", "[a%-]+")`,
		`string.match("0x1F", "0[xX](%x+)")`,
		`string.match("tab\there", "%c")`,
		`string.match("punct!?", "%p+")`,
		`string.match("abab", "(ab)%1")`,
		`string.match("x", "[]x]")`,
		`string.match("hello", ".-l")`,
		`string.match("hello", "[a-f]")`,
		`string.match("hello", "[^a-f]+")`,
		`string.match("hello", "%W")`,
		`string.match("hello", "l", 4)`,
		`string.gsub("hello world", "o", "0")`,
		`string.gsub("hello world", "(%w+)", "<%1>")`,
		`string.gsub("hello world", "%w+", "%0 %0", 1)`,
		`string.gsub("abc", "", "-")`,
		`string.gsub("abc", "^a", "A")`,
		`string.gsub("hello", "l", {l = "L"})`,
		`string.gsub("hello", "(h)(e)", function(a, b) return b .. a end)`,
		`string.gsub("hello", "l", function() return nil end)`,
		`string.gsub("hello", "l", false and 1 or "%%")`,
		`string.gsub("a,b,,c", ",", ";", 2)`,
		`string.gsub("abc", "b*", "x")`,
		`(function() local t = {} for w in string.gmatch("one two  three", "%a+") do t[#t+1] = w end return table.concat(t, "|") end)()`,
		`(function() local t = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do t[#t+1] = k .. v end return table.concat(t, "|") end)()`,
		`(function() local t = {} for w in string.gmatch("abc", "") do t[#t+1] = "[" .. w .. "]" end return table.concat(t) end)()`,
		`(function() local t = {} for p in string.gmatch("abc", "()") do t[#t+1] = p end return table.concat(t, ",") end)()`,
		`("x y"):gsub("%s", "_")`,
	}
	run := func(L *lua.LState, expr string) string {
		src := `local function pack(...) local t = {} for i = 1, select("#", ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, "|") end
result = pack(` + expr + `)`
		if err := L.DoString(src); err != nil {
			return "error: " + err.Error()
		}
		return L.GetGlobal("result").String()
	}
	for _, expr := range exprs {
		ref := lua.NewState()
		want := run(ref, expr)
		ref.Close()
		L, _ := newLuaSandbox(DefaultMaxSteps)
		got := run(L, expr)
		L.Close()
		if want == "" { // gopher-lua returns nothing where Lua returns nil
			want = "nil"
		}
		if got != want || strings.HasPrefix(want, "error") {
			t.Errorf("%s = %q, gopher-lua says %q", expr, got, want)
		}
	}
}

// The frontier pattern %f, which gopher-lua lacks, works as in Lua 5.1.
func TestLuaPatternFrontier(t *testing.T) {
	t.Parallel()
	src := `assert(string.gsub("THE (quick) fox", "%f[%a]%a+", "W") == "W (W) W", "frontier")` + "\n" + luaLeaf
	if _, ds := Load(luaFile(src)); len(ds) > 0 {
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
		_, ds := Load(luaFile("local x = " + expr + "\n" + luaLeaf))
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
		_, ds := Loader{MaxSteps: 1_000_000}.Load(luaFile("local x = " + expr + "\n" + luaLeaf))
		if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 1 || !strings.Contains(ds[0].Message, "step limit exceeded") {
			t.Errorf("%s: got %s", expr, ds)
		}
	}
	src := `flow{"f", nodes = {task{"a", tool = "t", args = function(ctx)
  return {x = string.find(string.rep("a", 40), string.rep("a*", 40) .. "b")}
end}}}`
	ev, err := Loader{MaxSteps: 1_000_000}.NewEvaluator(luaFile(src))
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
		src := fmt.Sprintf("local x = string.find(string.rep(\"a\", %d), \"a*b\")\n", n) + luaLeaf
		_, ds := Loader{MaxSteps: limit}.Load(luaFile(src))
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
		src := "local s = string.rep(\"x\", 999999)\nfor i = 1, 100000 do " + body + " end\n" + luaLeaf
		_, ds := Loader{MaxSteps: 100_000}.Load(luaFile(src))
		if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 2 || !strings.Contains(ds[0].Message, "step limit exceeded") {
			t.Errorf("%s: got %s", body, ds)
		}
	}
	// The charge is exact: a mebibyte built costs 16,384 steps more than
	// a byte.
	steps := func(n int) uint64 {
		L, sc := newLuaSandbox(DefaultMaxSteps)
		defer L.Close()
		if err := L.DoString(fmt.Sprintf("local t = string.rep(\"x\", %d)", n)); err != nil {
			t.Fatal(err)
		}
		return sc.steps
	}
	if d := steps(1<<20) - steps(1); d != 1<<20/LuaBytesPerStep {
		t.Errorf("a mebibyte costs %d steps more than a byte", d)
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
		if _, ds := Load(luaFile(pre + c.ok + "\n" + luaLeaf)); len(ds) > 0 {
			t.Errorf("%s: %s", c.ok, ds)
		}
		_, ds := Load(luaFile(pre + c.tooMany + "\n" + luaLeaf))
		if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 2 || !strings.Contains(ds[0].Message, "8001 results, more than the limit of 8000") {
			t.Errorf("%s: got %s", c.tooMany, ds)
		}
	}
}

// string.format formats one directive at a time (so that it can refuse a
// result past LuaMaxStringBytes before building it) and still writes what
// gopher-lua's wrote; fmt's '*' and "[n]", which let one directive take
// other arguments or reuse one, are not Lua and are refused.
func TestLuaStringFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ expr, want string }{
		{`string.format("%5.2f|%-4d|%x|%%|%s|%q", 3.14159, 7, 255, "a b", "q\"")`, ` 3.14|7   |ff|%|a b|"q\""`},
		{`string.format("no directives")`, `no directives`},
		{`string.format("%s and %s", "one", 2, "extra")`, `one and 2`},
		{`string.format("%d%%", "42")`, `42%`},
		{`string.format("%.3s", string.rep("x", 1048576))`, `xxx`},
	} {
		L, _ := newLuaSandbox(DefaultMaxSteps)
		if err := L.DoString("got = " + c.expr); err != nil {
			t.Errorf("%s: %v", c.expr, err)
		} else if got := L.GetGlobal("got").String(); got != c.want {
			t.Errorf("%s = %q, want %q", c.expr, got, c.want)
		}
		L.Close()
	}
	for _, expr := range []string{
		`string.format("%[1]s%[1]s", "a")`,
		`string.format("%*d", 1000000, 1)`,
		`string.format("%5", 1)`,
		`string.format("%s")`,
	} {
		L, _ := newLuaSandbox(DefaultMaxSteps)
		if err := L.DoString("got = " + expr); err == nil {
			t.Errorf("%s: no error, got %q", expr, L.GetGlobal("got").String())
		}
		L.Close()
	}
}
