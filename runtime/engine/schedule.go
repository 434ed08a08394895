package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/dispatcher"
	"github.com/weirhq/weir/runtime/engine/internal/reaper"
	"github.com/weirhq/weir/runtime/engine/internal/rescuer"
	"github.com/weirhq/weir/runtime/internal/ledger"
	"github.com/weirhq/weir/runtime/store"
)

// dispatchHost is the engine's side of the dispatcher
// (internal/dispatcher): what may start, and starting it.
type dispatchHost struct{ e *Engine }

// FreeSlots is how many worker slots are free now.
func (h dispatchHost) FreeSlots() int {
	snap := h.e.ledger.Snapshot()
	return snap.Slots + snap.Spare - snap.Held
}

// InHand is how many ready tasks this process's workers hold already.
func (h dispatchHost) InHand() int { return h.e.held.inHand() }

// ListReady lists the heads of the owners' queues ready now, each owner's
// oldest first; on a shared store each pass starts at a random place
// (spread): the dispatcher's fair order across owners is its own, and
// within an owner the rotation keeps daemons from colliding on one task.
func (h dispatchHost) ListReady(ctx context.Context, perOwner, limit int) ([]*store.Task, error) {
	var tasks []*store.Task
	err := h.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		tasks, err = tx.TaskListReadyByOwner(store.TaskListReadyByOwnerParams{Now: h.e.clock.Now(), PerOwner: perOwner, Limit: limit})
		return err
	})
	if err == nil && h.e.st.Capabilities().Shared {
		tasks = spread(tasks)
	}
	return tasks, err
}

// Weight is owner's share of the slots in the config now in force.
func (h dispatchHost) Weight(owner string) int { return h.e.cfg.Load().ShareOf(owner).Weight }

// Tick is the fallback clock's interval.
func (h dispatchHost) Tick() time.Duration { return h.e.cfg.Load().Tick }

// Error logs a failure of a pass.
func (h dispatchHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }

// Offer tries to start t.
func (h dispatchHost) Offer(ctx context.Context, t *store.Task) dispatcher.Outcome {
	e := h.e
	// A task listed before its holder's lease committed is still held by
	// a worker of this process: dispatching it again would lose the
	// lease, and meanwhile take the holder's place in live or items,
	// where a cancel or a cohort's stop looks for the call. A run's next
	// step waits for its worker to let go: that worker kicks the
	// scheduler as it leaves.
	if e.held.taken(t) {
		return dispatcher.Skipped
	}
	if reaper.Overdue(t.ReadyAt, time.Unix(0, e.startedAt.Load()), e.clock.Now(), e.cfg.Load().QueueTimeout) {
		reapHost{e}.Drop(ctx, t)
		return dispatcher.Dropped
	}
	if w := e.held.withheldKnown(t.RunID); w != nil {
		e.roll.noteWithheld(ctx, t, w)
		return dispatcher.Withheld
	}
	// Only spare slots left, and t's owner holds a slot: it waits, before
	// its run is read (the owner's whole page is offered in turn).
	if why, ok := e.ledger.SlotFor(t.Owner); !ok {
		if why == ledger.NoSlot {
			return dispatcher.NoSlot
		}
		return dispatcher.Waits
	}
	return h.dispatch(ctx, t)
}

// dispatch tries to admit t: a slot and a budget slice for the cost of
// the node it runs next. It is NoSlot when no slot is left (nothing else
// could be admitted either) and Withheld when t is left to a daemon of
// the fleet that serves every tool of its flow.
func (h dispatchHost) dispatch(ctx context.Context, t *store.Task) dispatcher.Outcome {
	e := h.e
	had := e.ledger.HasRun(t.RunID)
	run, err := h.ensureAccount(ctx, t.RunID, t.Kind == store.TaskStep)
	if err != nil {
		e.log.Error("opening run account", "run", t.RunID, "error", err)
		return dispatcher.Waits
	}
	if missing := e.roll.withheldTools(ctx, run); len(missing) > 0 {
		if !had {
			e.ledger.CloseRun(run.ID)
		}
		e.roll.noteWithheld(ctx, t, e.held.withhold(run.ID, missing))
		return dispatcher.Withheld
	}
	cost, typ := e.book.taskType(ctx, run, t)
	slice, why, granted := e.ledger.Acquire(t.RunID, run.Owner, cost)
	overBudget := false
	if !granted && why == ledger.RunBudgetExhausted {
		// The run cannot pay for this node (it may have spent past its
		// budget already): it still needs a slot to record that, which
		// costs it nothing, and the node takes its error wire.
		slice, why, granted = e.ledger.AcquireSlot(t.RunID, run.Owner)
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
		if why == ledger.NoSlot {
			return dispatcher.NoSlot
		}
		return dispatcher.Waits
	}
	e.held.dispatch(t.ID)
	e.wg.Add(1)
	go (&worker{e: e, task: t, slice: slice}).work(typ, overBudget)
	return dispatcher.Started
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
func (h dispatchHost) ensureAccount(ctx context.Context, runID string, sync bool) (*store.Run, error) {
	e := h.e
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

// reapHost is the engine's side of the queue reaper (internal/reaper).
type reapHost struct{ e *Engine }

// QueueTimeout is the queue deadline now in force.
func (h reapHost) QueueTimeout() time.Duration { return h.e.cfg.Load().QueueTimeout }

// StartedAt is when the engine started.
func (h reapHost) StartedAt() time.Time { return time.Unix(0, h.e.startedAt.Load()) }

// ListReady lists tasks ready since before readyBefore, oldest first.
func (h reapHost) ListReady(ctx context.Context, readyBefore time.Time, limit int) ([]*store.Task, error) {
	var tasks []*store.Task
	err := h.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		tasks, err = tx.TaskListReady(readyBefore, limit)
		return err
	})
	return tasks, err
}

// Dispatched says a worker of this process holds the task already.
func (h reapHost) Dispatched(taskID string) bool { return h.e.held.isDispatched(taskID) }

// Tick is the reaper's interval.
func (h reapHost) Tick() time.Duration { return h.e.cfg.Load().Tick }

// Error logs a failure of a pass.
func (h reapHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }

// Drop ends a task that waited past its queue deadline: its run fails
// with E_QUEUE_TIMEOUT and the reason is recorded. It is false when the
// task was leased or gone meanwhile.
func (h reapHost) Drop(ctx context.Context, t *store.Task) bool {
	e := h.e
	now := e.clock.Now()
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
			parentWoken, err = agentCallEndTx(tx, hostOf(e), cur, nil, &store.RunError{Code: CodeQueueTimeout,
				Message: "no worker slot or budget slice was free before the queue deadline"}, 0, 0, false, now)
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
	if err != nil {
		if !errors.Is(err, errSkip) {
			e.log.Error("dropping task", "task", t.ID, "error", err)
		}
		return false
	}
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
		e.wake.kick()
	}
	return true
}

// errSkip aborts an Update whose precondition no longer holds; nothing is
// written and the caller moves on.
var errSkip = errors.New("engine: precondition no longer holds")

// rescueHost is the engine's side of the lease rescuer
// (internal/rescuer).
type rescueHost struct{ e *Engine }

// ListExpired lists leases whose deadline is before now.
func (h rescueHost) ListExpired(ctx context.Context, now time.Time, limit int) ([]*store.Lease, error) {
	var expired []*store.Lease
	err := h.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		expired, err = tx.LeaseListExpired(now, limit)
		return err
	})
	return expired, err
}

// LeaseTimeout is the lease deadline now in force.
func (h rescueHost) LeaseTimeout() time.Duration { return h.e.cfg.Load().LeaseTimeout }

// Tick is the scheduler's tick.
func (h rescueHost) Tick() time.Duration { return h.e.cfg.Load().Tick }

// Error logs a failure of a pass.
func (h rescueHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }

// Rescue takes back one lease: the task is queued again with attempt + 1,
// or dead-lettered when it has lost its lease MaxAttempts times. taken is
// false when the lease was renewed, released or rescued meanwhile.
func (h rescueHost) Rescue(ctx context.Context, l *store.Lease, why string) (action rescuer.Action, taken bool, err error) {
	e := h.e
	now := e.clock.Now()
	maxAttempts := e.cfg.Load().MaxAttempts
	err = e.st.Update(ctx, func(tx store.Tx) error {
		action = rescuer.Requeue
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
		if action = rescuer.Decide(t.Attempt, maxAttempts); action == rescuer.DeadLetter {
			if err := e.journal.deadLetterTx(tx, run, t, ""); err != nil {
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
	if errors.Is(err, errSkip) {
		return action, false, nil
	}
	if err != nil {
		return action, false, err
	}
	e.stats.expired()
	if action == rescuer.DeadLetter {
		e.stats.deadLettered()
		e.stats.finished(store.PhaseFailed)
	}
	if l.Holder == e.holder {
		// The worker that lost the lease stops, and lets go so the
		// dispatch pass hands the task to a new one.
		e.held.cancelTask(l.TaskID, l.RunID)
	}
	e.wake.kick()
	return action, true, nil
}

// deadLetterTx records a task that exhausted its tries, with every
// attempt's error, so the failure is visible instead of re-queued. The
// caller counts it (stats.deadLettered) once the transaction commits.
func (j *journal) deadLetterTx(tx store.Tx, run *store.Run, t *store.Task, tool string) error {
	now := j.clock.Now()
	if err := tx.DeadLetterPut(&store.DeadLetter{TaskID: t.ID, RunID: run.ID, Owner: run.Owner, Flow: run.Flow,
		Node: t.Node, Tool: tool, Errors: t.Errors, At: now}); err != nil {
		return err
	}
	return appendEvent(tx, run.ID, evDeadLettered, t.Attempt, t.Node, map[string]any{"errors": len(t.Errors)}, now)
}
