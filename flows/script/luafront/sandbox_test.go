package luafront

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows/script/front"
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
		L, _ := newLuaSandbox(front.DefaultMaxSteps)
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

// Building strings costs steps by the byte, exactly: a mebibyte built
// costs 16,384 steps more than a byte.
func TestLuaStringChargeIsExact(t *testing.T) {
	t.Parallel()
	steps := func(n int) uint64 {
		L, sc := newLuaSandbox(front.DefaultMaxSteps)
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
		L, _ := newLuaSandbox(front.DefaultMaxSteps)
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
		L, _ := newLuaSandbox(front.DefaultMaxSteps)
		if err := L.DoString("got = " + expr); err == nil {
			t.Errorf("%s: no error, got %q", expr, L.GetGlobal("got").String())
		}
		L.Close()
	}
}
