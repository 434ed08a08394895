package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// journal writes runs' transitions in the caller's transaction
// (docs/design.md §5): a run accepted, finished, cancelled, a fan-out
// child's end on its cohort. It holds only what those writes read; the
// caller applies their effects (counts, wake-ups) once the transaction
// commits.
type journal struct {
	clock clock.Clock // read again inside a transaction (childEndedTx)
	// traced: each terminal record also enters the trace outbox
	// (traces.go), in its transaction, so no finished run's trace is
	// lost to a kill.
	traced bool
}

// finishTx writes a run's terminal record in tx (docs/design.md §5): phase,
// output or error, the task and lease gone, the event, and, for a child,
// the parent's wait woken through its indexed child field in the same
// transaction (docs/design.md §6). It reports whether a parent was woken. The
// caller counts the finish (stats.finished) once the transaction commits.
func (j *journal) finishTx(tx store.Tx, run *store.Run, phase store.Phase, output json.RawMessage, runErr *store.RunError, now time.Time) (bool, error) {
	if run.Cohort != nil {
		// A fan-out child's end is ordered against its cohort's close by
		// a time read inside the transaction (childEndedTx).
		now = later(now, j.clock.Now())
	}
	if run.CancelRequested && phase != store.PhaseCompleted {
		// A cancel that was answered "requested" ends the run cancelled,
		// whatever stopped the work.
		phase = store.PhaseCancelled
		if runErr == nil || runErr.Code != CodeCancelled {
			runErr = &store.RunError{Code: CodeCancelled, Message: "the run was cancelled"}
		}
	}
	if phase != store.PhaseCompleted {
		// A non-idempotent call started and never recorded may have had
		// its effect: the run must say so, whatever else ended it.
		recs, err := tx.IdemListRun(run.ID)
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			if r.State == store.IdemStarted {
				msg := fmt.Sprintf("%s at node %s (not idempotent) was started and its result never recorded; it was not run again", r.Tool, r.Node)
				if runErr != nil {
					msg = runErr.Message + "; " + msg
				}
				runErr = &store.RunError{Code: CodeOutcomeUnknown, Message: msg}
				break
			}
		}
	}
	run.Phase, run.Output, run.Error = phase, output, runErr
	run.UpdatedAt, run.FinishedAt = now, now
	if err := tx.RunUpdate(run); err != nil {
		return false, err
	}
	// The run's step task goes. A run that failed or was cancelled takes
	// its fan-out children still queued or held with it (a held child's
	// worker finds its lease gone); a completed run lets stragglers of a
	// closed cohort finish, paid work that ends as a late result.
	tasks, err := tx.TaskListByRun(run.ID)
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		if phase == store.PhaseCompleted && t.Kind != store.TaskStep {
			continue
		}
		if err := tx.TaskDelete(t.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		if err := tx.LeaseDelete(t.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
	}
	typ, detail := evCompleted, map[string]any(nil)
	switch phase {
	case store.PhaseFailed:
		typ = evFailed
	case store.PhaseCancelled:
		typ = evCancelled
	}
	if runErr != nil {
		detail = map[string]any{"code": runErr.Code, "message": runErr.Message}
	}
	if err := appendEvent(tx, run.ID, typ, run.Attempt, "", detail, now); err != nil {
		return false, err
	}
	if j.traced {
		if err := appendEvent(tx, TraceOutbox, evTraceDue, 0, "", map[string]any{"run": run.ID}, now); err != nil {
			return false, err
		}
	}
	if run.ParentRunID == "" {
		return false, nil
	}
	// The parent's budget covers its children: what the child spent is
	// the parent's spending too, and its escrow goes back.
	if err := settleChildTx(tx, run); err != nil {
		return false, err
	}
	if failpoint.Armed(failpoint.ChildNoAnnounce) {
		return false, nil
	}
	if run.Cohort != nil {
		return j.childEndedTx(tx, run.ParentRunID, run.Cohort, phase == store.PhaseCompleted, output, runErr, now)
	}
	return wakeWaiterTx(tx, run.ID, now)
}

// wakeWaiterTx sets wake time now on the task that waits on childID, if
// any: the one who knows tells (docs/design.md §6).
func wakeWaiterTx(tx store.Tx, childID string, now time.Time) (bool, error) {
	w, err := tx.TaskByChild(childID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // the parent is gone or no longer waits
	}
	if err != nil {
		return false, err
	}
	return wakeParkedTx(tx, w, now)
}

// CancelAnswer is the answer to a cancel (docs/design.md §5).
type CancelAnswer string

// The three cancel answers.
const (
	CancelRequested       CancelAnswer = "requested"
	CancelTooLate         CancelAnswer = "too_late"
	CancelAlreadyTerminal CancelAnswer = "already_terminal"
)

// Cancel asks for a run to stop. A queued or parked run finishes as
// cancelled at once without doing its work; a running one has its tool
// call's context cancelled and finishes as cancelled. A cancel after the
// finish decision gets too_late. Runs of other owners answer E_NOT_FOUND
// and change nothing.
func (e *Engine) Cancel(ctx context.Context, owner, runID string) (CancelAnswer, error) {
	var answer CancelAnswer
	lr := e.held.run(runID)
	if lr != nil {
		completing, release := lr.holdForCancel()
		if completing {
			run, err := e.Get(ctx, owner, runID)
			if err != nil {
				return "", err
			}
			if run.Phase.Terminal() { // recorded already; the worker is just leaving
				return CancelAlreadyTerminal, nil
			}
			return CancelTooLate, nil
		}
		// Hold until the request is durable: finish waits for it.
		defer func() { release(answer == CancelRequested) }()
	}
	now := e.clock.Now()
	var c cancelTree
	err := e.st.Update(ctx, func(tx store.Tx) error {
		c = cancelTree{}
		run, err := tx.RunGet(runID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && run.Owner != owner) {
			return errNotYours
		}
		if err != nil {
			return err
		}
		if run.Phase.Terminal() {
			answer = CancelAlreadyTerminal
			return nil
		}
		answer = CancelRequested
		if run.CancelRequested {
			return nil
		}
		return e.journal.cancelTx(tx, run, owner, now, &c)
	})
	if errors.Is(err, errNotYours) {
		e.auditor.foreign(ctx, owner, runID, "cancel")
		return "", protocolErr(CodeNotFound, "no run %s", runID)
	}
	if err != nil {
		return "", e.admission.storageFailed(err)
	}
	for _, id := range c.queuedFinished {
		e.queued.remove(id)
	}
	countCancelled(e.stats, &c)
	if lr != nil && answer == CancelRequested {
		lr.cancel() // the hold's release marks it cancel-requested
	}
	// Descendants held by workers: cancel their calls too.
	cancelHeld(e.held, c.held, lr)
	if c.woke {
		e.wake.kick()
	}
	return answer, nil
}

// cancelHeld cancels the calls of runs held by workers of this process
// whose cancel was recorded (skip is already handled by the caller), and
// of their fan-out children's tool calls.
func cancelHeld(held *liveWork, runIDs []string, skip *liveRun) {
	if len(runIDs) == 0 {
		return
	}
	held.cancelRuns(runIDs, skip)
}

// cancelTree collects what one cancel did to a run and its descendants.
type cancelTree struct {
	queuedFinished []string // never-started runs finished cancelled
	finished       int      // runs finished cancelled
	held           []string // runs a worker holds: cancelled by their worker
	woke           bool     // a parent was woken
}

// countCancelled counts the runs a committed cancel finished.
func countCancelled(st *stats, c *cancelTree) {
	for range c.finished {
		st.finished(store.PhaseCancelled)
	}
}

// errCancelSeen stops a step's transaction that found its run's cancel
// recorded in the store (by another daemon) before this one heard of it.
var errCancelSeen = errors.New("engine: the run's cancel was requested")

// cancelNotSeenTx is errCancelSeen when run runID's cancel is recorded in
// tx: a cancel another daemon of a fleet recorded while this one's step
// ran reaches it only by announcement, and no work of a cancelled run is
// queued after the cancel (its child runs, fan-out items, agent calls).
func cancelNotSeenTx(tx store.Tx, runID string) error {
	run, err := tx.RunGet(runID)
	if err != nil {
		return err
	}
	if run.CancelRequested {
		return errCancelSeen
	}
	return nil
}

// cancelSeen finishes the run cancelled when err says its step's
// transaction found the cancel, and says whether it did.
func (s *stepper) cancelSeen(ctx context.Context, err error) bool {
	if !errors.Is(err, errCancelSeen) {
		return false
	}
	s.live.markCancelled()
	s.finish(ctx, store.PhaseCancelled, nil, nil)
	return true
}

// cancelTx records the cancel request on run and its non-terminal
// descendants. A run nobody works on (queued or parked) finishes cancelled
// at once, without doing its work; a held one is finished by its worker.
func (j *journal) cancelTx(tx store.Tx, run *store.Run, by string, now time.Time, c *cancelTree) error {
	run.CancelRequested = true
	run.UpdatedAt = now
	if err := appendEvent(tx, run.ID, evCancelRequested, run.Attempt, "", map[string]any{"by": by}, now); err != nil {
		return err
	}
	kids, err := tx.RunList(store.RunListParams{ParentRunID: run.ID})
	if err != nil {
		return err
	}
	for _, k := range kids {
		if !k.Phase.Terminal() && !k.CancelRequested {
			if err := j.cancelTx(tx, k, by, now, c); err != nil {
				return err
			}
		}
	}
	if len(kids) > 0 {
		// A child that finished here gave its escrow back and charged its
		// spending to this run's record: go on from that record.
		cur, err := tx.RunGet(run.ID)
		if err != nil {
			return err
		}
		cur.CancelRequested, cur.UpdatedAt = true, now
		*run = *cur
	}
	tasks, err := tx.TaskListByRun(run.ID)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.Leased && t.Kind == store.TaskStep {
			c.held = append(c.held, run.ID)
			// Its worker may be parking it as this commits: woken, it
			// parks until now, and the next lease finds the cancel.
			if _, err := wakeParkedTx(tx, t, now); err != nil {
				return err
			}
			return tx.RunUpdate(run)
		}
	}
	// Fan-out children a worker holds go with the run (finishTx deletes
	// their tasks and leases); their calls are cancelled after the commit.
	for _, t := range tasks {
		if t.Leased {
			c.held = append(c.held, run.ID)
			break
		}
	}
	wasQueued := run.Phase == store.PhaseQueued
	for _, t := range tasks {
		if err := tx.TaskDelete(t.ID); err != nil {
			return err
		}
	}
	woke, err := j.finishTx(tx, run, store.PhaseCancelled, nil, &store.RunError{Code: CodeCancelled, Message: "the run was cancelled"}, now)
	if err != nil {
		return err
	}
	c.woke = c.woke || woke
	c.finished++
	if wasQueued {
		c.queuedFinished = append(c.queuedFinished, run.ID)
	}
	return nil
}

var errNotYours = errors.New("engine: not found or not yours")
