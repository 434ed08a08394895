package script_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
)

// projSrc declares one task per args shape: those registration proves are
// projections, and lookalikes that are not (a global, a call, a float, a
// name other than the lambda's ctx, ctx whole).
const projSrc = `
LIMIT = 3
def helper(ctx):
    return {"x": 1}

flow(name = "p", nodes = [
    task("lit",    tool = "t.x", args = {"a": 1, "b": [True, None, "s"]}, next = "fields"),
    task("fields", tool = "t.x", args = lambda ctx: {"run": ctx.run_id, "attempt": ctx.attempt, "k": "v", "n": 7}, next = "input"),
    task("input",  tool = "t.x", args = lambda ctx: {"p": ctx.input["p"], "deep": ctx.input["a"]["b"][1], "last": ctx.input["l"][-1] if False else ctx.input["l"][0]}, next = "index"),
    task("index",  tool = "t.x", args = lambda c: {"p": c.input["p"], "l": [c.input["l"][1], c.input["l"][0], c.input["l"][-1], c.input["l"][-(2)]], "d": {"q": c.input["a"]}}, next = "result"),
    task("result", tool = "t.x", args = lambda ctx: {"r": ctx.results["input"]["p"], "whole": ctx.results["lit"]}, next = "global"),
    task("global", tool = "t.x", args = lambda ctx: {"n": LIMIT}, next = "call"),
    task("call",   tool = "t.x", args = lambda ctx: {"n": len(ctx.input)}, next = "float"),
    task("float",  tool = "t.x", args = lambda ctx: {"n": 1.5}, next = "whole"),
    task("whole",  tool = "t.x", args = lambda ctx: {"all": ctx.input}, next = "named"),
    task("named",  tool = "t.x", args = helper, next = "truth"),
    task("truth",  tool = "t.x", args = lambda ctx: {"b": True}),
])
`

// Registration compiles exactly the projections: the literal, the
// lambdas of literals and ctx fields and indexes; not the lambdas that
// read a global, call a function, hold a float literal or a conditional,
// pass ctx.input whole, nor a def, nor True (a name, which a script may
// bind to anything).
func TestProjectionsAreProvenAtRegistration(t *testing.T) {
	t.Parallel()
	_, f := evalSource(t, projSrc)
	got := map[string]bool{}
	for ref := range f.Projections {
		got[strings.Split(ref, ".")[1]] = true
	}
	want := map[string]bool{"lit": true, "fields": true, "index": true, "result": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("projections of %v, want %v", got, want)
	}
}

// randomJSON is a JSON value of the kinds that reach a callable, with the
// numbers whose conversion is special: whole floats, exponents, integers
// past 2^53 and past 64 bits, numbers past float64.
func randomJSON(rng *rand.Rand, depth int) string {
	nums := []string{"0", "-0", "1", "1.0", "1.5", "1e2", "-3", "9007199254740993", "9007199254740992.0", "12345678901234567890", "1e400", "2.5e-3", "123456789012345678901234567890"}
	switch k := rng.IntN(7); {
	case depth > 3 || k == 0:
		return nums[rng.IntN(len(nums))]
	case k == 1:
		return fmt.Sprintf("%q", []string{"a", "", "ü", "<x>"}[rng.IntN(4)])
	case k == 2:
		return []string{"true", "false", "null"}[rng.IntN(3)]
	case k == 3 || k == 4:
		var parts []string
		for range rng.IntN(4) {
			parts = append(parts, randomJSON(rng, depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	var parts []string
	for _, key := range []string{"p", "a", "b", "l", "q"}[:rng.IntN(6)] {
		parts = append(parts, fmt.Sprintf("%q:%s", key, randomJSON(rng, depth+1)))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// A projection evaluated natively gives exactly what the script gives,
// and says it cannot wherever the script fails: over random inputs and
// results holding every number the conversions treat specially, missing
// keys, indexes out of range and values of the wrong kind.
func TestProjectionsEvaluateAsTheScript(t *testing.T) {
	t.Parallel()
	ev, f := evalSource(t, projSrc)
	rng := rand.New(rand.NewPCG(1, 2))
	native, fallback := 0, 0
	for i := range 3000 {
		input := json.RawMessage(randomJSON(rng, 0))
		c := flows.Context{RunID: "r1", Attempt: 1 + i%3, Input: input, Results: map[string]any{
			"input": json.RawMessage(randomJSON(rng, 0)), "lit": json.RawMessage(randomJSON(rng, 0))}}
		if i%7 == 0 {
			c.Input = nil
		}
		for refName, p := range f.Projections {
			node := strings.Split(refName, ".")[1]
			ref := flows.CallableRef{Flow: "p", Node: node, Param: "args"}
			want, err := ev.Call(ref, c)
			got, ok := p.Eval(c)
			if !ok {
				fallback++
				continue
			}
			native++
			if err != nil {
				t.Fatalf("%s with input %s: native %v, the script fails: %v", node, input, got, err)
			}
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			if string(wb) != string(gb) {
				t.Fatalf("%s with input %s results %v: native %s, script %s", node, input, c.Results, gb, wb)
			}
		}
	}
	if native < 3000 || fallback < 100 {
		t.Fatalf("%d evaluated natively, %d left to the script: the cases do not cover both", native, fallback)
	}
}
