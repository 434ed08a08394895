package flows

import (
	"errors"
	"strings"
	"testing"
	"time"
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
			_, ds := Load([]File{src("bomb.star", tt.src)})
			if len(ds) != 1 || ds[0].Code != CodeScriptLimit || !strings.Contains(ds[0].Message, tt.msg) {
				t.Fatalf("got %q, want one E_SCRIPT_LIMIT containing %q", ds, tt.msg)
			}
			t.Logf("refused in %s", time.Since(start))
		})
	}
}

func TestNestingLimitsKeepOrdinaryValues(t *testing.T) {
	t.Parallel()
	_, ds := Load([]File{src("ok.star", `
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
	ev, err := NewEvaluator([]File{src("e.star", `
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
	for node, want := range map[string]Limit{"a": LimitDepth, "b": LimitSteps} {
		_, err := ev.Call(CallableRef{Flow: "f", Node: node, Param: "args"}, Context{RunID: "r"})
		if !errors.Is(err, ErrScriptLimit) || LimitOf(err) != want {
			t.Errorf("node %s: got %v (limit %q), want limit %s", node, err, LimitOf(err), want)
		}
	}
}
