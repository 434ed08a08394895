package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/internal/ledger"
	"github.com/weirhq/weir/runtime/store"
)

// schedule is the scheduler: on every wake-up and every tick it matches
// ready tasks to free slots and budget slices, and rescues expired leases.
func (e *Engine) schedule() {
	defer close(e.done)
	tick := e.clock.NewTicker(e.config().Tick)
	defer tick.Stop()
	var lastRescue time.Time
	for {
		select {
		case <-e.stop:
			return
		case <-e.wake:
		case <-tick.C():
			// Leases are checked at a tenth of their timeout, not every
			// tick: expiry is measured in lease timeouts.
			if every := e.config().LeaseTimeout / 10; e.now().Sub(lastRescue) >= every {
				lastRescue = e.now()
				e.rescueExpired(context.Background())
				if e.st.Capabilities().Shared {
					e.forgetStarted(context.Background())
					e.stampRoll(context.Background())
				}
			}
			e.dropOverdue(context.Background())
			e.sampleIfDue()
		}
		e.dispatchReady(context.Background())
	}
}

// dispatchReady leases as many ready tasks as there are free slots and
// slices. Tasks refused for lack of a slot or in-flight budget stay queued
// until their queue deadline; past it they are dropped with a reason.
func (e *Engine) dispatchReady(ctx context.Context) {
	// withheld counts the tasks of the last pass that this engine does not
	// serve every tool for (roll.go): the next pass lists that many more,
	// so a queue headed by other daemons' work does not hide from this
	// one the work it can take.
	withheld := 0
	for {
		snap := e.ledger.Snapshot()
		free := snap.Slots - snap.Held
		if free <= 0 {
			return
		}
		inHand := e.held.inHand()
		limit, held := free+inHand+withheld, 0
		var tasks []*store.Task
		err := e.st.View(ctx, func(tx store.Tx) error {
			var err error
			tasks, err = tx.TaskListReady(e.now(), limit)
			return err
		})
		if err != nil {
			e.log.Error("listing ready tasks", "error", err)
			return
		}
		if e.st.Capabilities().Shared {
			tasks = spread(tasks)
		}
		started, blocked := 0, false
		for _, t := range tasks {
			// A task listed before its holder's lease committed is still
			// held by a worker of this process: dispatching it again would
			// lose the lease, and meanwhile take the holder's place in
			// live or items, where a cancel or a cohort's stop looks for
			// the call. A run's next step waits for its worker to let go:
			// that worker kicks the scheduler as it leaves.
			if e.held.taken(t) {
				continue
			}
			if qt := e.config().QueueTimeout; qt > 0 && e.now().After(e.queuedSince(t).Add(qt)) {
				e.drop(ctx, t)
				continue
			}
			if w := e.withheldKnown(t.RunID); w != nil {
				held++
				e.noteWithheld(ctx, t, w)
				continue
			}
			ok, stop, h := e.dispatch(ctx, t)
			if ok {
				started++
			}
			if h {
				held++
			}
			if stop {
				blocked = true
				break
			}
		}
		// Another pass only if this one filled what it listed and slots
		// may remain (a full page means more tasks may be ready), and it
		// started a task or found more withheld ones to look past.
		grew := held > withheld
		withheld = held
		if blocked || (started == 0 && !grew) || len(tasks) < limit || withheld > MaxWithheldScan {
			return
		}
	}
}

// queuedSince is when t began waiting for a slot on this engine: when it
// became ready, or when the engine started if that was later (time the
// daemon was down is not time spent waiting for a slot).
func (e *Engine) queuedSince(t *store.Task) time.Time {
	if s := time.Unix(0, e.startedAt.Load()); s.After(t.ReadyAt) {
		return s
	}
	return t.ReadyAt
}

// dropOverdue drops the tasks that have waited past the queue deadline
// for a slot: checked on the tick, since with every slot held the
// dispatch pass never looks at the queue.
func (e *Engine) dropOverdue(ctx context.Context) {
	qt := e.config().QueueTimeout
	if qt <= 0 || e.now().Before(time.Unix(0, e.startedAt.Load()).Add(qt)) {
		return // nothing has waited that long on this engine yet
	}
	var overdue []*store.Task
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		overdue, err = tx.TaskListReady(e.now().Add(-qt), 64)
		return err
	}); err != nil {
		e.log.Error("listing overdue tasks", "error", err)
		return
	}
	for _, t := range overdue {
		if !e.held.isDispatched(t.ID) {
			e.drop(ctx, t)
		}
	}
}

// dispatch tries to admit t: a slot and a budget slice for the cost of the
// node it runs next. stop says the scheduler should not try further tasks
// on this pass (no slot left: nothing else could be admitted either);
// withheld, that t is
// left to a daemon of the fleet that serves every tool of its flow.
func (e *Engine) dispatch(ctx context.Context, t *store.Task) (ok, stop, withheld bool) {
	had := e.ledger.HasRun(t.RunID)
	run, err := e.ensureAccount(ctx, t.RunID, t.Kind == store.TaskStep)
	if err != nil {
		e.log.Error("opening run account", "run", t.RunID, "error", err)
		return false, false, false
	}
	if missing := e.withheldTools(ctx, run); len(missing) > 0 {
		if !had {
			e.ledger.CloseRun(run.ID)
		}
		e.noteWithheld(ctx, t, e.withhold(run.ID, missing))
		return false, false, true
	}
	cost, typ := e.book.taskType(ctx, run, t)
	slice, why, granted := e.ledger.Acquire(t.RunID, cost)
	overBudget := false
	if !granted && why == ledger.RunBudgetExhausted {
		// The run cannot pay for this node (it may have spent past its
		// budget already): it still needs a slot to record that, which
		// costs it nothing, and the node takes its error wire.
		slice, why, granted = e.ledger.AcquireSlot(t.RunID)
		// A parked node resuming (its calls or children ended, a person
		// decided) finishes what it began on that slot: each turn, call
		// or child it would start next reserves, and is refused, on its
		// own.
		overBudget = !resumesItsNode(t)
	}
	if !granted {
		e.stats.admissionBlocked(string(why))
		// Only a full set of slots stops the pass: a task refused for
		// its own reason (its cost does not fit the budget in flight
		// now) waits, and the tasks behind it may still fit.
		return false, why == ledger.NoSlot, false
	}
	e.held.dispatch(t.ID)
	e.wg.Add(1)
	go e.work(t, typ, slice, overBudget)
	return true, false, false
}

// resumesItsNode says t is a step task parked inside its node (on its
// children, its calls, a person) rather than before a node it has not
// begun.
func resumesItsNode(t *store.Task) bool {
	return t.Kind == store.TaskStep && t.WaitKind != "" && t.WaitKind != WaitTimer
}

// ensureAccount reads the run and opens its ledger account if this
// process has not yet (after recovery accounts open lazily, so a restart
// does not read every parked run). sync takes the store's figures into an
// open account too: a run's step is dispatched only while no worker of
// it runs, so its record is then the whole truth of what it spent and
// what its children hold in escrow (children that ended since gave
// theirs back).
func (e *Engine) ensureAccount(ctx context.Context, runID string, sync bool) (*store.Run, error) {
	var run *store.Run
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		run, err = tx.RunGet(runID)
		return err
	}); err != nil {
		return nil, err
	}
	if sync || !e.ledger.HasRun(runID) || e.st.Capabilities().Shared {
		// In a fleet other daemons spend from the run too: its figures
		// are read again from the store at each dispatch.
		e.ledger.OpenRun(run.ID, run.Budget, run.Spent, run.Escrow)
	}
	return run, nil
}

// drop ends a task that waited past its queue deadline: its run fails
// with E_QUEUE_TIMEOUT and the reason is recorded.
func (e *Engine) drop(ctx context.Context, t *store.Task) {
	now := e.now()
	var parentWoken, runFinished, wasQueued bool
	err := e.st.Update(ctx, func(tx store.Tx) error {
		parentWoken, runFinished, wasQueued = false, false, false
		cur, err := tx.TaskGet(t.ID)
		if err != nil || cur.Leased {
			return errSkip
		}
		run, err := tx.RunGet(t.RunID)
		if err != nil {
			return err
		}
		if err := appendEvent(tx, run.ID, evDropped, cur.Attempt, cur.Node, map[string]any{"reason": CodeQueueTimeout, "item": cur.Item, "task": cur.ID}, now); err != nil {
			return err
		}
		if cur.Kind == store.TaskAgentCall {
			// An agent's call that never got a slot ends with the
			// reason, which its model is told.
			if err := tx.TaskDelete(cur.ID); err != nil {
				return err
			}
			parentWoken, err = agentCallEndTx(tx, cur, nil, &store.RunError{Code: CodeQueueTimeout,
				Message: "no worker slot or budget slice was free before the queue deadline"}, 0, 0, now)
			return err
		}
		if cur.Kind == store.TaskItem {
			// A fan-out child that never got a slot fails alone; its
			// cohort decides what that means for the run.
			if err := tx.TaskDelete(cur.ID); err != nil {
				return err
			}
			parentWoken, err = e.journal.childEndedTx(tx, run.ID, &store.CohortRef{Node: cur.Node, Visit: cur.Visit, Item: cur.Item}, false, nil,
				&store.RunError{Code: CodeQueueTimeout, Message: "no worker slot or budget slice was free before the queue deadline"}, now)
			return err
		}
		wasQueued, runFinished = run.Phase == store.PhaseQueued, true
		parentWoken, err = e.journal.finishTx(tx, run, store.PhaseFailed, nil,
			&store.RunError{Code: CodeQueueTimeout, Message: "no worker slot or budget slice was free before the queue deadline"}, now)
		return err
	})
	if err != nil && !errors.Is(err, errSkip) {
		e.log.Error("dropping task", "task", t.ID, "error", err)
		return
	}
	if err == nil {
		if runFinished {
			e.stats.finished(store.PhaseFailed)
			if wasQueued {
				e.queued.remove(t.RunID)
			}
		}
		if t.Kind == store.TaskStep {
			e.ledger.CloseRun(t.RunID)
		}
		e.stats.refused(CodeQueueTimeout)
		if parentWoken {
			e.kick()
		}
	}
}

// errSkip aborts an Update whose precondition no longer holds; nothing is
// written and the caller moves on.
var errSkip = errors.New("engine: precondition no longer holds")

// rescueExpired makes tasks whose lease expired visible again with
// attempt + 1 (docs/design.md §4), cancelling the stalled holder if it is ours.
func (e *Engine) rescueExpired(ctx context.Context) {
	var expired []*store.Lease
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		expired, err = tx.LeaseListExpired(e.now(), 256)
		return err
	}); err != nil {
		e.log.Error("listing expired leases", "error", err)
		return
	}
	for _, l := range expired {
		e.rescue(ctx, l, "lease expired")
	}
}

// rescue takes back one lease: the task is queued again with attempt + 1,
// or dead-lettered when it has lost its lease MaxAttempts times.
func (e *Engine) rescue(ctx context.Context, l *store.Lease, why string) {
	now := e.now()
	maxAttempts := e.config().MaxAttempts
	var action rescueAction
	err := e.st.Update(ctx, func(tx store.Tx) error {
		action = rescueRequeue
		cur, err := tx.LeaseGet(l.TaskID)
		if err != nil || cur.Holder != l.Holder || cur.Attempt != l.Attempt {
			return errSkip // renewed, released or already rescued
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
		run, err := tx.RunGet(t.RunID)
		if err != nil {
			return err
		}
		t.Errors = append(t.Errors, store.AttemptError{Attempt: t.Attempt, Code: CodeAttemptsExceeded, Message: why, At: now})
		if err := appendEvent(tx, run.ID, evExpired, t.Attempt, t.Node, map[string]any{"reason": why, "holder": l.Holder, "task": t.ID}, now); err != nil {
			return err
		}
		if action = decideRescue(t.Attempt, maxAttempts); action == rescueDeadLetter {
			if err := e.deadLetterTx(tx, run, t, ""); err != nil {
				return err
			}
			_, err := e.journal.finishTx(tx, run, store.PhaseFailed, nil, &store.RunError{Code: CodeAttemptsExceeded,
				Message: fmt.Sprintf("the task lost its lease %d times (last: %s)", t.Attempt, why)}, now)
			return err
		}
		t.Attempt++
		t.Leased, t.Woken = false, false // ready now: a wake it missed is in hand
		t.ReadyAt = now
		if err := tx.TaskPut(t); err != nil {
			return err
		}
		// The run keeps its phase: "queued" means never started, and a
		// rescued run has started. Its attempt number says it resumed.
		run.Attempt++
		run.UpdatedAt = now
		return tx.RunUpdate(run)
	})
	if err != nil && !errors.Is(err, errSkip) {
		e.log.Error("rescuing lease", "task", l.TaskID, "error", err)
		return
	}
	if err == nil {
		e.stats.expired()
		if action == rescueDeadLetter {
			e.stats.deadLettered()
			e.stats.finished(store.PhaseFailed)
		}
		if l.Holder == e.holder {
			// The worker that lost the lease stops, and lets go so the
			// dispatch pass hands the task to a new one.
			e.held.cancelTask(l.TaskID, l.RunID)
		}
		e.kick()
	}
}

// deadLetterTx records a task that exhausted its tries, with every
// attempt's error, so the failure is visible instead of re-queued. The
// caller counts it (stats.deadLettered) once the transaction commits.
func (e *Engine) deadLetterTx(tx store.Tx, run *store.Run, t *store.Task, tool string) error {
	now := e.now()
	if err := tx.DeadLetterPut(&store.DeadLetter{TaskID: t.ID, RunID: run.ID, Owner: run.Owner, Flow: run.Flow,
		Node: t.Node, Tool: tool, Errors: t.Errors, At: now}); err != nil {
		return err
	}
	return appendEvent(tx, run.ID, evDeadLettered, t.Attempt, t.Node, map[string]any{"errors": len(t.Errors)}, now)
}
