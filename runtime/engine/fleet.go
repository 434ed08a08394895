package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Several daemons on one shared store (docs/design.md §10): the store's
// transactions keep them apart (a task's claim, its lease's fence and the
// rescue of its lease are serialized against each other), and a store that
// is a store.Waker tells each engine of the writes it must act on. Wake-ups
// kick the scheduler; the tick (Tick) stays the fallback for a lost one. A
// cancel recorded by another daemon stops the work this one holds; the
// lease renewal, which reads the run, is the fallback for a lost cancel.

// queuedCheck is how many of the runs this engine counts as queued are
// read again on each rescue pass of a shared store.
const queuedCheck = 256

// forgetStarted takes out of this engine's queued count the runs another
// daemon of the fleet started (or finished): the count is each daemon's
// own (max_queued is per daemon), and only the daemon that leases a run
// sees it leave the queue. A sample per pass keeps the cost bounded; a
// run another daemon started is forgotten within a few passes.
func (h rollHost) ForgetStarted(ctx context.Context) int {
	e := h.e
	ids := e.queued.some(queuedCheck)
	if len(ids) == 0 {
		return 0
	}
	var gone []string
	err := e.st.View(ctx, func(tx store.Tx) error {
		gone = gone[:0]
		for _, id := range ids {
			run, err := tx.RunGet(id)
			switch {
			case errors.Is(err, store.ErrNotFound):
				// Being accepted: counted before its record commits.
			case err != nil:
				return err
			case run.Phase != store.PhaseQueued:
				gone = append(gone, id)
			}
		}
		return nil
	})
	if err != nil {
		e.log.Error("reading queued runs", "error", err)
		return 0
	}
	for _, id := range gone {
		e.queued.remove(id)
	}
	return len(gone)
}

// BudgetHeldWait is how long a task waits, parked, when the budget of its
// run is held by leases on other daemons of the fleet, before it is tried
// again.
const BudgetHeldWait = time.Second

// errBudgetHeld: the run's budget is reserved by leases held now (on any
// daemon of the fleet); the task waits in the queue until they settle.
var errBudgetHeld = errors.New("engine: the run's budget is held by other leases")

// budgetHeldElsewhereTx checks a lease's budget slice against the run's
// budget as the shared store has it, inside the lease's transaction, so
// two daemons cannot both spend what is left of one run: what the run has
// spent and holds in escrow for its children, plus the slices of the
// leases its tasks hold (each daemon's ledger sees only its own), plus
// cost, must fit. It reports over when
// what is spent leaves no room for cost whatever settles (the node takes
// its error wire, E_BUDGET_EXHAUSTED, as on one daemon), and returns
// errBudgetHeld when room may come back as other leases settle.
func budgetHeldElsewhereTx(tx store.Tx, run *store.Run, taskID string, cost int64) (over bool, err error) {
	if run.Budget <= 0 || cost <= 0 {
		return false, nil
	}
	// What the run's children hold in escrow is committed as spending is,
	// as the ledger counts it on one daemon.
	committed := run.Spent + run.Escrow
	if committed+cost > run.Budget {
		return true, nil
	}
	tasks, err := tx.TaskListByRun(run.ID)
	if err != nil {
		return false, err
	}
	held := int64(0)
	for _, t := range tasks {
		if !t.Leased || t.ID == taskID {
			continue // the task's own claim holds only its cost
		}
		l, err := tx.LeaseGet(t.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		held += l.BudgetSlice
	}
	if committed+held+cost > run.Budget {
		return false, errBudgetHeld
	}
	return false, nil
}

// spread starts a dispatch pass at a random place in the page of ready
// tasks, keeping their order after it. Every daemon of a fleet lists the
// same oldest tasks; trying them in the same order, they would collide on
// each claim (a serialization failure, and the loser's claim run again to
// find the task taken). Measured with 12 claimers on 3 stores
// (pgstore's BenchmarkClaim), starting at a random place claims 1.6x
// faster. Each pass draws again, so no task is passed over for long.
func spread(tasks []*store.Task) []*store.Task {
	if len(tasks) < 2 {
		return tasks
	}
	k := rand.N(len(tasks))
	return append(tasks[k:len(tasks):len(tasks)], tasks[:k]...)
}
