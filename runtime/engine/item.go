package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
)

// runItem runs one tool child of a fan-out: the call, with the same
// idempotency contract as a task node, and its end recorded on the cohort
// item in the transaction that releases the task.
func (w *worker) runItem(ctx context.Context, run *store.Run) {
	e, t := w.e, w.task
	ref := &store.CohortRef{Node: t.Node, Visit: t.Visit, Item: t.Item}
	fe, err := e.flowVersion(ctx, run.Flow, run.Version)
	if err != nil {
		w.itemEnd(ctx, ref, nil, &store.RunError{Code: CodeFlowUnreadable, Message: err.Error()}, 0, "", false)
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
		w.itemCommit(ctx, func(tx store.Tx) error { return w.dropTaskTx(tx) })
		return
	}
	info, ok := e.tools.LookupTool(node.Tool)
	if !ok {
		w.itemEnd(ctx, ref, nil, &store.RunError{Code: "E_UNKNOWN_TOOL", Message: "no installed plugin provides tool " + node.Tool}, 0, "", false)
		return
	}
	key := fmt.Sprintf("%s/%s/%d/%d", run.ID, node.ID, t.Visit, t.Item)
	now := e.now()
	if !info.Idempotent {
		var done *store.Idem
		err := w.itemCommit(ctx, func(tx store.Tx) error {
			rec, err := tx.IdemGet(key)
			switch {
			case err == nil && rec.State == store.IdemDone:
				done = rec
				return nil
			case err == nil:
				return errUnknownOutcome
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			return tx.IdemPut(&store.Idem{Key: key, RunID: run.ID, Node: node.ID, Tool: node.Tool, State: store.IdemStarted, StartedAt: now})
		})
		switch {
		case errors.Is(err, errUnknownOutcome):
			e.stats.unit(node.Tool)
			w.itemEnd(ctx, ref, nil, &store.RunError{Code: CodeOutcomeUnknown,
				Message: node.Tool + " (not idempotent) was started and its result never recorded; it was not run again"}, 0, "", false)
			return
		case err != nil:
			return
		case done != nil:
			w.itemEnd(ctx, ref, done.Result, done.Error, 0, "", false)
			return
		}
	}
	timeout := node.Timeout
	if timeout <= 0 {
		timeout = defaultToolTimeout
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	deadline, _ := callCtx.Deadline()
	started := e.now()
	res, err := e.tools.Call(callCtx, host.CallRequest{Tool: node.Tool, Input: it.Input, RunID: run.ID, Node: node.ID,
		Attempt: t.Attempt, IdempotencyKey: key, Deadline: deadline})
	cancel()
	e.stats.attempt(node.Tool, e.now().Sub(started))
	if err == nil {
		e.stats.unit(node.Tool)
		w.spent += res.Cost
		w.itemEnd(ctx, ref, res.Output, nil, res.Cost, key, !info.Idempotent)
		return
	}
	if ctx.Err() != nil {
		// Stopped by its cohort, or the engine stopping: the stop already
		// recorded the item; an engine stop leaves the lease to rescue.
		w.itemCommit(ctx, func(tx store.Tx) error {
			cur, err := tx.CohortItemGet(run.ID, t.Node, t.Visit, t.Item)
			if err != nil || cur.State != store.ItemStopped {
				return errSkip
			}
			return w.dropTaskTx(tx)
		})
		return
	}
	rerr := toolError(err)
	tries := len(t.Errors)
	if info.Idempotent && host.IsRetryable(err) && tries < node.Retries {
		cfg := e.config()
		backoff := cfg.RetryBase << min(tries, 20)
		if backoff > cfg.RetryMax || backoff <= 0 {
			backoff = cfg.RetryMax
		}
		backoff = time.Duration(rand.Int64N(int64(backoff)) + 1)
		next := *t
		next.Errors = append(next.Errors, store.AttemptError{Attempt: tries + 1, Code: rerr.Code, Message: rerr.Message, At: now})
		next.Leased, next.ReadyAt = false, e.now().Add(backoff)
		w.itemCommit(ctx, func(tx store.Tx) error {
			if err := tx.TaskPut(&next); err != nil {
				return err
			}
			if err := tx.LeaseDelete(t.ID); err != nil {
				return err
			}
			return appendEvent(tx, run.ID, evRetry, t.Attempt, t.Node, map[string]any{"task": t.ID, "item": t.Item, "try": tries + 1,
				"backoff_ms": backoff.Milliseconds(), "code": rerr.Code, "message": rerr.Message}, now)
		})
		return
	}
	e.stats.unit(node.Tool)
	if info.Idempotent && host.IsRetryable(err) && node.Retries > 0 {
		dl := *t
		dl.Errors = append(dl.Errors, store.AttemptError{Attempt: tries + 1, Code: rerr.Code, Message: rerr.Message, At: now})
		w.itemCommit(ctx, func(tx store.Tx) error { return e.deadLetterTx(tx, run, &dl, node.Tool) })
		rerr = &store.RunError{Code: CodeRetriesExhausted, Message: fmt.Sprintf("%s failed %d times; last: %s", node.Tool, tries+1, rerr.Message)}
	}
	w.itemEnd(ctx, ref, nil, rerr, 0, key, !info.Idempotent)
}

// itemEnd records a tool child's end on its cohort item, releases the
// task and wakes the parent, in one transaction.
func (w *worker) itemEnd(ctx context.Context, ref *store.CohortRef, out json.RawMessage, rerr *store.RunError, cost int64, key string, recordIdem bool) {
	e, t := w.e, w.task
	now := e.now()
	var woke bool
	err := w.itemCommit(ctx, func(tx store.Tx) error {
		if recordIdem {
			if err := tx.IdemPut(&store.Idem{Key: key, RunID: t.RunID, Node: t.Node, State: store.IdemDone, Result: out, Error: rerr, StartedAt: now, DoneAt: now}); err != nil {
				return err
			}
		}
		if cost > 0 {
			run, err := tx.RunGet(t.RunID)
			if err != nil {
				return err
			}
			run.Spent += cost
			if err := tx.RunUpdate(run); err != nil {
				return err
			}
		}
		var err error
		if woke, err = e.childEndedTx(tx, t.RunID, ref, rerr == nil, out, rerr, now); err != nil {
			return err
		}
		return w.dropTaskTx(tx)
	})
	if err == nil && woke {
		e.kick()
	}
}

// itemCommit writes under the worker's fence.
func (w *worker) itemCommit(ctx context.Context, fn func(tx store.Tx) error) error {
	err := w.e.st.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		if err := w.fenceTx(tx); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil && !errors.Is(err, errLeaseLost) && !errors.Is(err, errSkip) && !errors.Is(err, errUnknownOutcome) {
		w.e.storageFailed(err)
		w.e.log.Error("writing fan-out child", "task", w.task.ID, "error", err)
	}
	return err
}

// dropTaskTx deletes the worker's task and lease: its work is over.
func (w *worker) dropTaskTx(tx store.Tx) error {
	if err := tx.TaskDelete(w.task.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	w.setLease(nil, true)
	if err := tx.LeaseDelete(w.task.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
