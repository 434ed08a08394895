package ledger

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func TestAcquireRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		slots    int
		inFlight int64
		budget   int64
		spent    int64
		pre      []int64 // costs acquired first
		cost     int64
		want     Reason
	}{
		{"free", 2, 0, 0, 0, nil, 5, ""},
		{"no slot", 1, 0, 0, 0, []int64{1}, 1, NoSlot},
		{"in flight used up", 4, 10, 0, 0, []int64{6}, 5, NoBudgetInFlight},
		{"in flight exactly fits", 4, 10, 0, 0, []int64{5}, 5, ""},
		{"run budget", 4, 0, 10, 8, nil, 3, RunBudgetExhausted},
		{"run budget counts reservations", 4, 0, 10, 0, []int64{6}, 5, RunBudgetExhausted},
		{"run budget exactly fits", 4, 0, 10, 4, []int64{3}, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(tt.slots, 0, tt.inFlight)
			l.OpenRun("r", tt.budget, tt.spent, 0)
			for _, c := range tt.pre {
				if _, why, ok := l.Acquire("r", "", c); !ok {
					t.Fatalf("pre-acquire %d refused: %s", c, why)
				}
			}
			_, why, ok := l.Acquire("r", "", tt.cost)
			if ok != (tt.want == "") || why != tt.want {
				t.Fatalf("Acquire = %v %q, want reason %q", ok, why, tt.want)
			}
		})
	}
}

func TestUnknownRunRefused(t *testing.T) {
	t.Parallel()
	l := New(1, 0, 0)
	if _, why, ok := l.Acquire("nope", "", 1); ok || why != UnknownRun {
		t.Fatalf("got %v %q", ok, why)
	}
}

func TestResizeOnlyLimitsNewGrants(t *testing.T) {
	t.Parallel()
	l := New(3, 0, 0)
	l.OpenRun("r", 0, 0, 0)
	var held []Slice
	for range 3 {
		s, _, ok := l.Acquire("r", "", 1)
		if !ok {
			t.Fatal("acquire refused")
		}
		held = append(held, s)
	}
	l.Resize(1, 0, 0)
	if got := l.Snapshot().Held; got != 3 {
		t.Fatalf("resize dropped held slices: held %d", got)
	}
	l.Release(held[0], 1)
	if _, why, ok := l.Acquire("r", "", 1); ok || why != NoSlot {
		t.Fatalf("after lowering to 1 with 2 held, got %v %q", ok, why)
	}
	l.Release(held[1], 1)
	l.Release(held[2], 1)
	if _, _, ok := l.Acquire("r", "", 1); !ok {
		t.Fatal("acquire refused with no slices held")
	}
}

func TestSettleChargesActual(t *testing.T) {
	t.Parallel()
	l := New(1, 0, 0)
	l.OpenRun("r", 10, 0, 0)
	s, _, _ := l.Acquire("r", "", 4)
	l.Release(s, 7)
	if got := l.Spent("r"); got != 7 {
		t.Fatalf("spent %d, want 7", got)
	}
	if _, why, ok := l.Acquire("r", "", 4); ok || why != RunBudgetExhausted {
		t.Fatalf("got %v %q", ok, why)
	}
}

func TestDoubleReleasePanics(t *testing.T) {
	t.Parallel()
	l := New(1, 0, 0)
	l.OpenRun("r", 0, 0, 0)
	s, _, _ := l.Acquire("r", "", 1)
	l.Release(s, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("second release did not panic")
		}
	}()
	l.Release(s, 1)
}

// TestPropertyNeverOverspent hammers the ledger from many goroutines and
// checks, under the ledger's own lock, that no slot is held twice, the
// in-flight budget never exceeds its cap and no run spends beyond its budget.
func TestPropertyNeverOverspent(t *testing.T) {
	t.Parallel()
	const slots, maxInFlight, runs, budget = 8, 20, 5, 60
	l := New(slots, 0, maxInFlight)
	for r := range runs {
		l.OpenRun(runName(r), budget, 0, 0)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	holders := map[int]int{} // slot → goroutine holding it
	violation := ""
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 2000 {
				run := runName(rng.IntN(runs))
				s, _, ok := l.Acquire(run, "", int64(rng.IntN(4)))
				if !ok {
					continue
				}
				mu.Lock()
				if _, dup := holders[s.Slot]; dup {
					violation = "slot held twice"
				}
				holders[s.Slot] = g
				mu.Unlock()
				snap := l.Snapshot()
				if snap.Held > slots || snap.InFlight > maxInFlight {
					mu.Lock()
					violation = "limits exceeded"
					mu.Unlock()
				}
				mu.Lock()
				delete(holders, s.Slot)
				mu.Unlock()
				l.Release(s, s.Cost)
			}
		}()
	}
	wg.Wait()
	if violation != "" {
		t.Fatal(violation)
	}
	for r := range runs {
		if sp := l.Spent(runName(r)); sp > budget {
			t.Errorf("run %d spent %d > budget %d", r, sp, budget)
		}
	}
	if snap := l.Snapshot(); snap.Held != 0 || snap.InFlight != 0 {
		t.Errorf("after all releases: %+v", snap)
	}
}

func runName(i int) string { return string(rune('a' + i)) }

func TestResliceKeepsSlotAndSettles(t *testing.T) {
	t.Parallel()
	l := New(1, 0, 10)
	l.OpenRun("r", 12, 0, 0)
	s, _, _ := l.Acquire("r", "", 5)
	s2, why, ok := l.Reslice(s, 5, 5)
	if !ok || s2.Slot != s.Slot || l.Spent("r") != 5 {
		t.Fatalf("reslice: %+v %q %v spent %d", s2, why, ok, l.Spent("r"))
	}
	// 5 spent + 5 settled now + 5 more > 12: refused, slot still held.
	s3, why, ok := l.Reslice(s2, 5, 5)
	if ok || why != RunBudgetExhausted || s3.Cost != 0 || l.Snapshot().Held != 1 {
		t.Fatalf("over budget: %+v %q %v %+v", s3, why, ok, l.Snapshot())
	}
	// In-flight cap: a run without its own budget still meets it.
	l.OpenRun("u", 0, 0, 0)
	l.Release(s3, 0)
	u, _, _ := l.Acquire("u", "", 1)
	if _, why, ok := l.Reslice(u, 1, 11); ok || why != NoBudgetInFlight {
		t.Fatalf("in flight: %q %v", why, ok)
	}
	if snap := l.Snapshot(); snap.InFlight != 0 || snap.Held != 1 {
		t.Fatalf("after refused reslice: %+v", snap)
	}
}

// A child's escrow is spoken for like a slice: slices and further
// children see only what is left, and reopening from the store's figures
// replaces the escrow the children hold.
func TestEscrowHoldsTheParentsRemainder(t *testing.T) {
	t.Parallel()
	l := New(2, 0, 0)
	l.OpenRun("p", 10, 2, 0)
	if rest, ok := l.Remainder("p"); !ok || rest != 8 {
		t.Fatalf("remainder %d %v, want 8", rest, ok)
	}
	if _, ok := l.Escrow("p", 6); !ok {
		t.Fatal("escrow of 6 out of 8 refused")
	}
	if why, ok := l.Escrow("p", 3); ok || why != RunBudgetExhausted {
		t.Fatalf("second child of 3 with 2 left: %q %v", why, ok)
	}
	if _, why, ok := l.Acquire("p", "", 3); ok || why != RunBudgetExhausted {
		t.Fatalf("slice of 3 with 2 left: %q %v", why, ok)
	}
	s, _, ok := l.Acquire("p", "", 2)
	if !ok {
		t.Fatal("slice of 2 with 2 left refused")
	}
	l.Release(s, 2)
	// The child ended having spent 1 of its 6: the store says spent 5
	// (2 + 2 + 1) and nothing in escrow.
	l.OpenRun("p", 10, 5, 0)
	if rest, _ := l.Remainder("p"); rest != 5 {
		t.Fatalf("remainder after the child ended: %d, want 5", rest)
	}
	l.Unescrow("p", 99) // never below zero
	if rest, _ := l.Remainder("p"); rest != 5 {
		t.Fatalf("remainder after a stray unescrow: %d, want 5", rest)
	}
	l.OpenRun("u", 0, 0, 0)
	if _, ok := l.Escrow("u", 1000); !ok {
		t.Fatal("a run without a budget refused an escrow")
	}
	if _, ok := l.Remainder("u"); ok {
		t.Fatal("a run without a budget has a remainder")
	}
	if why, ok := l.Escrow("x", 1); ok || why != UnknownRun {
		t.Fatalf("escrow on no account: %q %v", why, ok)
	}
}

// TestCloseRunKeepsWorkInFlight: closing an account (its run parked)
// while slices of it are reserved must not let an account
// reopened from the store promise their budget again, nor let their
// settling land on an account that never counted them.
func TestCloseRunKeepsWorkInFlight(t *testing.T) {
	t.Parallel()
	l := New(8, 0, 0)
	l.OpenRun("r", 10, 0, 0)
	s, _, ok := l.Acquire("r", "", 6)
	if !ok {
		t.Fatal("first reservation refused")
	}
	l.CloseRun("r") // the run parks while its call runs
	if !l.HasRun("r") {
		t.Fatal("the account went while 6 were reserved")
	}
	l.OpenRun("r", 10, 0, 0) // reopened from the store, which knows nothing of the 6
	if _, why, ok := l.Acquire("r", "", 6); ok || why != RunBudgetExhausted {
		t.Fatalf("a second 6 of budget 10: %v %q, want %s", ok, why, RunBudgetExhausted)
	}
	l.CloseRun("r")
	l.Release(s, 6)
	if l.HasRun("r") {
		t.Error("the closed account stayed after its last reservation was settled")
	}
}

// TestAcquireSlotIgnoresTheBudget: a run past its budget still gets the
// slot it needs to record its refusal; only a full set of slots refuses.
func TestAcquireSlotIgnoresTheBudget(t *testing.T) {
	t.Parallel()
	l := New(2, 0, 1)
	l.OpenRun("r", 10, 600, 0) // overspent
	if _, why, ok := l.Acquire("r", "", 0); ok || why != RunBudgetExhausted {
		t.Fatalf("a zero slice of an overspent run: %v %q, want %s", ok, why, RunBudgetExhausted)
	}
	s, _, ok := l.AcquireSlot("r", "")
	if !ok || s.Cost != 0 {
		t.Fatalf("AcquireSlot = %+v %v, want a zero slice", s, ok)
	}
	if _, _, ok := l.AcquireSlot("other", ""); !ok {
		t.Fatal("the second slot refused")
	}
	if _, why, ok := l.AcquireSlot("r", ""); ok || why != NoSlot {
		t.Fatalf("with every slot held: %v %q, want %s", ok, why, NoSlot)
	}
	l.Release(s, 0)
	if snap := l.Snapshot(); snap.Held != 1 || snap.InFlight != 0 {
		t.Errorf("after release %+v, want one slot held and nothing in flight", snap)
	}
}

// A spare slot goes to an owner holding none while another holds every
// slot, never to an owner holding one (NoSpare: it waits, others may
// start); past the spares too it is NoSlot. A released spare is one
// again.
func TestSpareSlotsForOwnersHoldingNone(t *testing.T) {
	t.Parallel()
	l := New(2, 1, 0)
	for _, r := range []string{"a1", "a2", "a3", "b1", "c1"} {
		l.OpenRun(r, 0, 0, 0)
	}
	a1, _, _ := l.Acquire("a1", "a", 1)
	if _, _, ok := l.Acquire("a2", "a", 1); !ok {
		t.Fatal("a's second slot refused with one free")
	}
	if _, why, ok := l.Acquire("a3", "a", 1); ok || why != NoSpare {
		t.Fatalf("a, holding slots, took a spare: %v %q", ok, why)
	}
	if r, ok := l.SlotFor("a"); ok || r != NoSpare {
		t.Fatalf("SlotFor(a) = %v %q, want NoSpare", ok, r)
	}
	b1, _, ok := l.Acquire("b1", "b", 1)
	if !ok {
		t.Fatal("b, holding none, was refused the spare")
	}
	if _, why, ok := l.AcquireSlot("c1", "c"); ok || why != NoSlot {
		t.Fatalf("c took a slot past the spares: %v %q", ok, why)
	}
	if s := l.Snapshot(); s.Held != 3 || s.Slots != 2 || s.Spare != 1 {
		t.Fatalf("snapshot %+v, want 3 held of 2 slots and 1 spare", s)
	}
	l.Release(b1, 1)
	c1, _, ok := l.AcquireSlot("c1", "c")
	if !ok {
		t.Fatal("the spare b gave back was not given to c")
	}
	// Which slot is the spare does not matter, only how many are held:
	// with a1 released two are, the slots' number, and a holds one.
	l.Release(a1, 1)
	if _, why, ok := l.Acquire("a3", "a", 1); ok || why != NoSpare {
		t.Fatalf("a took a third with 2 of 2 held and a spare: %v %q", ok, why)
	}
	l.Release(c1, 0)
	if _, _, ok := l.Acquire("a3", "a", 1); !ok {
		t.Fatal("a was refused a slot with one of the two free")
	}
}

// A spare goes to an owner below its weighted share of the slots, so an
// owner that needs a second slot while another's work holds every slot
// gets it; the weights say what a share is.
func TestSpareSlotsForOwnersBelowTheirShare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		weights     map[string]int
		secondSpare bool
	}{
		{"equal weights: b's share is 2 of 4", nil, true},
		{"a weighs 3: b's share is 1 of 4", map[string]int{"a": 3}, false},
		{"b weighs 3: b's share is 3 of 4", map[string]int{"b": 3}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(4, 2, 0)
			if c.weights != nil {
				l.SetWeights(func(o string) int { return max(c.weights[o], 1) })
			}
			for _, r := range []string{"a", "b"} {
				l.OpenRun(r, 0, 0, 0)
			}
			for range 4 {
				if _, _, ok := l.AcquireSlot("a", "a"); !ok {
					t.Fatal("a refused a free slot")
				}
			}
			if _, why, ok := l.AcquireSlot("a", "a"); ok || why != NoSpare {
				t.Fatalf("a, over its share, took a spare: %v %q", ok, why)
			}
			if _, _, ok := l.AcquireSlot("b", "b"); !ok {
				t.Fatal("b, holding none, was refused a spare")
			}
			_, why, ok := l.AcquireSlot("b", "b")
			if ok != c.secondSpare || (!ok && why != NoSpare) {
				t.Fatalf("b's second: granted %v (%q), want %v", ok, why, c.secondSpare)
			}
			if r, ok := l.SlotFor("b"); ok || (r != NoSlot && r != NoSpare) {
				t.Fatalf("SlotFor(b) = %v %q after b's second", ok, r)
			}
		})
	}
}
