package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weirhq/weir/runtime/store"
)

// runItem runs one tool child of a fan-out: the call, with the same
// idempotency contract as a task node, and its end recorded on the cohort
// item in the transaction that releases the task. overBudget says the
// run's remainder could not cover the call's cost: the item fails with
// E_BUDGET_EXHAUSTED before any call.
func (w *worker) runItem(ctx context.Context, run *store.Run, overBudget bool) {
	e, t := w.e, w.task
	ref := &store.CohortRef{Node: t.Node, Visit: t.Visit, Item: t.Item}
	fe, err := e.book.version(ctx, run.Flow, run.Version)
	if err != nil {
		w.itemEnd(ctx, ref, nil, nil, &store.RunError{Code: CodeFlowUnreadable, Message: err.Error()}, 0, false)
		return
	}
	node := fe.flow.Node(t.Node)
	if node != nil {
		w.live.protected.Store(node.Protected)
	}
	var it *store.CohortItem
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		it, err = tx.CohortItemGet(run.ID, t.Node, t.Visit, t.Item)
		return err
	}); err != nil || node == nil || it.State != store.ItemAdmitted {
		// Stopped, or its cohort is gone: the task has nothing to do.
		w.itemDrop(ctx, nil)
		return
	}
	if w.cancelRequested() {
		// Queued before its run's cancel and leased after it: the call is
		// never made, and the fan-out's step finishes the run cancelled.
		w.itemDrop(ctx, nil)
		return
	}
	c := &toolCall{Run: run, Attempt: t.Attempt, Node: node, Visit: t.Visit, Index: []int{t.Item}, Tool: node.Tool, Input: it.Input,
		Timeout: node.Timeout, Retries: node.Retries, Tries: failedTries(t.Errors), TaskID: t.ID}
	if overBudget {
		cost := e.book.itemCost(node)
		w.itemEnd(ctx, ref, c, nil, &store.RunError{Code: CodeBudgetExhausted, Message: fmt.Sprintf("item %d of %s costs %d; run budget %d cannot cover it (spent, in flight or held by children)",
			t.Item, node.ID, cost, run.Budget)}, 0, false)
		return
	}
	o := w.callTool(ctx, c, func(fn func(tx store.Tx) error) error { return w.itemCommit(ctx, fn) })
	applyCall(ctx, itemSite{w: w, ref: ref, run: run, node: node}, c, o)
}

// failedTries counts the tries of an item's call that failed with a
// retryable error; lost leases, also kept in the task's errors, are not
// tries of the call.
func failedTries(errs []store.AttemptError) int {
	n := 0
	for _, ae := range errs {
		if ae.Code != CodeAttemptsExceeded {
			n++
		}
	}
	return n
}

// itemEnd records a tool child's end on its cohort item (with the
// call's done record when recordDone), releases the task and wakes the
// parent, in one transaction.
func (w *worker) itemEnd(ctx context.Context, ref *store.CohortRef, c *toolCall, out json.RawMessage, rerr *store.RunError, cost int64, recordDone bool) {
	e, t := w.e, w.task
	now := e.clock.Now()
	var woke bool
	err := w.itemCommit(ctx, func(tx store.Tx) error {
		if recordDone {
			if err := idemDoneTx(tx, c, c.key(), out, rerr, now); err != nil {
				return err
			}
		}
		if _, err := chargeTx(tx, hostOf(w.e), t.RunID, t.Attempt, t.Node, cost, w.slice.Cost, map[string]any{"tool": t.Tool, "item": t.Item}, now); err != nil {
			return err
		}
		var err error
		if woke, err = e.journal.childEndedTx(tx, t.RunID, ref, rerr == nil, out, rerr, now); err != nil {
			return err
		}
		return w.dropTaskTx(tx)
	})
	if rerr := recordErr(err); rerr != nil && rerr.Class == ClassRun && out != nil {
		// The end with its result is too large for the store: the item
		// ends failed without it, so its task is not tried again.
		w.itemEnd(ctx, ref, c, nil, &store.RunError{Code: rerr.Code, Message: rerr.Message}, cost, recordDone)
		return
	}
	if err == nil {
		w.setLease(nil, true)
		// Settle the cost now, before the woken parent's step takes its
		// account's figures from the store, which holds it already.
		w.slice, _, _ = e.ledger.Reslice(w.slice, w.spent, 0)
		w.spent = 0
		if woke {
			e.wake.kick()
		}
	}
}

// itemDrop deletes the worker's task and lease, after fn (if any) agrees:
// the child's work is over without an end of its own to record.
func (w *worker) itemDrop(ctx context.Context, fn func(tx store.Tx) error) {
	if w.itemCommit(ctx, func(tx store.Tx) error {
		if fn != nil {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return w.dropTaskTx(tx)
	}) == nil {
		w.setLease(nil, true)
	}
}

// itemCommit writes under the worker's fence.
func (w *worker) itemCommit(ctx context.Context, fn func(tx store.Tx) error) error {
	err := w.e.st.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		if err := w.workFenceTx(tx); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil && !errors.Is(err, errLeaseLost) && !errors.Is(err, errSkip) && !errors.Is(err, errUnknownOutcome) {
		w.e.admission.storageFailed(err)
		w.e.log.Error("writing fan-out child", "task", w.task.ID, "error", err)
	}
	return err
}

// dropTaskTx deletes the worker's task and lease: its work is over. The
// caller marks the lease released once the transaction commits.
func (w *worker) dropTaskTx(tx store.Tx) error {
	if err := tx.TaskDelete(w.task.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := tx.LeaseDelete(w.task.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
