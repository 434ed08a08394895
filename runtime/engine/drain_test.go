package engine

import (
	"context"
	"github.com/weirhq/weir/runtime/engine/internal/pruner"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

const drainSrc = `
flow(name = "nap", nodes = [task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})])
`

func TestPruneRemovesOldFinishedRunsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, drainSrc+subflowSrc)
	ctx := context.Background()
	done := b.start(t, "nap", `{"ms": 1}`, "req-done")
	b.waitTerminal(t, done)
	waiting := b.start(t, "approval", `{}`, "")
	b.wait(t, waiting, "waiting", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })

	if n, err := b.eng.Prune(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("pruning runs younger than the age removed %d (%v)", n, err)
	}
	n, err := pruner.Runs(ctx, b.eng.st, time.Now().Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the one finished run", n, err)
	}
	if _, err := b.eng.Get(ctx, "alice", done); ErrorCode(err) != CodeNotFound {
		t.Fatalf("the pruned run is still there: %v", err)
	}
	if _, err := b.eng.Get(ctx, "alice", waiting); err != nil {
		t.Fatalf("an unfinished run was pruned: %v", err)
	}
	// Its dedup key went with it: the request id is free again.
	res, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "nap", Input: []byte(`{"ms": 1}`), RequestID: "req-done"})
	if err != nil || res.Existing {
		t.Fatalf("resubmit after pruning: %+v %v, want a new run", res, err)
	}
	var evs []*store.Event
	_ = b.st.View(ctx, func(tx store.Tx) error {
		evs, err = tx.EventList(store.EventListParams{RunID: done})
		return err
	})
	if len(evs) != 0 {
		t.Errorf("%d events of the pruned run remain", len(evs))
	}
}
