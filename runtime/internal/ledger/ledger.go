// Package ledger is the dispatcher's budget ledger (docs/design.md §4): it owns
// worker slots and budget slices. A task is admitted only when both a slot
// and a slice are free; the slice is reserved from the run's own budget and
// from the budget the engine allows in flight at once, and settled at
// completion with the cost the tool actually reported.
//
// A run's children (child runs of subflows and fan-outs) are paid out of
// escrow: a child's budget is reserved out of its parent's remainder when
// it is admitted (Escrow), so children in flight together can never
// promise more than the parent has; what a child did not spend goes back
// to the parent when it ends.
//
// The ledger is memory only: a view rebuilt from the store at recovery
// (runs' budgets, what they spent and what their children hold in escrow
// live on the run records).
package ledger

import (
	"fmt"
	"sync"

	"github.com/weirhq/weir/runtime/internal/owner"
)

// Reason says why a reservation was refused. The codes are stable: they
// reach users in refusals and in run errors.
type Reason string

// Refusal reasons.
const (
	// NoSlot: every worker slot is held, the spare ones too.
	NoSlot Reason = "E_NO_SLOT"
	// NoSpare: every worker slot is held and the spare ones are only
	// for owners below their share: this owner's task waits, another's
	// may start.
	NoSpare Reason = "E_NO_SLOT_SPARE"
	// NoBudgetInFlight: the engine-wide budget in flight is used up.
	NoBudgetInFlight Reason = "E_BUDGET_IN_FLIGHT"
	// RunBudgetExhausted: the run's own budget cannot cover the cost.
	RunBudgetExhausted Reason = "E_BUDGET_EXHAUSTED"
	// UnknownRun: the run has no account (not opened or already closed).
	UnknownRun Reason = "E_UNKNOWN_RUN"
)

// Slice is a granted reservation: a slot number and the budget reserved,
// for the owner whose run holds it.
type Slice struct {
	RunID string
	Owner string
	Slot  int
	Cost  int64
}

// Ledger accounts slots and budget. It is safe for concurrent use.
//
// Beyond its slots it has spare ones, given only to an owner below its
// share of the slots (owner.BelowShare; by the weights SetWeights gives,
// 1 each without): sharing the slots fairly cannot help an owner that
// arrives while another owner's long tasks hold every slot (it would wait
// for one to end), so an owner's first task — or its second, while it is
// under its share — never waits behind another's work, while the owner
// holding more than its share cannot take a spare.
type Ledger struct {
	mu          sync.Mutex
	slots       int // configured slots; lowering it only limits new grants
	spare       int // slots more, for owners below their share
	weight      func(owner string) int
	held        map[int]bool
	owners      map[string]int // slots held, by owner
	inFlight    int64          // budget reserved by held slices
	maxInFlight int64          // 0 means unlimited
	runs        map[string]*account
}

type account struct {
	// closing says CloseRun was asked while slices were still
	// reserved: the account goes once the last of them is settled, so a
	// run's work in flight is never forgotten by a reopened account.
	closing  bool
	budget   int64 // 0 means unlimited
	spent    int64 // settled cost
	reserved int64 // cost of slices held now
	escrow   int64 // budget held by children that have not ended
}

// spend records actual as settled on a. (What an owner spent is the
// store's: the engine adds it in the transaction that charges a run.)
func (l *Ledger) spend(a *account, actual int64) { a.spent += actual }

// committed is what the account has spoken for: spent, reserved by its
// slices and held in escrow by its children.
func (a *account) committed() int64 { return a.spent + a.reserved + a.escrow }

// New returns a ledger with slots worker slots, spare more for owners
// below their share, and maxInFlight budget units allowed in flight at once
// (0: unlimited).
func New(slots, spare int, maxInFlight int64) *Ledger {
	return &Ledger{slots: slots, spare: max(spare, 0), maxInFlight: maxInFlight, held: map[int]bool{}, owners: map[string]int{}, runs: map[string]*account{}}
}

// Resize changes the limits. Held slices are untouched: lowering a limit
// only refuses new grants until enough are released.
func (l *Ledger) Resize(slots, spare int, maxInFlight int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slots, l.spare, l.maxInFlight = slots, max(spare, 0), maxInFlight
}

// SetWeights gives the owners' weights the spare slots' rule reads (nil:
// 1 each).
func (l *Ledger) SetWeights(weight func(owner string) int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.weight = weight
}

// slotFor says whether owner may take a slot now: one of the slots, or a
// spare one if it is below its share; why not otherwise.
func (l *Ledger) slotFor(owner string) (Reason, bool) {
	switch n := len(l.held); {
	case n < l.slots:
		return "", true
	case n >= l.slots+l.spare:
		return NoSlot, false
	case !l.belowShare(owner):
		return NoSpare, false
	}
	return "", true
}

// belowShare applies owner.BelowShare to owner among the owners holding
// slots now.
func (l *Ledger) belowShare(who string) bool {
	w := func(o string) int {
		if l.weight == nil {
			return 1
		}
		return l.weight(o)
	}
	total := 0
	for o, n := range l.owners {
		if n > 0 && o != who {
			total += w(o)
		}
	}
	return owner.BelowShare(l.owners[who], l.slots, w(who), total+w(who))
}

// SlotFor says whether owner could take a slot now (see slotFor): a
// cheap look before a task's run is read.
func (l *Ledger) SlotFor(owner string) (Reason, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slotFor(owner)
}

// take holds the lowest free slot number for owner.
func (l *Ledger) take(owner string) int {
	slot := 0
	for l.held[slot] {
		slot++
	}
	l.held[slot] = true
	l.owners[owner]++
	return slot
}

// OpenRun registers a run's account with its budget (0: unlimited), what
// it has already spent and what its children hold in escrow, as the
// store records them. Opening an open run keeps its slices' reservations
// and takes budget, spent and escrow from the store's figures.
func (l *Ledger) OpenRun(runID string, budget, spent, escrow int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.runs[runID]; ok {
		a.budget, a.spent, a.escrow, a.closing = budget, spent, escrow, false
		return
	}
	l.runs[runID] = &account{budget: budget, spent: spent, escrow: escrow}
}

// CloseRun drops a run's account (finished, or parked so that it costs
// no memory). An account whose slices are still reserved stays
// until the last of them is settled: an account reopened from the store
// meanwhile would not know of them and would promise their budget again.
func (l *Ledger) CloseRun(runID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.runs[runID]
	if !ok {
		return
	}
	if a.reserved > 0 {
		a.closing = true
		return
	}
	delete(l.runs, runID)
}

// settled drops a closing account once nothing of it is reserved.
func (l *Ledger) settled(runID string, a *account) {
	if a.closing && a.reserved <= 0 {
		delete(l.runs, runID)
	}
}

// Acquire grants a slot and a budget slice of cost for runID, owned by
// owner, or says why not. Slot-wide and engine-wide refusals are
// transient (queue and retry); RunBudgetExhausted is final for that cost.
func (l *Ledger) Acquire(runID, owner string, cost int64) (Slice, Reason, bool) {
	if cost < 0 {
		cost = 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.runs[runID]
	if !ok {
		return Slice{}, UnknownRun, false
	}
	if a.budget > 0 && a.committed()+cost > a.budget {
		return Slice{}, RunBudgetExhausted, false
	}
	if why, ok := l.slotFor(owner); !ok {
		return Slice{}, why, false
	}
	if l.maxInFlight > 0 && l.inFlight+cost > l.maxInFlight {
		return Slice{}, NoBudgetInFlight, false
	}
	slot := l.take(owner)
	l.inFlight += cost
	a.reserved += cost
	return Slice{RunID: runID, Owner: owner, Slot: slot, Cost: cost}, "", true
}

// AcquireSlot grants a slot with a zero-cost slice whatever runID's
// budget says: the slot a refused node needs to take its error wire (and
// a refused call to record its refusal). It runs nothing on the run's
// budget, so it is refused only when every slot is held.
func (l *Ledger) AcquireSlot(runID, owner string) (Slice, Reason, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if why, ok := l.slotFor(owner); !ok {
		return Slice{}, why, false
	}
	return Slice{RunID: runID, Owner: owner, Slot: l.take(owner)}, "", true
}

// Release frees the slot and settles the slice: the reservation is returned
// and actual is charged to the run (actual may differ from the reserved
// cost when a tool reports what it really cost; a negative actual charges
// nothing). Releasing a slice twice panics: that is a lease held twice.
func (l *Ledger) Release(s Slice, actual int64) {
	if actual < 0 {
		actual = 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held[s.Slot] {
		panic(fmt.Sprintf("ledger: slot %d released twice", s.Slot))
	}
	delete(l.held, s.Slot)
	if l.owners[s.Owner]--; l.owners[s.Owner] <= 0 {
		delete(l.owners, s.Owner)
	}
	l.inFlight -= s.Cost
	if a, ok := l.runs[s.RunID]; ok {
		a.reserved -= s.Cost
		l.spend(a, actual)
		l.settled(s.RunID, a)
	}
}

// Reslice settles s with actual and reserves nextCost for the same run on
// the same slot, in one step so the slot cannot be lost in between. If the
// budget refuses, the slot stays held with a zero-cost slice and the reason
// is returned: the caller decides whether to give the slot up.
func (l *Ledger) Reslice(s Slice, actual, nextCost int64) (Slice, Reason, bool) {
	if actual < 0 {
		actual = 0
	}
	if nextCost < 0 {
		nextCost = 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held[s.Slot] {
		panic(fmt.Sprintf("ledger: slot %d resliced but not held", s.Slot))
	}
	l.inFlight -= s.Cost
	a, ok := l.runs[s.RunID]
	if ok {
		a.reserved -= s.Cost
		l.spend(a, actual)
	}
	zero := Slice{RunID: s.RunID, Owner: s.Owner, Slot: s.Slot}
	switch {
	case !ok:
		return zero, UnknownRun, false
	case a.budget > 0 && a.committed()+nextCost > a.budget:
		l.settled(s.RunID, a)
		return zero, RunBudgetExhausted, false
	case l.maxInFlight > 0 && l.inFlight+nextCost > l.maxInFlight:
		l.settled(s.RunID, a)
		return zero, NoBudgetInFlight, false
	}
	l.inFlight += nextCost
	a.reserved += nextCost
	return Slice{RunID: s.RunID, Owner: s.Owner, Slot: s.Slot, Cost: nextCost}, "", true
}

// Transfer hands a held slot to another run, as a zero-cost slice: an
// inline child run works in its parent's slot. s's reservation is settled
// with actual first.
func (l *Ledger) Transfer(s Slice, actual int64, runID string) Slice {
	zero, _, _ := l.Reslice(s, actual, 0)
	zero.RunID = runID
	return zero
}

// Escrow reserves amount of runID's budget for a child about to be
// admitted. It takes no slot and no budget in flight: the child's own
// tasks take those. A run without a budget escrows nothing and always
// grants. The reservation lasts until the run's account is opened again
// from the store (which then records the child's Reserve in its Escrow)
// or is given back with Unescrow when the admission is not written.
func (l *Ledger) Escrow(runID string, amount int64) (Reason, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.runs[runID]
	switch {
	case !ok:
		return UnknownRun, false
	case a.budget == 0:
		return "", true
	case amount < 0 || a.committed()+amount > a.budget:
		return RunBudgetExhausted, false
	}
	a.escrow += amount
	return "", true
}

// Unescrow gives back an escrow reservation whose child was not admitted.
func (l *Ledger) Unescrow(runID string, amount int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.runs[runID]; ok && a.budget > 0 {
		a.escrow = max(0, a.escrow-amount)
	}
}

// Remainder is what runID's budget can still promise: its budget less
// what is spent, reserved by slices and held in escrow. ok is false for
// a run without an account or without a budget.
func (l *Ledger) Remainder(runID string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.runs[runID]
	if !ok || a.budget == 0 {
		return 0, false
	}
	return max(0, a.budget-a.committed()), true
}

// HasRun reports whether runID has an open account.
func (l *Ledger) HasRun(runID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.runs[runID]
	return ok
}

// Spent returns what a run has settled so far.
func (l *Ledger) Spent(runID string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.runs[runID]; ok {
		return a.spent
	}
	return 0
}

// Snapshot is a consistent view of the ledger's figures. Held may pass
// Slots by as many as Spare.
type Snapshot struct {
	Slots, Spare, Held    int
	InFlight, MaxInFlight int64
	Runs                  int
}

// Snapshot returns the current figures.
func (l *Ledger) Snapshot() Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Snapshot{Slots: l.slots, Spare: l.spare, Held: len(l.held), InFlight: l.inFlight, MaxInFlight: l.maxInFlight, Runs: len(l.runs)}
}
