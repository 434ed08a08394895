package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// TestUnitOwnersShareSlots: a light owner's run, accepted behind a heavy
// owner's queued runs, gets the next free slot instead of waiting for all
// of them, as global FIFO made it; the heavy owner's runs all complete
// on the slots left over.
func TestUnitOwnersShareSlots(t *testing.T) {
	t.Parallel()
	src := `flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])`
	b := setupUnit(t, Config{Workers: 2}, src)
	ctx := context.Background()
	submit := func(owner, gate string) string {
		t.Helper()
		res, err := b.eng.Submit(ctx, StartRequest{Owner: owner, Flow: "held", Input: json.RawMessage(`{"gate":"` + gate + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res.RunID
	}
	var heavy []string
	for range 10 {
		heavy = append(heavy, submit("alice", "h")) // the bundle reads alice's runs
	}
	b.kitIs(t, "two heavy calls hold both slots", func(k *kit) bool { return k.atGate["h"] == 2 })
	light := submit("bob", "l")
	openLight := sync.OnceFunc(func() { b.kit.open("l") })
	t.Cleanup(openLight) // a failed assertion must not leave the engine's stop waiting on it
	b.kit.open("h")
	b.kitIs(t, "the light call holds a slot", func(k *kit) bool { return k.atGate["l"] == 1 })
	for _, id := range heavy {
		b.waitTerminal(t, id)
	}
	firstLeased := func(id string) uint64 {
		t.Helper()
		var seq uint64
		if err := b.st.View(ctx, func(tx store.Tx) error {
			evs, err := tx.EventList(store.EventListParams{RunID: id})
			for _, e := range evs {
				if e.Type == evLeased && seq == 0 {
					seq = e.Seq
				}
			}
			return err
		}); err != nil || seq == 0 {
			t.Fatalf("run %s: no leased event (%v)", id, err)
		}
		return seq
	}
	at := firstLeased(light)
	before := 0
	for _, id := range heavy {
		if firstLeased(id) < at {
			before++
		}
	}
	// The two that held the slots, and at most one more leased as the
	// first slot came free before the light run was read.
	if before > 3 {
		t.Fatalf("%d of the heavy owner's 10 runs were leased before the light owner's one: want at most 3", before)
	}
	openLight()
	testutil.Eventually(t, waitTimeout, func() error {
		r, err := b.eng.Get(ctx, "bob", light)
		if err == nil && !r.Phase.Terminal() {
			err = fmt.Errorf("the light run is %s", r.Phase)
		}
		return err
	})
}
