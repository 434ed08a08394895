package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// SubflowFallback is the production value of the fallback clock that wakes
// a parent whose child never announced its end (docs/design.md §6). A child may
// legitimately wait 30 days on a human; 24 hours costs at most 30 useless
// wake-ups on such a wait while bounding an invisible failure to one day.
const SubflowFallback = 24 * time.Hour

// FallbackEnv names the environment variable that can shorten the fallback
// clock (a Go duration such as "2s"), for tests and drills. It can only
// shorten it: empty, zero, negative, unparsable or longer values give
// SubflowFallback.
const FallbackEnv = "WEIR_SUBFLOW_FALLBACK"

// subflowFallback is the fallback clock in force.
func subflowFallback() time.Duration {
	d, err := time.ParseDuration(os.Getenv(FallbackEnv))
	if err != nil || d <= 0 || d > SubflowFallback {
		return SubflowFallback
	}
	return d
}

// subflowNode starts the node's child run and suspends the parent on it,
// or, when the parent was woken, continues from the child's end.
func (s *stepper) subflowNode(ctx context.Context, node *flows.Node) bool {
	if s.task.WaitChild != "" && s.task.Node == node.ID {
		return s.resumeFromChild(ctx, node)
	}
	e := s.e
	chain := append(slices.Clone(s.run.Ancestors), s.run.Flow)
	if slices.Contains(chain, node.Flow) {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeRuntimeCycle,
			Message: fmt.Sprintf("starting %s would close a subflow cycle: %s", node.Flow, strings.Join(append(chain, node.Flow), " -> "))})
	}
	depth, limit := s.run.Depth+1, s.run.DepthLimit
	if depth > limit {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeRuntimeDepth,
			Message: fmt.Sprintf("starting %s would make the subflow chain %d deep, beyond the limit %d: %s", node.Flow, depth, limit, strings.Join(append(chain, node.Flow), " -> "))})
	}
	cfe, err := e.book.latest(ctx, node.Flow)
	if err != nil {
		code := ErrorCode(err)
		if code == CodeFlowUnreadable {
			code = CodeChildUnreadable
		}
		return s.nodeFailed(ctx, node, &store.RunError{Code: code, Message: err.Error()})
	}
	raw, err := s.args(node)
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
	}
	input, err := canonicalInput(raw)
	if err == nil {
		err = s.e.book.validateInput(ctx, cfe, input)
	}
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeBadInput, Message: fmt.Sprintf("input for child flow %s: %v", node.Flow, err)})
	}
	// The run's budget covers its children: the child's budget is held in
	// escrow out of what is left.
	if err := s.syncAccount(ctx); err != nil {
		e.admission.storageFailed(err)
		return false
	}
	budget, reserve := childBudget(s.run.Budget, node.Budget, cfe.flow.Budget, s.remainder())
	if rerr := s.reserveChild(reserve, "child flow "+node.Flow); rerr != nil {
		return s.nodeFailed(ctx, node, rerr)
	}
	now := e.clock.Now()
	cfg := e.cfg.Load()
	child := &store.Run{
		ID: newID("run"), Flow: cfe.flow.Name, Version: cfe.hash, Owner: s.run.Owner,
		Input: input, InputHash: hashHex(input), Phase: store.PhaseRunning, Attempt: 1,
		Depth: depth, DepthLimit: min(limit, depth+cfe.flow.MaxDepth), Ancestors: chain,
		ParentRunID: s.run.ID, ParentNode: node.ID, ConfigVersion: cfg.ConfigVersion,
		Budget: budget, Reserve: reserve, CreatedAt: now, UpdatedAt: now,
	}
	task := newStepTask(child, cfe.flow.Entry, now)
	task.Leased = true
	lease := &store.Lease{TaskID: task.ID, RunID: child.ID, Slot: s.slice.Slot, Deadline: now.Add(cfg.LeaseTimeout), Attempt: 1, Holder: e.holder}
	if node.Timeout > 0 {
		// The child's deadline travels with the parent's continuation.
		if s.cont.Waits == nil {
			s.cont.Waits = map[string]*waitState{}
		}
		s.cont.Waits[node.ID] = &waitState{Until: now.Add(node.Timeout)}
	}
	err = s.commitE(ctx, func(tx store.Tx) error {
		if err := escrowTx(tx, s.run.ID, child); err != nil {
			return err
		}
		if err := e.journal.insertRun(tx, child, task, cfe.flow.Entry, map[string]any{"parent": s.run.ID, "node": node.ID, "budget": budget}); err != nil {
			return err
		}
		if err := tx.LeasePut(lease); err != nil {
			return err
		}
		if err := appendEvent(tx, child.ID, evLeased, 1, cfe.flow.Entry, map[string]any{"task": task.ID, "slot": lease.Slot, "inline": true,
			"config_version": cfg.ConfigVersion, "holder": e.holder, "deadline": lease.Deadline}, now); err != nil {
			return err
		}
		return s.parkTx(tx, now, s.childWake(node, now), "child", child.ID, map[string]any{"child": child.ID, "flow": node.Flow})
	})
	if err != nil {
		s.unreserveChild(reserve)
		delete(s.cont.Waits, node.ID)
		if errors.Is(err, errEscrowRefused) {
			return s.nodeFailed(ctx, node, s.escrowRefusal("child flow "+node.Flow, reserve, s.remainder()))
		}
		s.cancelSeen(ctx, err)
		return false
	}
	return s.runInlineChild(ctx, child, task, lease)
}

// runInlineChild runs a just-started child in the parent's own slot. A
// child that finishes within this step wakes the parent's wait in its
// finish transaction and the parent continues here, never touching the
// queue; a child that suspends leaves the parent parked for the ordinary
// queue worker to resume when the child announces its end (docs/design.md §6).
func (s *stepper) runInlineChild(ctx context.Context, child *store.Run, task *store.Task, lease *store.Lease) bool {
	e := s.e
	e.ledger.OpenRun(child.ID, child.Budget, 0, 0)
	cctx, cancel := context.WithCancel(ctx)
	cw := &worker{e: e, task: task, lease: lease, slice: e.ledger.Transfer(s.slice, s.spent, child.ID), live: newLiveRun(child.ID, cancel)}
	s.spent = 0
	e.held.holdRun(child.ID, cw.live)
	// The scheduler must not hand the parked parent to another worker
	// while this one may take it back.
	e.held.dispatch(s.task.ID)
	e.stats.count("inline_children")

	renewDone := make(chan struct{})
	node := task.Node // read here: the step rewrites the task as it gives it back
	go func() { defer close(renewDone); cw.renew(cctx, node) }()
	cw.run(cctx, child, false)
	interrupted := cctx.Err() != nil
	cancel()
	<-renewDone
	if interrupted {
		cw.drainRelease()
	}

	e.held.releaseRun(child.ID, cw.live)
	s.slice = e.ledger.Transfer(cw.slice, cw.spent, s.run.ID)
	ok := s.reacquire(ctx)
	e.held.undispatch(s.task.ID)
	return ok
}

// reacquire leases the parent's own task again if the child woke it; the
// run goes on in this worker. Otherwise the parent stays parked.
func (s *stepper) reacquire(ctx context.Context) bool {
	res, err := s.acquireLease(ctx)
	if err != nil {
		if !errors.Is(err, errSkip) {
			s.e.admission.storageFailed(err)
		}
		return false
	}
	s.run = res.run
	s.e.ledger.OpenRun(s.run.ID, s.run.Budget, s.run.Spent, s.run.Escrow)
	return true
}

// resumeFromChild continues a parent whose child run ended (or whose
// fallback clock rang): the child's output on the ok wire, its error on the
// error wire, E_CHILD_VANISHED if it is gone, E_CHILD_UNREADABLE if it
// cannot be read.
func (s *stepper) resumeFromChild(ctx context.Context, node *flows.Node) bool {
	e := s.e
	childID := s.task.WaitChild
	var child *store.Run
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		child, err = tx.RunGet(childID)
		return err
	})
	var rerr *store.RunError
	switch {
	case errors.Is(err, store.ErrNotFound):
		rerr = &store.RunError{Code: CodeChildVanished, Message: fmt.Sprintf("child run %s of node %s no longer exists", childID, node.ID)}
		// Its end will never give its escrow back: count what is held again.
		if !s.commit(ctx, func(tx store.Tx) error { return recountEscrowTx(tx, s.run.ID) }) {
			return false
		}
	case err != nil:
		rerr = &store.RunError{Code: CodeChildUnreadable, Message: fmt.Sprintf("child run %s of node %s cannot be read: %v", childID, node.ID, err)}
	case !child.Phase.Terminal():
		now := e.clock.Now()
		if ws := s.cont.Waits[node.ID]; ws != nil && !now.Before(ws.Until) {
			// The child overran the node's timeout: cancel it (and its
			// descendants) and take the error wire.
			var ct cancelTree
			rerr = &store.RunError{Code: CodeChildTimeout, Message: fmt.Sprintf("child run %s did not finish within %s", childID, node.Timeout)}
			if !s.commit(ctx, func(tx store.Tx) error {
				ct = cancelTree{}
				cur, err := tx.RunGet(childID)
				if err != nil || cur.Phase.Terminal() {
					return err
				}
				return e.journal.cancelTx(tx, cur, "timeout of "+node.ID, now, &ct)
			}) {
				return false
			}
			countCancelled(e.stats, &ct)
			cancelHeld(e.held, ct.held, nil)
			break
		}
		// The fallback clock rang while the child still works: wait on.
		s.commit(ctx, func(tx store.Tx) error {
			return s.parkTx(tx, now, s.childWake(node, now), "child", childID, map[string]any{"child": childID, "fallback": true})
		})
		return false
	case child.Phase != store.PhaseCompleted:
		rerr = &store.RunError{Code: CodeChildFailed, Message: fmt.Sprintf("child run %s ended %s", childID, child.Phase)}
		if child.Error != nil {
			rerr = &store.RunError{Code: child.Error.Code, Message: fmt.Sprintf("child run %s: %s", childID, child.Error.Message)}
			if child.Error.Code == CodeFlowUnreadable || child.Error.Code == CodeContinuation {
				rerr.Code = CodeChildUnreadable
			}
		}
	}
	s.task.WaitChild, s.task.WaitKind = "", ""
	s.taskDirty = true
	delete(s.cont.Waits, node.ID)
	if rerr != nil {
		return s.nodeFailed(ctx, node, rerr)
	}
	return s.resultDone(ctx, node, child.Output, map[string]any{"child": childID})
}

// childWake is when a parent parked on a child looks again by itself: the
// fallback clock, or the node's timeout if sooner.
func (s *stepper) childWake(node *flows.Node, now time.Time) time.Time {
	at := now.Add(subflowFallback())
	if ws := s.cont.Waits[node.ID]; ws != nil && ws.Until.Before(at) {
		at = ws.Until
	}
	return at
}

// parkTx suspends the run: its task back in the queue with a future ready
// time (and what it waits for), the lease released, the run waiting.
func (s *stepper) parkTx(tx store.Tx, now, readyAt time.Time, kind, child string, detail map[string]any) error {
	if err := s.releaseTaskTx(tx, now, readyAt, kind, child); err != nil {
		return err
	}
	run, err := tx.RunGet(s.run.ID)
	if err != nil {
		return err
	}
	run.Phase, run.UpdatedAt = store.PhaseWaiting, now
	run.Position = parkedPosition(s.cont)
	if err := tx.RunUpdate(run); err != nil {
		return err
	}
	s.after.phase = store.PhaseWaiting
	if detail == nil {
		detail = map[string]any{}
	}
	detail["for"], detail["until"], detail["task"] = kind, readyAt, s.task.ID
	return appendEvent(tx, s.run.ID, evWaiting, s.run.Attempt, s.cont.Node, detail, now)
}
