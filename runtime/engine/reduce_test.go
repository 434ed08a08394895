package engine

import (
	"context"
	"encoding/json"
	"testing"
)

const reduceItemsSrc = `
flow(name = "double", nodes = [
    task("d", tool = "testkit.echo", args = lambda ctx: {"twice": ctx.input["v"] * 2}),
])

flow(name = "fan_items", nodes = [
    fanout("fan", items = lambda ctx: ["a", "b", "c"], tool = "testkit.echo",
           args = lambda ctx, item: {"len": len(item)}, width = 3, depth = 1, max_items = 3,
           reduce = lambda ctx, results, items: {items[i]: results[i]["len"] for i in range(len(items))}),
])

flow(name = "fan_items_flows", nodes = [
    fanout("fan", items = lambda ctx: [3, 1, 2], flow = "double",
           args = lambda ctx, item: {"v": item}, width = 2, depth = 1, max_items = 3,
           reduce = lambda ctx, results, items: [[items[i], results[i]["twice"]] for i in range(len(items))]),
])
`

// reduce(ctx, results, items) sees the item each result came from; the
// parent's item_done events carry its attempt.
func TestReduceSeesEachResultsItem(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, reduceItemsSrc)
	run := b.waitTerminal(t, b.start(t, "fan_items", `{}`, ""))
	var out struct {
		Results map[string]int
	}
	if err := json.Unmarshal(run.Output, &out); err != nil || len(out.Results) != 3 || out.Results["a"] != 1 {
		t.Fatalf("output %s (%v): want each item keyed to its result", run.Output, err)
	}
	evs, err := b.eng.Events(context.Background(), "alice", run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, ev := range evs {
		if ev.Type == evItemDone {
			done++
			if ev.Attempt != run.Attempt || ev.Attempt == 0 {
				t.Errorf("item_done at attempt %d, the run is at attempt %d", ev.Attempt, run.Attempt)
			}
		}
	}
	if done != 3 {
		t.Errorf("%d item_done events, want 3", done)
	}

	run = b.waitTerminal(t, b.start(t, "fan_items_flows", `{}`, ""))
	var pairs struct {
		Results [][2]int
	}
	if err := json.Unmarshal(run.Output, &pairs); err != nil || len(pairs.Results) != 3 {
		t.Fatalf("output %s (%v)", run.Output, err)
	}
	for _, p := range pairs.Results {
		if p[1] != 2*p[0] {
			t.Errorf("result %d paired with item %d", p[1], p[0])
		}
	}
}
