package script

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

// Scripts that would overflow the Go stack or run for minutes in one step
// are stopped by a named limit instead, at registration and at run time.
func TestNestingLimitsStopBombs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		msg  string
	}{
		// Before the guard: fatal error: stack overflow (the process dies).
		{"json.decode of deep JSON", `x = json.decode("[" * 50000000)`, "script limit (depth): json.decode:"},
		{"json.decode of deep objects", `x = json.decode("{\"a\":" * 1000 + "1" + "}" * 1000)`, "script limit (depth)"},
		// Before the guard: quadratic, minutes for one step.
		{"str of a deep list", "x = []\nfor i in range(200000):\n    x = [x]\ny = str(x)", "script limit (depth): str:"},
		{"repr of a deep dict", "x = {}\nfor i in range(1000):\n    x = {\"k\": x}\ny = repr(x)", "script limit (depth): repr:"},
		{"print of a deep tuple", "x = ()\nfor i in range(1000):\n    x = (x,)\nprint(x)", "script limit (depth): print:"},
		{"json.encode of a deep list", "x = []\nfor i in range(1000):\n    x = [x]\ny = json.encode(x)", "script limit (depth): json.encode:"},
		{"formatting a wide value costs steps", "x = [list(range(1000)) for i in range(2000)]\ny = [str(x) for i in range(10)]", "script limit (steps)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, ds := Load([]flows.File{flowtest.Src("bomb.star", tt.src)})
			if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || !strings.Contains(ds[0].Message, tt.msg) {
				t.Fatalf("got %q, want one E_SCRIPT_LIMIT containing %q", ds, tt.msg)
			}
			t.Logf("refused in %s", time.Since(start))
		})
	}
}

func TestNestingLimitsKeepOrdinaryValues(t *testing.T) {
	t.Parallel()
	_, ds := Load([]flows.File{flowtest.Src("ok.star", `
x = []
x.append(x)
a = str(x)
b = json.decode(json.encode({"a": [1, {"b": "[[[["}], "c": '"[\\['}))
c = repr([[1, 2], (3,), {"k": [1]}])
d = json.indent(json.encode(b))
print(a, b, c, d)
`)})
	if len(ds) != 0 {
		t.Fatalf("got %q", ds)
	}
}

func TestCallableLimitsAreScriptLimits(t *testing.T) {
	t.Parallel()
	ev, err := NewEvaluator([]flows.File{flowtest.Src("e.star", `
def deep(ctx):
    return {"x": json.decode("[" * 5000)}
def spin(ctx):
    n = 0
    for i in range(1000000):
        for j in range(1000000):
            n += 1
    return {}
flow(name = "f", nodes = [task("a", tool = "t.x", args = deep, next = "b"), task("b", tool = "t.x", args = spin)])
`)})
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]flows.Limit{"a": flows.LimitDepth, "b": flows.LimitSteps} {
		_, err := ev.Call(flows.CallableRef{Flow: "f", Node: node, Param: "args"}, flows.Context{RunID: "r"})
		if !errors.Is(err, flows.ErrScriptLimit) || flows.LimitOf(err) != want {
			t.Errorf("node %s: got %v (limit %q), want limit %s", node, err, flows.LimitOf(err), want)
		}
	}
}

// Lua reports every limit of its sandbox with the codes Starlark uses:
// E_SCRIPT_LIMIT naming the limit at registration, a CallError with Limit
// set at run time.
func TestLuaLimitsAreScriptLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		expr  string // a Lua expression that exceeds the limit
		limit flows.Limit
		msg   string
	}{
		{"instructions", `(function() while true do end end)()`, flows.LimitSteps, "script limit (steps): step limit exceeded: the script ran more than 100000 steps"},
		{"pattern budget", `string.find(string.rep("a", 40), string.rep("a*", 40) .. "b")`, flows.LimitSteps, "script limit (steps)"},
		{"bytes charged", `(function() local s = string.rep("a", 1000000) for i = 1, 1000 do s = s:upper() end end)()`, flows.LimitSteps, "script limit (steps)"},
		{"string.rep size", `string.rep("ab", 1048576)`, flows.LimitSize, "script limit (size): string.rep: the result would be 2097152 bytes"},
		{"concat size", `string.rep("a", 1048576) .. "b"`, flows.LimitSize, "script limit (size): ..:"},
		{"table.concat size", `table.concat({string.rep("a", 1048576), "b"})`, flows.LimitSize, "script limit (size): table.concat:"},
		{"gsub size", `string.gsub("aa", "a", string.rep("b", 600000))`, flows.LimitSize, "script limit (size): string.gsub:"},
		{"unpack results", `unpack({}, 1, 8001)`, flows.LimitSize, "script limit (size): unpack: 8001 results, more than the limit of 8000"},
		{"string.byte results", `string.byte(string.rep("a", 8001), 1, -1)`, flows.LimitSize, "script limit (size): byte: 8001 results"},
		{"json.decode depth", `json.decode(string.rep("[", 50000))`, flows.LimitDepth, "script limit (depth): json.decode: the JSON is nested more than 256 deep"},
		{"json.encode depth", `(function() local x = {} for i = 1, 300 do x = {x} end return json.encode(x) end)()`, flows.LimitDepth, "script limit (depth): json.encode:"},
		{"pattern depth", `string.find(string.rep("a", 300), string.rep("a?", 201))`, flows.LimitDepth, "script limit (depth): string.find: pattern too complex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := Loader{MaxSteps: 100_000}.Load(flowtest.LuaFile("local x = " + tt.expr + "\n" + flowtest.LuaLeaf))
			if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].Line != 1 || !strings.Contains(ds[0].Message, tt.msg) {
				t.Fatalf("registration: got %s, want one E_SCRIPT_LIMIT at line 1 containing %q", ds, tt.msg)
			}
			ev, err := Loader{MaxSteps: 100_000}.NewEvaluator(flowtest.LuaFile(`flow{"f", nodes = {task{"a", tool = "t", args = function(ctx)
  local x = ` + tt.expr + `
  return {}
end}}}`))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ev.Call(flows.CallableRef{Flow: "f", Node: "a", Param: "args"}, flows.Context{RunID: "r", Attempt: 1})
			var ce *flows.CallError
			if !errors.Is(err, flows.ErrScriptLimit) || flows.LimitOf(err) != tt.limit || !errors.As(err, &ce) || ce.Pos.Line != 2 {
				t.Fatalf("run time: got %v (limit %q), want limit %s at line 2", err, flows.LimitOf(err), tt.limit)
			}
		})
	}
}

// Only a limit the sandbox raised is a limit: a script's own error with
// the same words is E_SCRIPT, and a limit caught by pcall does not end
// the script.
func TestLuaLimitsCannotBeForged(t *testing.T) {
	t.Parallel()
	_, ds := Load(flowtest.LuaFile(`error("script limit (size): string.rep: the result would be 2097152 bytes, more than the limit of 1048576 (LuaMaxStringBytes)")` + "\n" + flowtest.LuaLeaf))
	if len(ds) != 1 || ds[0].Code != flows.CodeScript {
		t.Fatalf("forged: got %s, want one E_SCRIPT", ds)
	}
	_, ds = Load(flowtest.LuaFile(`local ok, err = pcall(string.rep, "ab", 1048576)
assert(not ok and string.find(err, "script limit (size)", 1, true), err)
` + flowtest.LuaLeaf))
	if len(ds) != 0 {
		t.Fatalf("caught: got %s", ds)
	}
	ev, err := NewEvaluator(flowtest.LuaFile(`flow{"f", nodes = {task{"a", tool = "t", args = function(ctx)
  local ok, err = pcall(string.rep, "ab", 1048576)
  error(err .. "!")
end}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Call(flows.CallableRef{Flow: "f", Node: "a", Param: "args"}, flows.Context{RunID: "r"}); err == nil || flows.LimitOf(err) != "" {
		t.Fatalf("a different error after a caught limit: got %v (limit %q), want no limit", err, flows.LimitOf(err))
	}
}
