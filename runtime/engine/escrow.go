package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Budget escrow (docs/design.md §11). A run's budget covers its children.
// A child run — of a subflow, of a flow fan-out, or started by an agent —
// takes its budget out of the parent's remainder when it is admitted and
// gives back what it did not spend when it ends, so children in flight
// together can never promise more than the parent has.
//
// Two views hold the escrow. The ledger (memory) is the arbiter in this
// process: it sees the parent's slices in flight (its own step, its tool
// fan-out items, its agent's tool calls) together with its children's
// escrow, so a child is reserved there first. The store is the truth: the
// transaction that inserts a child adds its Reserve to the parent's
// Escrow, and the transaction that records the child's end (finishTx)
// takes it off again and adds what the child spent to the parent's
// Spent. A kill -9 anywhere leaves the two records consistent, and the
// ledger reopens the parent's account from them, so nothing leaks and
// nothing is counted twice.
//
// A child run started from a step uses three calls, the same for every
// kind of child (an agent's flow tools included):
//
//	s.syncAccount(ctx)
//	budget, reserve := childBudget(s.run.Budget, node.Budget, childFlow.Budget, fallback)
//	if rerr := s.reserveChild(reserve, "child flow X"); rerr != nil { ... E_BUDGET_EXHAUSTED, before any call }
//	child.Budget, child.Reserve = budget, reserve
//	... s.commit(ctx, func(tx) error { escrowTx(tx, s.run.ID, child); insert the child ... })
//	if the commit failed: s.unreserveChild(reserve)
//
// An agent's tool calls (tools, not flows) are paid by the agent's own
// run. Made in the agent's slot, they are reserved with Reslice
// (agentReserve), which counts the children's escrow too; made
// concurrently outside it, each is a task that takes its own slice when
// it is dispatched, as any task does: the refusal is E_BUDGET_EXHAUSTED,
// before the call.

// errEscrowRefused aborts a transaction whose child the parent's recorded
// figures cannot cover; nothing is written and the child is refused with
// E_BUDGET_EXHAUSTED.
var errEscrowRefused = errors.New("engine: the parent's budget cannot cover the child")

// childBudget is the budget of a child run about to be admitted and what
// it reserves out of a parent with parentBudget (docs/flows.md, "Budgets
// of children"): the node's declared budget, else the child flow's own,
// else fallback — the parent's whole remainder for a subflow, the
// cohort's fixed share for a fan-out. Under a parent without a budget
// the child reserves nothing and runs on its declared budget, or none.
func childBudget(parentBudget, nodeBudget, flowBudget, fallback int64) (budget, reserve int64) {
	declared := nodeBudget
	if declared == 0 {
		declared = flowBudget
	}
	if parentBudget == 0 {
		return declared, 0
	}
	if declared == 0 {
		declared = fallback
	}
	return declared, declared
}

// fanoutShare is what each child run of a flow fan-out whose node and
// flow declare no budget reserves: the parent's remainder when the cohort
// starts divided by the node's width, rounded down, at least 1. It is
// fixed for the cohort and shown in its start event, so an operator can
// predict it; when the parent has no budget it is 0.
func fanoutShare(remainder int64, hasBudget bool, width int) int64 {
	if !hasBudget {
		return 0
	}
	return max(1, remainder/int64(max(width, 1)))
}

// remainder is what s.run's budget can still promise (0 without a
// budget): its budget less spent, slices in flight and escrow.
func (s *stepper) remainder() int64 {
	s.ensureOwnAccount()
	r, _ := s.e.ledger.Remainder(s.run.ID)
	return r
}

// ensureOwnAccount opens s.run's ledger account from s.run if this
// process has none (a step always runs with one; this is the guard).
func (s *stepper) ensureOwnAccount() {
	if !s.e.ledger.HasRun(s.run.ID) {
		s.e.ledger.OpenRun(s.run.ID, s.run.Budget, s.run.Spent, s.run.Escrow)
	}
}

// syncAccount takes s.run's spent and escrow from its record into its
// ledger account before children are reserved: children that ended
// since the account was last opened gave their escrow back in the store
// only. While this worker holds the run nobody else reserves children
// of it, and what the ledger settles was committed to the record first,
// so the record is never behind the ledger.
func (s *stepper) syncAccount(ctx context.Context) error {
	if s.run.Budget == 0 {
		return nil
	}
	var r *store.Run
	if err := s.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		r, err = tx.RunGet(s.run.ID)
		return err
	}); err != nil {
		return err
	}
	s.e.ledger.OpenRun(r.ID, r.Budget, r.Spent, r.Escrow)
	return nil
}

// reserveChild reserves reserve out of s.run's remainder in the ledger
// for a child about to be admitted, or refuses it with
// E_BUDGET_EXHAUSTED. what names the child in the refusal. The caller
// writes the child with escrowTx in the admitting transaction, and calls
// unreserveChild if that transaction does not commit.
func (s *stepper) reserveChild(reserve int64, what string) *store.RunError {
	if s.run.Budget == 0 {
		return nil
	}
	s.ensureOwnAccount()
	rest, _ := s.e.ledger.Remainder(s.run.ID)
	if reserve < 1 {
		return s.escrowRefusal(what, reserve, rest)
	}
	if _, ok := s.e.ledger.Escrow(s.run.ID, reserve); !ok {
		return s.escrowRefusal(what, reserve, rest)
	}
	return nil
}

// unreserveChild gives back a reservation whose child was not admitted.
func (s *stepper) unreserveChild(reserve int64) {
	if s.run.Budget > 0 && reserve > 0 {
		s.e.ledger.Unescrow(s.run.ID, reserve)
	}
}

func (s *stepper) escrowRefusal(what string, reserve, rest int64) *store.RunError {
	return &store.RunError{Code: CodeBudgetExhausted, Message: fmt.Sprintf("%s needs a budget of %d; run budget %d has %d left (spent, in flight or held by children)",
		what, max(reserve, 1), s.run.Budget, rest)}
}

// escrowTx takes child.Reserve out of its parent's remainder in the
// transaction that admits the child, or returns errEscrowRefused when the
// parent's recorded figures cannot cover it.
func escrowTx(tx store.Tx, parentID string, child *store.Run) error {
	if child.Reserve == 0 {
		return nil
	}
	p, err := tx.RunGet(parentID)
	if err != nil {
		return err
	}
	if p.Budget > 0 && p.Spent+p.Escrow+child.Reserve > p.Budget {
		return errEscrowRefused
	}
	p.Escrow += child.Reserve
	return tx.RunUpdate(p)
}

// settleChildTx gives an ended child's reservation back to its parent and
// charges the parent what the child spent, in the transaction that
// records the child's end. A parent already gone changes nothing.
func settleChildTx(tx store.Tx, child *store.Run) error {
	if child.ParentRunID == "" || (child.Spent == 0 && child.Reserve == 0) {
		return nil
	}
	p, err := tx.RunGet(child.ParentRunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	p.Spent += child.Spent
	p.Escrow = max(0, p.Escrow-child.Reserve)
	return tx.RunUpdate(p)
}

// recountEscrowTx sets a run's Escrow to what its children that have not
// ended hold, from their records: for when a child vanished (an operator
// deleted its record) and its end will never give its escrow back.
func recountEscrowTx(tx store.Tx, runID string) error {
	kids, err := tx.RunList(store.RunListParams{ParentRunID: runID})
	if err != nil {
		return err
	}
	var held int64
	for _, k := range kids {
		if !k.Phase.Terminal() {
			held += k.Reserve
		}
	}
	r, err := tx.RunGet(runID)
	if err != nil || r.Escrow == held {
		return err
	}
	r.Escrow = held
	return tx.RunUpdate(r)
}

// chargeTx adds cost to a run's recorded spend in tx. reserved is what
// the call was admitted on (its budget slice, or a model turn's
// reservation): a cost above it was spent all the same and is charged,
// and the excess is recorded as overspend — on the run (Overspent) and
// as an overspent event naming the call in detail — so that the run's
// view shows it, while the ledger, which charges the same cost, refuses
// the run every next slice that no longer fits. The cost joins the run
// owner's spend window in the same transaction (OwnerSpend, in host's
// row), which budget_per_hour is checked against. It returns the run as
// written.
func chargeTx(tx store.Tx, host, runID string, attempt int, node string, cost, reserved int64, detail map[string]any, now time.Time) (*store.Run, error) {
	run, err := tx.RunGet(runID)
	if err != nil || cost <= 0 {
		return run, err
	}
	if err := tx.OwnerSpendAdd(store.OwnerSpend{Owner: run.Owner, Minute: spendMinute(now), Host: host, Cost: cost}); err != nil {
		return nil, err
	}
	run.Spent += cost
	run.UpdatedAt = now
	if over := cost - max(reserved, 0); over > 0 {
		run.Overspent += over
		d := map[string]any{"cost": cost, "reserved": max(reserved, 0), "over": over, "budget": run.Budget, "spent": run.Spent}
		for k, v := range detail {
			d[k] = v
		}
		if err := appendEvent(tx, runID, evOverspent, attempt, node, d, now); err != nil {
			return nil, err
		}
	}
	return run, tx.RunUpdate(run)
}
