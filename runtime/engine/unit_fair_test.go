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
// on the slots left over. The heavy runs after the first two wait at a
// gate of their own, so the slots the first two free are shared between
// a heavy one and the light one, or (FIFO) both go to heavy ones that
// never end. (No spare slot here: with one the light run would not wait
// at all, TestUnitASpareSlotForAnOwnerHoldingNone.)
func TestUnitOwnersShareSlots(t *testing.T) {
	t.Parallel()
	src := `flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])`
	b := setupUnit(t, Config{Workers: 2, SpareWorkers: -1}, src)
	ctx := context.Background()
	var heavy []string
	for range 2 {
		heavy = append(heavy, submitHeld(t, b, "alice", "h1")) // the bundle reads alice's runs
	}
	b.kitIs(t, "the first two heavy calls hold both slots", func(k *kit) bool { return k.atGate["h1"] == 2 })
	for range 8 {
		heavy = append(heavy, submitHeld(t, b, "alice", "h2"))
	}
	light := submitHeld(t, b, "bob", "l")
	opened := map[string]func(){}
	for _, g := range []string{"h2", "l"} {
		opened[g] = sync.OnceFunc(func() { b.kit.open(g) })
		t.Cleanup(opened[g]) // a failed assertion must not leave the engine's stop waiting on it
	}
	b.kit.open("h1")
	b.kitIs(t, "the light call holds one of the two slots freed", func(k *kit) bool { return k.atGate["l"] == 1 })
	b.kit.read(func() {
		if n := b.kit.atGate["h2"]; n > 1 {
			t.Errorf("%d heavy calls hold slots beside the light one, of 2", n)
		}
	})
	opened["h2"]()
	opened["l"]()
	for _, id := range heavy {
		b.waitTerminal(t, id)
	}
	testutil.Eventually(t, waitTimeout, func() error {
		r, err := b.eng.Get(ctx, "bob", light)
		if err == nil && r.Phase != store.PhaseCompleted {
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
	submit := func(owner, gate string) string { t.Helper(); return submitHeld(t, b, owner, gate) }
	openA := sync.OnceFunc(func() { b.kit.open("a") })
	t.Cleanup(openA) // a failed assertion must not leave the engine's stop waiting
	var alice []string
	for range 3 {
		alice = append(alice, submit("alice", "a"))
	}
	b.kitIs(t, "alice's calls hold both slots", func(k *kit) bool { return k.atGate["a"] == 2 })
	ownersRunCompletes(t, b, "bob", submit("bob", ""), "while alice's calls hold both slots")
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

// An owner under its share takes a second spare while another owner's
// calls hold every regular slot: bob's two overlapping runs both start
// (his share is 2 of 4), and alice, over hers, gets no spare.
func TestUnitASecondSpareForAnOwnerBelowItsShare(t *testing.T) {
	t.Parallel()
	src := `flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])`
	b := setupUnit(t, Config{Workers: 4, SpareWorkers: 2}, src)
	submit := func(owner, gate string) string { t.Helper(); return submitHeld(t, b, owner, gate) }
	openGates := sync.OnceFunc(func() { b.kit.open("a"); b.kit.open("b") })
	t.Cleanup(openGates) // a failed assertion must not leave the engine's stop waiting
	var runs []string
	for range 5 {
		runs = append(runs, submit("alice", "a"))
	}
	b.kitIs(t, "alice's calls hold the four slots", func(k *kit) bool { return k.atGate["a"] == 4 })
	bob := []string{submit("bob", "b"), submit("bob", "b")}
	b.kitIs(t, "bob's two calls both run, on the spares", func(k *kit) bool { return k.atGate["b"] == 2 })
	b.kit.read(func() {
		if n := b.kit.atGate["a"]; n != 4 {
			t.Errorf("%d of alice's calls run: her fifth took a spare", n)
		}
	})
	openGates()
	for _, id := range runs {
		b.waitTerminal(t, id)
	}
	for _, id := range bob {
		ownersRunCompletes(t, b, "bob", id, "")
	}
}

// ownersRunCompletes waits for owner's run id to complete; while says
// what the failure adds.
func ownersRunCompletes(t *testing.T, b *testBundle, owner, id, while string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, func() error {
		r, err := b.eng.Get(context.Background(), owner, id)
		if err == nil && r.Phase != store.PhaseCompleted {
			err = fmt.Errorf("%s's run %s is %s %s", owner, id, r.Phase, while)
		}
		return err
	})
}

// submitHeld starts a run of flow "held" for owner, its call waiting at
// the kit's gate.
func submitHeld(t *testing.T, b *testBundle, owner, gate string) string {
	t.Helper()
	res, err := b.eng.Submit(context.Background(), StartRequest{Owner: owner, Flow: "held", Input: json.RawMessage(`{"gate":"` + gate + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return res.RunID
}
