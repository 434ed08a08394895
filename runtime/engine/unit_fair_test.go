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

// TestUnitASpareSlotForAnOwnerHoldingNone: while one owner's calls hold
// both slots (and a third waits), another owner's run starts at once on
// the spare slot instead of waiting for one of them to end — without
// spares it would wait as long as the gate stays shut. Which owners may
// take a spare is the ledger's rule (TestSpareSlotsForOwnersHoldingNone).
func TestUnitASpareSlotForAnOwnerHoldingNone(t *testing.T) {
	t.Parallel()
	src := `flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])`
	b := setupUnit(t, Config{Workers: 2, SpareWorkers: 1}, src)
	ctx := context.Background()
	submit := func(owner, gate string) string {
		t.Helper()
		res, err := b.eng.Submit(ctx, StartRequest{Owner: owner, Flow: "held", Input: json.RawMessage(`{"gate":"` + gate + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res.RunID
	}
	openA := sync.OnceFunc(func() { b.kit.open("a") })
	t.Cleanup(openA) // a failed assertion must not leave the engine's stop waiting
	var alice []string
	for range 3 {
		alice = append(alice, submit("alice", "a"))
	}
	b.kitIs(t, "alice's calls hold both slots", func(k *kit) bool { return k.atGate["a"] == 2 })
	bob := submit("bob", "")
	testutil.Eventually(t, waitTimeout, func() error {
		r, err := b.eng.Get(ctx, "bob", bob)
		if err == nil && r.Phase != store.PhaseCompleted {
			err = fmt.Errorf("bob's run is %s while alice's calls hold both slots", r.Phase)
		}
		return err
	})
	b.kit.read(func() {
		if n := b.kit.atGate["a"]; n != 2 {
			t.Errorf("%d of alice's calls run: her third took the spare", n)
		}
	})
	openA()
	for _, id := range alice {
		b.waitTerminal(t, id)
	}
}
