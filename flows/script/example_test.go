package script_test

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/registry"
	"github.com/weirhq/weir/flows/script"
)

func ExampleCheck() {
	files := []flows.File{{Path: "greet.star", Src: []byte(`
flow(name = "greet", nodes = [
    task("hello", tool = "mail.send", args = lambda ctx: {"to": ctx.input["who"]}, next = "bye"),
])
`)}}
	tools := flows.MapCatalog{"mail.send": {Name: "mail.send", Idempotent: false}}
	_, ds := script.Check(files, tools)
	fmt.Print(ds)
	// Output:
	// greet.star:3:5: E_AT_MOST_ONCE: task "hello": tool "mail.send" is not idempotent; declare at_most_once = True to accept that an attempt whose outcome is unknown takes the error wire instead of running again
	// greet.star:3:84: E_UNKNOWN_NODE: task "hello": next = "bye" names no node of flow "greet"
}

func ExampleEvaluator_Call() {
	// What the runtime does: take a stored version, build an evaluator
	// from its sources (once per source hash), and call a node's args.
	reg := registry.NewRegistry(flows.NewMemoryStore(), flows.MapCatalog{
		"web.search": {Name: "web.search", Idempotent: true},
	})
	_, ds, err := reg.Register(context.Background(), []flows.File{{Path: "search.star", Src: []byte(`
flow(name = "search", nodes = [
    fanout("all", items = lambda ctx: ctx.input["queries"], tool = "web.search",
        args = lambda ctx, item: {"q": item, "run": ctx.run_id}, width = 2, depth = 1, max_items = 10),
])
`)}})
	if err != nil || len(ds) > 0 {
		panic(fmt.Sprint(err, ds))
	}
	v, _ := reg.Latest(context.Background(), "search")
	ev, err := script.NewEvaluator(v.Sources)
	if err != nil {
		panic(err)
	}
	node := v.Flow.Node("all")
	ctx := flows.Context{RunID: "run-7", Attempt: 1, Input: map[string]any{"queries": []any{"rivers", "lakes"}}}
	items, _ := ev.Call(*node.Items, ctx)
	for _, item := range items.([]any) {
		args, _ := ev.Call(*node.Args, ctx, item)
		fmt.Println(args)
	}
	// Output:
	// map[q:rivers run:run-7]
	// map[q:lakes run:run-7]
}
