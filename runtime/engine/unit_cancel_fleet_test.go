package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// cancelElsewhere records the cancel of every run in st, as another
// daemon of a fleet would, when the engine calls node's tool: this engine
// has not heard of it when the step goes on.
type cancelElsewhere struct {
	Tools
	t    *testing.T
	st   store.Store
	node string
}

func (c *cancelElsewhere) wrap(t Tools) { c.Tools = t }

func (c *cancelElsewhere) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	if req.Node == c.node {
		err := c.st.Update(context.Background(), func(tx store.Tx) error {
			runs, err := tx.RunList(store.RunListParams{})
			for _, r := range runs {
				if err == nil && !r.Phase.Terminal() {
					r.CancelRequested = true
					err = tx.RunUpdate(r)
				}
			}
			return err
		})
		if err != nil {
			c.t.Error(err)
		}
	}
	return c.Tools.Call(ctx, req)
}

// A cancel another daemon records while this one's step runs queues no
// work of the run after it: a fan-out the step reaches next opens no item
// (its tool is never called), as a subflow starts no child and an agent
// queues no call, and the run ends cancelled.
func TestUnitCancelRecordedElsewhereQueuesNoItem(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, src string }{
		{"tool items", `
flow(name = "fanned", nodes = [
    task("a", tool = "kit.echo", args = {"first": True}, next = "fan"),
    fanout("fan", items = lambda ctx: [{"n": 1}, {"n": 2}], tool = "kit.echo", args = lambda ctx, item: item, width = 2, depth = 1, max_items = 2),
])`},
		{"child runs", `
flow(name = "kid", nodes = [task("k", tool = "kit.echo", args = lambda ctx: ctx.input)])
flow(name = "fanned", nodes = [
    task("a", tool = "kit.echo", args = {"first": True}, next = "fan"),
    fanout("fan", items = lambda ctx: [{"n": 1}, {"n": 2}], flow = "kid", args = lambda ctx, item: item, width = 2, depth = 1, max_items = 2),
])`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			elsewhere := &cancelElsewhere{t: t, node: "a"}
			b := setupUnit(t, Config{Tools: elsewhere}, c.src)
			elsewhere.st = b.st
			rec := newCallRecorder()
			rec.wrap(elsewhere.Tools)
			elsewhere.Tools = rec
			run := b.waitTerminal(t, b.start(t, "fanned", `{}`, ""))
			if run.Phase != store.PhaseCancelled {
				t.Fatalf("%s %+v: want cancelled", run.Phase, run.Error)
			}
			if n := len(recorded(rec, "fan", func(tool.CallRequest) int { return 0 })) + len(recorded(rec, "k", func(tool.CallRequest) int { return 0 })); n != 0 {
				t.Errorf("%d calls of the fan-out's items after the run's cancel", n)
			}
		})
	}
}

// An item queued before its run's cancel and leased after it — the
// cancel recorded by another daemon while the item waited for a slot —
// never makes its call: the worker that leases it drops it, as an agent's
// call is dropped, and the run ends cancelled.
func TestUnitAnItemLeasedAfterItsRunsCancelNeverCalls(t *testing.T) {
	t.Parallel()
	src := `flow(name = "fanned", nodes = [
    fanout("fan", items = lambda ctx: [{"gate": "first"}, {"gate": "second"}], tool = "kit.block", args = lambda ctx, item: item, width = 2, depth = 1, max_items = 2),
])`
	rec := newCallRecorder()
	b := setupUnit(t, Config{Tools: rec, Workers: 1, SpareWorkers: -1}, src)
	openGates := sync.OnceFunc(func() { b.kit.open("first"); b.kit.open("second") })
	t.Cleanup(openGates) // a failed assertion must not leave the engine's stop waiting
	id := b.start(t, "fanned", `{}`, "")
	// One worker: one item's call waits at its gate, the other item is
	// queued behind it.
	b.kitIs(t, "one item's call at its gate", func(k *kit) bool { return k.atGate["first"]+k.atGate["second"] == 1 })
	if err := b.st.Update(context.Background(), func(tx store.Tx) error {
		r, err := tx.RunGet(id)
		if err != nil {
			return err
		}
		r.CancelRequested = true // as another daemon records it
		return tx.RunUpdate(r)
	}); err != nil {
		t.Fatal(err)
	}
	openGates()
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCancelled {
		t.Fatalf("%s %+v: want cancelled", run.Phase, run.Error)
	}
	if got := recorded(rec, "fan", func(c tool.CallRequest) string { return string(c.Input) }); len(got) != 1 {
		t.Errorf("the fan-out's calls %q: want only the one made before the cancel", got)
	}
}
