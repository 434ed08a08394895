package script_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/weirhq/weir/flows/registry"
	"github.com/weirhq/weir/flows/script"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

// evalSetup loads the research example, round-trips its versions through
// JSON as a store would, and builds evaluators from the stored sources only.
type evalBundle struct {
	research, summarize *flows.Version
	evResearch          *script.Evaluator
	evSummarize         *script.Evaluator
}

func evalSetup(t *testing.T) *evalBundle {
	t.Helper()
	reg := registry.NewRegistry(flows.NewMemoryStore(), flowtest.Catalog(t, "testdata/catalog.json"))
	vs, ds, err := reg.Register(t.Context(), flowtest.ReadFiles(t, "../../examples/research.star", "../../examples/summarize.star"))
	if err != nil || len(ds) > 0 {
		t.Fatalf("register: %v %s", err, ds)
	}
	b := &evalBundle{}
	for _, v := range vs {
		stored, _ := flowtest.JSONRoundTrip[flows.Version](t, v)
		ev, err := script.NewEvaluator(stored.Sources)
		if err != nil {
			t.Fatal(err)
		}
		if ev.SourceHash() != stored.Flow.SourceHash {
			t.Fatalf("%s: evaluator hash %s, flow's %s", stored.Flow.Name, ev.SourceHash(), stored.Flow.SourceHash)
		}
		switch stored.Flow.Name {
		case "research":
			b.research, b.evResearch = &stored, ev
		case "summarize":
			b.summarize, b.evSummarize = &stored, ev
		}
	}
	return b
}

func TestEvaluateResearchCallables(t *testing.T) {
	t.Parallel()
	b := evalSetup(t)
	f := b.research.Flow
	ctx := flows.Context{
		RunID:   "run-1",
		Attempt: 1,
		Input:   map[string]any{"topic": "rivers"},
		Results: map[string]any{
			"plan":   map[string]any{"queries": []any{"rivers of europe", "longest river"}},
			"search": map[string]any{"results": []any{map[string]any{"url": "a"}}, "late": []any{}, "sufficient": true},
			"write":  map[string]any{"text": "Rivers are long."},
		},
	}
	tests := []struct {
		name  string
		ref   *flows.CallableRef
		extra []any
		want  any
	}{
		{"task args (a def)", f.Node("plan").Args, nil, map[string]any{"topic": "rivers"}},
		{"fanout items", f.Node("search").Items, nil, []any{"rivers of europe", "longest river"}},
		{"fanout args get the item", f.Node("search").Args, []any{"longest river"}, map[string]any{"q": "longest river"}},
		{"subflow args", f.Node("write").Args, nil, map[string]any{"hits": []any{map[string]any{"url": "a"}}}},
		{"branch cond", f.Node("check").Cond, nil, true},
		{"at-most-once task args", f.Node("publish").Args, nil, map[string]any{"body": "Rivers are long."}},
		{"constant-looking lambda", f.Node("give_up").Args, nil, map[string]any{"body": "failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.ref == nil {
				t.Fatal("no callable ref in the IR")
			}
			got, err := b.evResearch.Call(*tt.ref, ctx, tt.extra...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}

	// The branch follows otherwise when the text is empty.
	empty := flows.Context{Results: map[string]any{"write": map[string]any{"text": ""}}}
	if got, err := b.evResearch.Call(*f.Node("check").Cond, empty); err != nil || got != false {
		t.Errorf("cond on empty text = %v, %v", got, err)
	}

	// summarize's output is what research reads as results["write"].
	out, err := b.evSummarize.Call(*b.summarize.Flow.Output, flows.Context{Results: map[string]any{"draft": map[string]any{"answer": "short"}}})
	if err != nil || !reflect.DeepEqual(out, map[string]any{"text": "short"}) {
		t.Errorf("summarize output = %#v, %v", out, err)
	}
	prompt, err := b.evSummarize.Call(*b.summarize.Flow.Node("draft").Prompt, flows.Context{Input: map[string]any{"hits": []any{map[string]any{"u": 1.0}}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Summarize these search results in five sentences:\n{\"u\":1}"; prompt != want {
		t.Errorf("summarize draft prompt = %#v, want %#v", prompt, want)
	}
}

func evalSource(t *testing.T, text string) (*script.Evaluator, *flows.Flow) {
	t.Helper()
	files := []flows.File{flowtest.Src("e.star", text)}
	m, ds := script.Load(files)
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	ev, err := script.NewEvaluator(files)
	if err != nil {
		t.Fatal(err)
	}
	return ev, m.Flows[0]
}

func TestEvaluateContextAndConstants(t *testing.T) {
	t.Parallel()
	ev, f := evalSource(t, `
def show(ctx):
    return {
        "run": ctx.run_id, "attempt": ctx.attempt, "flow": ctx.flow, "node": ctx.node,
        "keys": [k for k in ctx.input], "n": ctx.input["n"] + 1, "ratio": ctx.input["r"] * 2,
        "none": ctx.results.get("missing"), "attrs": dir(ctx),
    }

flow(name = "c", nodes = [
    task("show", tool = "t.idem", args = show, next = "fan"),
    fanout("fan", tool = "t.idem", items = ["x", "y"], args = {"fixed": [1, 2.5, None, True]},
        width = 1, depth = 1, max_items = 2, next = "b",
        reduce = lambda ctx, results: {"count": len(results), "first": results[0]},
        mature = lambda ctx, item, result: result["ok"] and item != "skip"),
    branch("b", cond = False, then = "show", otherwise = None, max_visits = 2),
])
`)
	got, err := ev.Call(*f.Node("show").Args, flows.Context{
		RunID: "r-9", Attempt: 3,
		Input: map[string]any{"n": 41.0, "r": 0.25, "b": 1, "a": 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"run": "r-9", "attempt": int64(3), "flow": "c", "node": "show",
		"keys": []any{"a", "b", "n", "r"}, // sorted: the same order on every evaluation
		"n":    int64(42), "ratio": 0.5, "none": nil,
		"attrs": []any{"attempt", "flow", "input", "node", "results", "run_id"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}

	items, err := ev.Call(*f.Node("fan").Items, flows.Context{})
	if err != nil || !reflect.DeepEqual(items, []any{"x", "y"}) {
		t.Errorf("constant items = %#v, %v", items, err)
	}
	args, err := ev.Call(*f.Node("fan").Args, flows.Context{}, "x")
	if err != nil || !reflect.DeepEqual(args, map[string]any{"fixed": []any{int64(1), 2.5, nil, true}}) {
		t.Errorf("constant args = %#v, %v", args, err)
	}
	red, err := ev.Call(*f.Node("fan").Reduce, flows.Context{}, []any{map[string]any{"ok": true}, map[string]any{"ok": false}})
	if err != nil || !reflect.DeepEqual(red, map[string]any{"count": int64(2), "first": map[string]any{"ok": true}}) {
		t.Errorf("reduce = %#v, %v", red, err)
	}
	for _, c := range []struct {
		item string
		ok   bool
		want bool
	}{{"a", true, true}, {"a", false, false}, {"skip", true, false}} {
		got, err := ev.Call(*f.Node("fan").Mature, flows.Context{}, c.item, map[string]any{"ok": c.ok})
		if err != nil || got != c.want {
			t.Errorf("mature(%q, ok=%v) = %v, %v; want %v", c.item, c.ok, got, err, c.want)
		}
	}
	cond, err := ev.Call(*f.Node("b").Cond, flows.Context{})
	if err != nil || cond != false {
		t.Errorf("constant cond = %v, %v", cond, err)
	}
}

func TestEvaluationErrors(t *testing.T) {
	t.Parallel()
	ev, f := evalSource(t, `
def deep(ctx):
    return ctx.input["missing"]

def mutate(ctx):
    ctx.input["x"] = 1
    return {}

def spin(ctx):
    n = 0
    for i in range(1000000):
        for j in range(1000000):
            n += 1
    return {}

flow(name = "e", nodes = [
    task("missing", tool = "t.idem", args = deep, next = "mutate"),
    task("mutate", tool = "t.idem", args = mutate, next = "spin"),
    task("spin", tool = "t.idem", args = spin, next = "shape"),
    task("shape", tool = "t.idem", args = lambda ctx: [1], next = "nojson"),
    task("nojson", tool = "t.idem", args = lambda ctx: {"f": deep}, next = "declare"),
    task("declare", tool = "t.idem", args = lambda ctx: {"n": task("x", tool = "t.idem")}, next = "items"),
    fanout("items", tool = "t.idem", items = lambda ctx: "abc", width = 1, depth = 1, max_items = 3),
])
`)
	tests := []struct {
		node, param string
		pos         string
		msg         string
		stepLimit   bool
	}{
		{"missing", "args", "e.star:3:21", `key "missing" not in dict`, false},
		{"mutate", "args", "e.star:6:14", "frozen", false},
		{"spin", "args", "e.star:12:9", "step limit exceeded", true},
		{"shape", "args", "e.star:20:36", "args must return a dict (the input), got list", false},
		{"nojson", "args", "e.star:21:37", "function has no JSON form", false},
		{"declare", "args", "e.star:22:63", "flows are declared while the script loads", false},
		{"items", "items", "e.star:23:38", "items must return a list, got string", false},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			t.Parallel()
			_, err := ev.Call(flows.CallableRef{Flow: "e", Node: tt.node, Param: tt.param}, flows.Context{Input: map[string]any{"x": 0}})
			var ce *flows.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *CallError", err)
			}
			if ce.Pos.String() != tt.pos || !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("got %s %q, want %s containing %q", ce.Pos, ce.Msg, tt.pos, tt.msg)
			}
			if errors.Is(err, flows.ErrStepLimit) != tt.stepLimit {
				t.Errorf("errors.Is(err, ErrStepLimit) = %v", !tt.stepLimit)
			}
		})
	}
	_ = f

	if _, err := ev.Call(flows.CallableRef{Flow: "e", Node: "nope", Param: "args"}, flows.Context{}); !errors.Is(err, script.ErrNoCallable) {
		t.Errorf("unknown ref: %v", err)
	}
	if _, err := ev.Call(flows.CallableRef{Flow: "e", Node: "missing", Param: "args"}, flows.Context{Input: func() {}}); err == nil {
		t.Error("an input with no JSON form was accepted")
	}
}

func TestNewEvaluatorRefusesSourcesThatNoLongerLoad(t *testing.T) {
	t.Parallel()
	if _, err := script.NewEvaluator([]flows.File{flowtest.Src("x.star", "fail(\"gone\")")}); err == nil || !strings.Contains(err.Error(), "E_SCRIPT") {
		t.Errorf("got %v", err)
	}
	if _, err := script.NewEvaluator([]flows.File{flowtest.Src("x.star", "x = (")}); err == nil || !strings.Contains(err.Error(), "E_SYNTAX") {
		t.Errorf("got %v", err)
	}
}

// TestEvaluatorIsSafeForConcurrentUse runs many goroutines against one
// evaluator; with -race it also shows that no shared state is written.
func TestEvaluatorIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	b := evalSetup(t)
	f := b.research.Flow
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				q := fmt.Sprintf("q%d-%d", g, i)
				got, err := b.evResearch.Call(*f.Node("search").Args, flows.Context{RunID: q}, q)
				if err != nil {
					errs <- err
					return
				}
				if got.(map[string]any)["q"] != q {
					errs <- fmt.Errorf("goroutine %d got %v for %s", g, got, q)
					return
				}
				ctx := flows.Context{Input: map[string]any{"topic": q}}
				got, err = b.evResearch.Call(*f.Node("plan").Args, ctx)
				if err != nil || got.(map[string]any)["topic"] != q {
					errs <- fmt.Errorf("plan args %v, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
