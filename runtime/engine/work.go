package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/weirhq/weir/runtime/internal/ledger"
	ownerctx "github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/store"
)

// work holds one dispatched task: it makes the lease durable, keeps it
// renewed, runs the task's steps and gives the slot back.
func (w *worker) work(typ string, overBudget bool) {
	e, t := w.e, w.task
	defer e.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	lr := newLiveRun(t.RunID, cancel)
	w.live = lr
	defer func() {
		cancel()
		lr.stopEval()
		e.wake.kick() // a slot is free
	}()

	// Register before leasing so a cancel in between finds the run (or,
	// for a fan-out child, the cohort's stop finds the call).
	e.held.hold(t, lr)
	defer func() {
		// Settled before the run can be dispatched again: its next step
		// takes its account's figures from the store, which already
		// holds what this worker spent.
		e.ledger.Release(w.slice, w.spent)
		e.held.release(t, lr)
	}()

	leased, err := w.acquireLease(ctx)
	e.held.undispatch(t.ID)
	if err != nil {
		if !errors.Is(err, errSkip) {
			e.admission.storageFailed(err)
			e.log.Error("leasing task", "task", t.ID, "error", err)
		}
		return
	}
	// Counted once the lease holds: a listing that raced with another
	// worker taking the task back is not a trip through the queue.
	now := e.clock.Now()
	e.stats.count("dispatched")
	e.stats.leased(typ, now.Sub(t.ReadyAt))
	if leased.started {
		e.stats.started(now.Sub(leased.run.CreatedAt))
	}
	if t.WaitKind != "" {
		e.stats.resumed(t.WaitKind, now.Sub(t.ReadyAt))
	}
	if leased.run.CancelRequested {
		// Cancelled while another holder had it (before a crash, say):
		// finish it cancelled, never resume its work.
		lr.markCancelled()
	}
	// The run's owner goes with everything the task does: its tool calls
	// and validations take that owner's share of the plugins and the
	// sandbox (runtime/internal/owner).
	ctx = ownerctx.WithOwner(ctx, leased.run.Owner)
	renewDone := make(chan struct{})
	node := t.Node // read here: the step rewrites the task as it gives it back
	go func() { defer close(renewDone); w.renew(ctx, node) }()
	overBudget = overBudget || leased.overBudget
	switch t.Kind {
	case store.TaskItem:
		w.runItem(ctx, leased.run, overBudget)
	case store.TaskAgentCall:
		w.runAgentCall(ctx, leased.run, overBudget)
	default:
		w.run(ctx, leased.run, overBudget)
	}
	interrupted := ctx.Err() != nil
	cancel()
	<-renewDone
	if interrupted {
		w.drainRelease()
	}
	if t.Kind == store.TaskStep && w.holding() == nil && (w.task.WaitKind == WaitHuman || w.task.WaitKind == WaitChild || w.task.WaitKind == WaitApproval) {
		// Parked for a person or a child: the account reopens from the
		// store when the run is next dispatched, so parked runs cost no
		// memory.
		e.ledger.CloseRun(t.RunID)
	}
}

// workFenceTx is fenceTx for what the work itself writes (a step's
// records, an item's end): refused once a drain's grace cut one of its
// evaluations, whose error must not be recorded as the node's.
// drainRelease still gives the task back. (A call cut by the drain ends
// as interrupted, recorded as before.)
func (w *worker) workFenceTx(tx store.Tx) error {
	if w.live != nil && w.live.evalCut.Load() {
		return errAbandoned
	}
	return w.fenceTx(tx)
}

// drainRelease gives a task the drain interrupted back to the queue, with
// attempt + 1 and a "drained" event, so that the stop leaves every record
// written rather than a lease for the next start to rescue. A worker that
// already gave its task back, or lost its lease, writes nothing.
func (w *worker) drainRelease() {
	e := w.e
	if !e.draining.Load() || w.holding() == nil {
		return
	}
	now := e.clock.Now()
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		if err := w.fenceTx(tx); err != nil {
			return err
		}
		t, err := tx.TaskGet(w.task.ID)
		if err != nil {
			return err
		}
		t.Leased, t.Woken, t.ReadyAt = false, false, now
		t.Attempt++
		if err := tx.TaskPut(t); err != nil {
			return err
		}
		if err := tx.LeaseDelete(t.ID); err != nil {
			return err
		}
		run, err := tx.RunGet(t.RunID)
		if err != nil {
			return err
		}
		if t.Kind == store.TaskStep {
			run.Attempt++
			run.UpdatedAt = now
			if err := tx.RunUpdate(run); err != nil {
				return err
			}
		}
		return appendEvent(tx, run.ID, "drained", t.Attempt, t.Node, map[string]any{"task": t.ID, "reason": "the engine stopped before the work finished"}, now)
	})
	if err == nil {
		w.setLease(nil, true)
	} else if !errors.Is(err, errLeaseLost) {
		e.log.Error("giving back a drained task", "task", w.task.ID, "error", err)
	}
}

// worker is the state of one held task.
type worker struct {
	e     *Engine
	task  *store.Task
	slice ledger.Slice
	spent int64 // actual cost to settle on release
	live  *liveRun

	// leaseMu guards lease and released, which the renewer reads while the
	// worker parks its task and takes it back.
	leaseMu  sync.Mutex
	lease    *store.Lease
	released bool // the worker gave its task back (parked or yielded)
}

// holding returns a copy of the worker's lease, or nil once released.
func (w *worker) holding() *store.Lease {
	w.leaseMu.Lock()
	defer w.leaseMu.Unlock()
	if w.released || w.lease == nil {
		return nil
	}
	l := *w.lease
	return &l
}

func (w *worker) setLease(l *store.Lease, released bool) {
	w.leaseMu.Lock()
	defer w.leaseMu.Unlock()
	if l != nil {
		w.lease = l
	}
	w.released = released
}

type leaseResult struct {
	run *store.Run
	// started: this lease is the run's first (it was queued).
	started bool
	// overBudget: the run's budget, as the shared store has it, cannot
	// pay for the task's next node (another daemon spent it).
	overBudget bool
	// budgetHeld: leases of the run on other daemons hold the budget the
	// task needs; the task was parked for BudgetHeldWait instead.
	budgetHeld bool
}

// acquireLease makes the worker's hold durable: the task marked leased, the lease
// record with its deadline, the run running, and the "leased" event with
// the config version in force.
func (w *worker) acquireLease(ctx context.Context) (*leaseResult, error) {
	e, t := w.e, w.task
	now := e.clock.Now()
	cfg := e.cfg.Load()
	lease := &store.Lease{TaskID: t.ID, RunID: t.RunID, Slot: w.slice.Slot, BudgetSlice: w.slice.Cost,
		Deadline: now.Add(cfg.LeaseTimeout), Attempt: t.Attempt, Holder: e.holder}
	var res leaseResult
	var held store.Task
	// A run's first lease takes it out of the queued set before the commit
	// that shows it running; a lease that does not happen puts it back
	// while the run is still queued.
	var queuedOwner string
	counted := false
	if t.Kind == store.TaskStep {
		queuedOwner, counted = e.queued.take(t.RunID)
	}
	// On a shared store the claim commits alone first (store.Claimer: a
	// task another daemon claims now is passed over, not collided with),
	// and the rest follows fenced by its lease; elsewhere the claim is
	// part of the one Update.
	alone := e.st.Capabilities().Shared
	claim := store.TaskClaimParams{Now: now, Leases: []*store.Lease{lease}}
	var err error
	if alone {
		var claimed []*store.Task
		if claimed, err = store.ClaimAlone(ctx, e.st, claim); err == nil && len(claimed) == 0 {
			err = errSkip
		}
	}
	if err == nil {
		err = e.st.Update(ctx, func(tx store.Tx) error {
			res = leaseResult{}
			cur, run, err := claimTx(tx, t, claim, alone)
			if err != nil {
				return err
			}
			if alone {
				over, err := budgetHeldElsewhereTx(tx, run, cur.ID, w.slice.Cost)
				if errors.Is(err, errBudgetHeld) {
					// Parked for a moment rather than listed again at once: the
					// leases holding the budget settle in their own time.
					res.budgetHeld = true
					cur.Leased, cur.ReadyAt = false, now.Add(BudgetHeldWait)
					if err := tx.LeaseDelete(cur.ID); err != nil {
						return err
					}
					return tx.TaskPut(cur)
				}
				if err != nil {
					return err
				}
				res.overBudget = over
			}
			// A fan-out child's task works for its parent run, which stays
			// waiting on its cohort.
			if cur.Kind == store.TaskStep {
				res.started = run.Phase == store.PhaseQueued
				run.Phase = store.PhaseRunning
				run.UpdatedAt = now
				if err := tx.RunUpdate(run); err != nil {
					return err
				}
			}
			res.run = run
			held = *cur
			return appendEvent(tx, run.ID, evLeased, cur.Attempt, cur.Node, leasedDetail(cur, w.slice, cfg.ConfigVersion, lease), now)
		})
		if err != nil && alone {
			w.giveBackClaim(lease)
		}
	}
	if err == nil && res.budgetHeld {
		err = errSkip
	}
	if err != nil {
		if counted && stillQueued(e.st, t.RunID) {
			e.queued.restore(t.RunID, queuedOwner)
		}
		return nil, err
	}
	*w.task = held
	w.setLease(lease, false)
	return &res, nil
}

// leasedDetail is the detail of a task's "leased" event.
func leasedDetail(t *store.Task, slice ledger.Slice, configVersion int64, l *store.Lease) map[string]any {
	detail := map[string]any{"task": t.ID, "slot": slice.Slot, "budget_slice": slice.Cost, "config_version": configVersion,
		"holder": l.Holder, "deadline": l.Deadline}
	switch t.Kind {
	case store.TaskItem:
		detail["item"] = t.Item
	case store.TaskAgentCall:
		detail["turn"], detail["call"], detail["tool"] = t.Item, t.Call, t.Tool
	}
	return detail
}

// claimTx is a lease's transaction's claim: the task claimed in it
// (claim), or with alone the task the claim committed alone already
// holds, read again under its lease; and its run. It is errSkip when
// the task may not be leased now: another daemon claimed it, it is gone,
// leased, of another attempt or not yet due, its lease was taken back,
// or its run has ended.
func claimTx(tx store.Tx, t *store.Task, claim store.TaskClaimParams, alone bool) (*store.Task, *store.Run, error) {
	var cur *store.Task
	if alone {
		if err := leaseStillTx(tx, claim.Leases[0]); err != nil {
			return nil, nil, err
		}
		var err error
		if cur, err = tx.TaskGet(t.ID); errors.Is(err, store.ErrNotFound) {
			return nil, nil, errSkip
		} else if err != nil {
			return nil, nil, err
		}
	} else {
		claimed, err := tx.TaskClaim(claim)
		if err != nil {
			return nil, nil, err
		}
		if len(claimed) == 0 {
			return nil, nil, errSkip
		}
		cur = claimed[0]
	}
	run, err := tx.RunGet(t.RunID)
	if err != nil {
		return nil, nil, err
	}
	// A completed run keeps the tool children its closed cohort let run
	// on (finishTx): one whose lease was rescued runs again and ends as a
	// late result. Left in the queue unleasable it would block the ready
	// tasks behind it.
	if run.Phase.Terminal() && !(cur.Kind == store.TaskItem && run.Phase == store.PhaseCompleted) {
		return nil, nil, errSkip
	}
	return cur, run, nil
}

// leaseStillTx is nil while the store holds lease l as it was written
// (its holder and attempt), errSkip once it is gone or another's.
func leaseStillTx(tx store.Tx, l *store.Lease) error {
	cur, err := tx.LeaseGet(l.TaskID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errSkip
	case err != nil:
		return err
	case cur.Holder != l.Holder || cur.Attempt != l.Attempt:
		return errSkip
	}
	return nil
}

// giveBackClaim undoes a claim committed alone whose lease's transaction
// did not commit (its run ended, a failure): the lease deleted and the
// task queued again as it was, unless the lease is no longer this
// worker's. Without it the task would wait for its lease to expire.
func (w *worker) giveBackClaim(l *store.Lease) {
	err := w.e.st.Update(context.Background(), func(tx store.Tx) error {
		if err := leaseStillTx(tx, l); err != nil {
			return err
		}
		if err := tx.LeaseDelete(l.TaskID); err != nil {
			return err
		}
		t, err := tx.TaskGet(l.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		t.Leased = false
		return tx.TaskPut(t)
	})
	if err != nil && !errors.Is(err, errSkip) {
		w.e.log.Error("giving back a claimed task", "task", l.TaskID, "error", err)
	}
}

// renew extends the lease at a third of its timeout until ctx ends. A
// renewal that finds the lease taken cancels the work: another worker owns
// the task now. node is the task's node as leased, for the renewed event.
func (w *worker) renew(ctx context.Context, node string) {
	e := w.e
	every := e.cfg.Load().LeaseTimeout / 3
	tick := e.clock.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		held := w.holding()
		if held == nil {
			continue // parked or yielded: nothing to renew until taken back
		}
		now := e.clock.Now()
		deadline := now.Add(e.cfg.Load().LeaseTimeout)
		shared := e.st.Capabilities().Shared
		cancelled := false
		err := e.st.Update(ctx, func(tx store.Tx) error {
			cancelled = false
			if err := w.fenceTx(tx); err != nil {
				return err
			}
			if shared {
				// A cancel recorded by another daemon whose wake-up was
				// lost is found here, a third of a lease timeout late.
				run, err := tx.RunGet(held.RunID)
				if err != nil {
					return err
				}
				cancelled = run.CancelRequested && !run.Phase.Terminal()
			}
			held.Deadline = deadline
			if err := tx.LeasePut(held); err != nil {
				return err
			}
			// The task and holder say whose lease it renewed: a run's
			// fan-out items and agent calls hold leases of their own.
			return appendEvent(tx, held.RunID, evRenewed, held.Attempt, node,
				map[string]any{"task": held.TaskID, "holder": held.Holder, "deadline": deadline}, now)
		})
		switch {
		case err == nil:
			w.leaseMu.Lock()
			if w.lease != nil && w.lease.Attempt == held.Attempt {
				w.lease.Deadline = deadline
			}
			w.leaseMu.Unlock()
			if cancelled {
				e.held.cancelNotified(held.RunID)
			}
		case errors.Is(err, errLeaseLost):
			if w.holding() != nil {
				e.log.Warn("lease lost, work stopped", "run", held.RunID, "task", held.TaskID, "attempt", held.Attempt)
				w.live.cancel() // another worker owns the task now
				return
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrDiskFull):
			e.admission.storageFailed(err) // said once per interval, not per renewal
		default:
			e.log.Error("renewing lease", "task", held.TaskID, "error", err)
		}
	}
}

// fenceTx checks, inside a transaction, that this worker still holds its
// lease. Every write a worker makes starts with it, so a worker whose lease
// was rescued can never overwrite its successor's work.
//
// It reads the task's id from the lease held (a copy, under its lock),
// never from w.task, which the step rewrites when it gives the task
// back while the renewer may be fencing its renewal.
func (w *worker) fenceTx(tx store.Tx) error {
	mine := w.holding()
	if mine == nil {
		return errLeaseLost
	}
	l, err := tx.LeaseGet(mine.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return errLeaseLost
	}
	if err != nil {
		return err
	}
	if l.Holder != mine.Holder || l.Attempt != mine.Attempt {
		return errLeaseLost
	}
	return nil
}

// stillQueued reads whether a run has not started yet, after a lease that
// did not happen: only then does it count against MaxQueued again.
func stillQueued(st store.Store, runID string) bool {
	queued := false
	_ = st.View(context.Background(), func(tx store.Tx) error {
		run, err := tx.RunGet(runID)
		queued = err == nil && run.Phase == store.PhaseQueued
		return nil
	})
	return queued
}
