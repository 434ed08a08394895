package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/cohort"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// Fan-out events.
const (
	evCohortClosing = "cohort_closing"
	evCohortClosed  = "cohort_closed"
	evInsufficient  = "cohort_insufficient"
	evItemDone      = "item_done"
	evCohortStopped = "cohort_stopped"
)

// fanoutNode runs one visit of a fan-out node (docs/design.md §7): it starts the
// cohort, and on every wake judges what the children published, admits
// more, freezes, stops after the grace period, and closes by sufficiency
// or by the deadline fuse.
func (s *stepper) fanoutNode(ctx context.Context, node *flows.Node) bool {
	visit := s.cont.Visits[node.ID]
	var c *store.Cohort
	err := s.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		c, err = tx.CohortGet(s.run.ID, node.ID, visit)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s.cohortStart(ctx, node, visit)
	case err != nil:
		s.e.admission.storageFailed(err)
		return false
	}
	if c.State == store.CohortClosing || c.State == store.CohortClosed {
		return s.cohortReduce(ctx, node, c)
	}
	return s.cohortAdvance(ctx, node, c)
}

// cohortStart evaluates the items, writes the cohort and its items, admits
// the first children and parks the parent, in one transaction.
func (s *stepper) cohortStart(ctx context.Context, node *flows.Node, visit int) bool {
	e := s.e
	v, err := s.fe.call(s.evalCtx(), *node.Items, s.flowCtx())
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
	}
	items, ok := v.([]any)
	if !ok && v != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: fmt.Sprintf("items of %s returned %T, not a list", node.ID, v)})
	}
	if len(items) > node.MaxItems {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeFanoutBounds,
			Message: fmt.Sprintf("items of %s returned %d items, more than its max_items %d", node.ID, len(items), node.MaxItems)})
	}
	if node.Flow != "" {
		if rerr := s.childLimits(node); rerr != nil {
			return s.nodeFailed(ctx, node, rerr)
		}
	}
	now := e.clock.Now()
	quorum := node.Quorum
	if quorum <= 0 || quorum > 1 {
		quorum = flows.DefaultQuorum
	}
	c := &store.Cohort{RunID: s.run.ID, Node: node.ID, Visit: visit, Items: len(items), Task: s.task.ID,
		Need: int(math.Ceil(quorum*float64(len(items)) - 1e-9)), State: store.CohortOpen, CreatedAt: now}
	if node.Deadline > 0 {
		c.Deadline = now.Add(node.Deadline)
	}
	values := make([]json.RawMessage, len(items))
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: fmt.Sprintf("item %d of %s: %v", i, node.ID, err)})
		}
		values[i] = b
	}
	if err := s.syncAccount(ctx); err != nil {
		e.admission.storageFailed(err)
		return false
	}
	if node.Flow != "" && node.Budget == 0 {
		c.ChildBudget = fanoutShare(s.remainder(), s.run.Budget > 0, node.Width)
	}
	inputs, rerr := s.childInputs(node, items, 0, min(node.Width, len(items)))
	if rerr != nil {
		return s.nodeFailed(ctx, node, rerr)
	}
	children, err := s.prepareChildren(ctx, node, visit, inputs, c.ChildBudget)
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: ErrorCode(err), Message: err.Error()})
	}
	adm := s.reserveChildren(children)
	var readyAt time.Time
	base := *c
	err = s.commitE(ctx, func(tx store.Tx) error {
		// A store may run this more than once: admission counts from the
		// cohort as it was before.
		*c = base
		c.Fresh = slices.Clone(base.Fresh)
		adm.reset()
		for i, val := range values {
			if err := tx.CohortItemPut(&store.CohortItem{RunID: s.run.ID, Node: node.ID, Visit: visit, Index: i, Value: val, State: store.ItemPending}); err != nil {
				return err
			}
		}
		if err := s.admitTx(tx, node, c, children, len(children), adm, now); err != nil {
			return err
		}
		if err := tx.CohortPut(c); err != nil {
			return err
		}
		readyAt = adm.wake(cohort.Wake(cohort.StateOf(c, 0), s.cohortDecl(node), now), node, now)
		detail := map[string]any{"items": c.Items, "need": c.Need, "width": node.Width}
		if c.ChildBudget > 0 {
			detail["child_budget"] = c.ChildBudget
		}
		return s.parkTx(tx, now, readyAt, "cohort", "", detail)
	})
	ok = err == nil
	s.settleReservations(adm, ok)
	if s.cancelSeen(ctx, err) {
		return false
	}
	if ok {
		s.e.wake.kick()
	}
	return ok && !readyAt.After(now) && s.reacquire(ctx)
}

// childLimits checks a subflow fan-out's run-time depth and cycle limits.
func (s *stepper) childLimits(node *flows.Node) *store.RunError {
	chain := append(slices.Clone(s.run.Ancestors), s.run.Flow)
	if slices.Contains(chain, node.Flow) {
		return &store.RunError{Code: CodeRuntimeCycle, Message: fmt.Sprintf("fanning out %s would close a subflow cycle: %s", node.Flow, strings.Join(append(chain, node.Flow), " -> "))}
	}
	if s.run.Depth+1 > s.run.DepthLimit {
		return &store.RunError{Code: CodeRuntimeDepth, Message: fmt.Sprintf("fanning out %s would make the subflow chain %d deep, beyond the limit %d", node.Flow, s.run.Depth+1, s.run.DepthLimit)}
	}
	return nil
}

// childInputs evaluates args(ctx, item) for items [from, to).
func (s *stepper) childInputs(node *flows.Node, items []any, from, to int) (map[int]json.RawMessage, *store.RunError) {
	out := make(map[int]json.RawMessage, to-from)
	var args []flows.CallResult
	if node.Args != nil && to > from {
		// One round trip for every child admitted now.
		calls := make([]flows.Call, 0, to-from)
		for i := from; i < to; i++ {
			calls = append(calls, flows.Call{Ref: *node.Args, Args: []any{items[i]}})
		}
		var err error
		if args, err = s.fe.callBatch(s.evalCtx(), s.flowCtx(), calls); err != nil {
			return nil, &store.RunError{Code: CodeCallable, Message: fmt.Sprintf("args of %s: %v", node.ID, err)}
		}
	}
	for i := from; i < to; i++ {
		var v any = map[string]any{"item": items[i]}
		if node.Args != nil {
			r := args[i-from]
			if r.Err != nil {
				return nil, &store.RunError{Code: CodeCallable, Message: fmt.Sprintf("args of %s for item %d: %v", node.ID, i, r.Err)}
			}
			v = r.Value
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &store.RunError{Code: CodeCallable, Message: fmt.Sprintf("args of %s for item %d: %v", node.ID, i, err)}
		}
		out[i] = b
	}
	return out, nil
}

// child is a prepared child of a cohort: a tool task, or a child run with
// its first task.
type child struct {
	input json.RawMessage
	task  *store.Task
	run   *store.Run
	entry string
}

// prepareChildren builds the records of the children for inputs, outside
// any transaction (a subflow child needs its flow's latest version).
func (s *stepper) prepareChildren(ctx context.Context, node *flows.Node, visit int, inputs map[int]json.RawMessage, share int64) (map[int]*child, error) {
	e := s.e
	now := e.clock.Now()
	out := make(map[int]*child, len(inputs))
	var cfe *flowEntry
	if node.Flow != "" && len(inputs) > 0 {
		var err error
		if cfe, err = e.book.latest(ctx, node.Flow); err != nil {
			return nil, err
		}
	}
	for i, in := range inputs {
		ch := &child{input: in}
		if node.Flow == "" {
			ch.task = &store.Task{ID: newID("task"), RunID: s.run.ID, Owner: s.run.Owner, Kind: store.TaskItem, Node: node.ID, Visit: visit, Item: i, Attempt: 1, ReadyAt: now, CreatedAt: now}
		} else {
			canon, err := canonicalInput(in)
			if err == nil {
				err = e.book.validateInput(ctx, cfe, canon)
			}
			if err != nil {
				return nil, &Error{Code: CodeBadInput, Class: ClassRun, Message: fmt.Sprintf("input of child %d of %s: %v", i, node.ID, err)}
			}
			depth := s.run.Depth + 1
			r := &store.Run{ID: newID("run"), Flow: cfe.flow.Name, Version: cfe.hash, Owner: s.run.Owner,
				Input: canon, InputHash: hashHex(canon), Phase: store.PhaseQueued, Attempt: 1,
				Depth: depth, DepthLimit: min(s.run.DepthLimit, s.run.Depth+node.Depth, depth+cfe.flow.MaxDepth),
				Ancestors: append(slices.Clone(s.run.Ancestors), s.run.Flow), ParentRunID: s.run.ID, ParentNode: node.ID,
				Cohort: &store.CohortRef{Node: node.ID, Visit: visit, Item: i}, ConfigVersion: e.cfg.Load().ConfigVersion,
				CreatedAt: now, UpdatedAt: now}
			r.Budget, r.Reserve = childBudget(s.run.Budget, node.Budget, cfe.flow.Budget, share)
			ch.run, ch.entry = r, cfe.flow.Entry
			ch.task = newStepTask(r, cfe.flow.Entry, now)
		}
		out[i] = ch
	}
	return out, nil
}

// admission is the escrow of one cohort transaction's child runs: which
// prepared children the ledger reserved before it (refused holds the
// others' refusals) and which the transaction wrote (reset on each run
// of its fn).
type admission struct {
	reserved map[int]int64
	refused  map[int]*store.RunError
	admitted map[int]bool
	// deadline is set when the transaction admitted a child run with a
	// timeout; failed counts children that failed at admission.
	deadline time.Time
	failed   int
}

func (a *admission) reset() {
	a.admitted, a.deadline, a.failed = map[int]bool{}, time.Time{}, 0
}

// wake is when the parent must look again: at, or sooner when a child
// failed at admission (now) or a child admitted here must be timed out.
func (a *admission) wake(at time.Time, node *flows.Node, now time.Time) time.Time {
	if a.failed > 0 {
		return now
	}
	if !a.deadline.IsZero() && a.deadline.Before(at) {
		return a.deadline
	}
	return at
}

// reserveChildren reserves in the ledger, in item order, the escrow of
// the prepared child runs; a child the remainder cannot cover is refused
// (it fails at admission with E_BUDGET_EXHAUSTED).
func (s *stepper) reserveChildren(children map[int]*child) *admission {
	a := &admission{reserved: map[int]int64{}, refused: map[int]*store.RunError{}}
	idx := make([]int, 0, len(children))
	for i, ch := range children {
		if ch.run != nil {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	for _, i := range idx {
		r := children[i].run
		if rerr := s.reserveChild(r.Reserve, fmt.Sprintf("child %d of %s", i, r.ParentNode)); rerr != nil {
			a.refused[i] = rerr
			continue
		}
		a.reserved[i] = r.Reserve
	}
	a.reset()
	return a
}

// settleReservations gives back the reservations of children the
// transaction did not write (all of them when it did not commit).
func (s *stepper) settleReservations(a *admission, committed bool) {
	for i, r := range a.reserved {
		if !committed || !a.admitted[i] {
			s.unreserveChild(r)
		}
	}
}

// admitTx admits up to n prepared children while the cohort is open, has
// room under its width and items left. Children not prepared wait for the
// next wake. A child run whose escrow was refused fails at admission with
// E_BUDGET_EXHAUSTED, before it starts.
func (s *stepper) admitTx(tx store.Tx, node *flows.Node, c *store.Cohort, children map[int]*child, n int, adm *admission, now time.Time) error {
	if n > 0 && c.State == store.CohortOpen && c.Next < c.Items && c.InFlight < node.Width {
		if err := cancelNotSeenTx(tx, s.run.ID); err != nil {
			return err
		}
	}
	for ; n > 0 && c.State == store.CohortOpen && c.Next < c.Items && c.InFlight < node.Width; n-- {
		ch := children[c.Next]
		if ch == nil {
			return nil
		}
		it, err := tx.CohortItemGet(c.RunID, c.Node, c.Visit, c.Next)
		if err != nil {
			return err
		}
		it.State, it.Input = store.ItemAdmitted, ch.input
		if ch.run != nil {
			rerr := adm.refused[c.Next]
			if rerr == nil {
				switch err := escrowTx(tx, s.run.ID, ch.run); {
				case errors.Is(err, errEscrowRefused):
					rerr = &store.RunError{Code: CodeBudgetExhausted, Message: fmt.Sprintf("child %d of %s needs a budget of %d; run budget %d cannot cover it (spent or held by children)",
						c.Next, node.ID, ch.run.Reserve, s.run.Budget)}
				case err != nil:
					return err
				}
			}
			if rerr != nil {
				c.Next++
				if err := itemFailedTx(tx, c, it, "", rerr, now); err != nil {
					return err
				}
				adm.failed++
				continue
			}
			if err := s.e.journal.insertRun(tx, ch.run, ch.task, ch.entry, map[string]any{"parent": s.run.ID, "node": node.ID, "item": c.Next, "budget": ch.run.Budget}); err != nil {
				return err
			}
			it.Child = ch.run.ID
			adm.admitted[c.Next] = true
			if node.Timeout > 0 {
				it.Deadline = now.Add(node.Timeout)
				if adm.deadline.IsZero() {
					adm.deadline = it.Deadline
				}
			}
		} else {
			if err := tx.TaskPut(ch.task); err != nil {
				return err
			}
			it.Child = ch.task.ID
		}
		if err := tx.CohortItemPut(it); err != nil {
			return err
		}
		c.Next++
		c.InFlight++
	}
	return nil
}

// cohortDecl is what the cohort decisions read of the node.
func (s *stepper) cohortDecl(node *flows.Node) cohort.Decl {
	grace := node.Grace
	if grace <= 0 {
		grace = flows.DefaultGrace
	}
	return cohort.Decl{Width: node.Width, Protected: node.Protected, Grace: grace, Fallback: subflowFallback()}
}

// cohortAdvance is one look of the woken parent at its cohort: judge the
// children that ended, then freeze, stop, admit or close. Maturity is
// judged outside the transaction (it runs the flow's callable); the
// counters are re-read inside it, so a child ending meanwhile is never
// lost: its item stays fresh and the parent looks again at once.
func (s *stepper) cohortAdvance(ctx context.Context, node *flows.Node, snap *store.Cohort) bool {
	e := s.e
	unknowns, settle, err := s.itemWaits(ctx, node, snap, e.clock.Now())
	if err != nil {
		e.admission.storageFailed(err)
		return false
	}
	judged, err := s.judge(ctx, node, snap)
	if err != nil {
		e.admission.storageFailed(err)
		return false
	}
	children, stop, more := s.admittable(ctx, node, snap)
	if stop {
		return more
	}
	now := e.clock.Now()
	due, nextDeadline, err := s.childDeadlines(ctx, node, snap, now)
	if err != nil {
		e.admission.storageFailed(err)
		return false
	}
	if len(children) > 0 && node.Flow != "" {
		if err := s.syncAccount(ctx); err != nil {
			e.admission.storageFailed(err)
			return false
		}
	}
	adm := s.reserveChildren(children)
	var c *store.Cohort
	var stopTasks []string
	var stopped cancelTree
	var closing bool
	var readyAt time.Time
	err = s.commitE(ctx, func(tx store.Tx) error {
		stopTasks, stopped, closing, readyAt = nil, cancelTree{}, false, time.Time{}
		adm.reset()
		if err := s.applyItemUnknownsTx(tx, node, snap, settle, now); err != nil {
			return err
		}
		var err error
		if c, err = tx.CohortGet(snap.RunID, snap.Node, snap.Visit); err != nil {
			return err
		}
		if err := applyJudgementsTx(tx, c, judged); err != nil {
			return err
		}
		if err := s.timeOutChildrenTx(tx, node, c, due, now, &stopped); err != nil {
			return err
		}
		prepared := 0
		for children[c.Next+prepared] != nil {
			prepared++
		}
		d := cohort.Advance(cohort.StateOf(c, prepared), s.cohortDecl(node), now)
		if d.Freeze {
			c.State, c.FrozenAt = store.CohortFrozen, now
		}
		if err := s.admitTx(tx, node, c, children, d.Admit, adm, now); err != nil {
			return err
		}
		if d.Stop {
			if stopTasks, stopped, err = s.stopInFlightTx(tx, c, now); err != nil {
				return err
			}
		}
		switch {
		case d.JudgeFirst:
			// Judge the last ones before closing.
			readyAt = now
		case d.Close:
			closing = true
			return s.closeCohortTx(tx, node, c, d, now)
		default:
			readyAt = d.Wake
			if !nextDeadline.IsZero() && nextDeadline.Before(readyAt) {
				readyAt = nextDeadline
			}
			readyAt = unknownsUntil(unknowns, adm.wake(readyAt, node, now))
		}
		if err := tx.CohortPut(c); err != nil {
			return err
		}
		return s.parkTx(tx, now, readyAt, "cohort", "", nil)
	})
	ok := err == nil
	s.settleReservations(adm, ok)
	if !ok {
		s.cancelSeen(ctx, err)
		return false
	}
	countCancelled(e.stats, &stopped)
	s.stopChildren(stopTasks, stopped.held)
	e.wake.kick()
	if closing {
		failpoint.Hit(failpoint.CohortCutoff)
		return s.cohortReduce(ctx, node, c)
	}
	return !readyAt.After(now) && s.reacquire(ctx)
}

// admittable prepares the children of snap that may be admitted now (nil
// when none may), or stops the look (stop) with its answer more: a
// storage failure, or the node failed on the children's inputs.
func (s *stepper) admittable(ctx context.Context, node *flows.Node, snap *store.Cohort) (children map[int]*child, stop, more bool) {
	e := s.e
	if snap.State != store.CohortOpen || snap.Next >= snap.Items {
		return nil, false, false
	}
	room := node.Width - snap.InFlight
	if room <= 0 {
		return nil, false, false
	}
	// Read only the items that may be admitted now.
	to := min(snap.Next+room, snap.Items)
	items := make([]any, to)
	if err := e.st.View(ctx, func(tx store.Tx) error {
		for i := snap.Next; i < to; i++ {
			it, err := tx.CohortItemGet(snap.RunID, snap.Node, snap.Visit, i)
			if err != nil {
				return err
			}
			_ = json.Unmarshal(it.Value, &items[i])
		}
		return nil
	}); err != nil {
		e.admission.storageFailed(err)
		return nil, true, false
	}
	inputs, rerr := s.childInputs(node, items, snap.Next, to)
	if rerr != nil {
		return nil, true, s.nodeFailed(ctx, node, rerr)
	}
	children, err := s.prepareChildren(ctx, node, snap.Visit, inputs, snap.ChildBudget)
	if err != nil {
		return nil, true, s.nodeFailed(ctx, node, &store.RunError{Code: ErrorCode(err), Message: err.Error()})
	}
	return children, false, false
}

// applyJudgementsTx marks the items of c judged mature; the items that
// ended since they were judged stay fresh.
func applyJudgementsTx(tx store.Tx, c *store.Cohort, judged map[int]bool) error {
	var still []int
	for _, i := range c.Fresh {
		m, seen := judged[i]
		if !seen {
			still = append(still, i)
			continue
		}
		if m {
			c.Mature++
			it, err := tx.CohortItemGet(c.RunID, c.Node, c.Visit, i)
			if err != nil {
				return err
			}
			it.Mature = true
			if err := tx.CohortItemPut(it); err != nil {
				return err
			}
		}
	}
	c.Fresh = still
	return nil
}

// closeCohortTx starts closing c as decision d says (docs/design.md §7.2).
func (s *stepper) closeCohortTx(tx store.Tx, node *flows.Node, c *store.Cohort, d cohort.Decision, now time.Time) error {
	// The cutoff is read from the clock inside the transaction:
	// a child's end committed before this close (on any daemon)
	// read its time earlier, so it stays before the cutoff.
	c.State, c.Cutoff = store.CohortClosing, later(now, s.e.clock.Now())
	c.Sufficient, c.Fuse = d.Sufficient, d.FuseClosed
	if err := tx.CohortPut(c); err != nil {
		return err
	}
	detail := map[string]any{"sufficient": c.Sufficient, "fuse": d.Fuse, "mature": c.Mature, "need": c.Need, "cutoff": c.Cutoff}
	if err := appendEvent(tx, s.run.ID, evCohortClosing, s.run.Attempt, node.ID, detail, c.Cutoff); err != nil {
		return err
	}
	if !c.Sufficient {
		return appendEvent(tx, s.run.ID, evInsufficient, s.run.Attempt, node.ID, detail, c.Cutoff)
	}
	return nil
}

// judge decides maturity of the items that ended since the parent last
// looked: published, and mature(ctx, item, result) if the node declares it.
func (s *stepper) judge(ctx context.Context, node *flows.Node, c *store.Cohort) (map[int]bool, error) {
	out := make(map[int]bool, len(c.Fresh))
	for _, i := range c.Fresh {
		var it *store.CohortItem
		if err := s.e.st.View(ctx, func(tx store.Tx) error {
			var err error
			it, err = tx.CohortItemGet(c.RunID, c.Node, c.Visit, i)
			return err
		}); err != nil {
			return nil, err
		}
		mature := it.State == store.ItemPublished
		if mature && node.Mature != nil {
			var item, result any
			_ = json.Unmarshal(it.Value, &item)
			_ = json.Unmarshal(it.Result, &result)
			v, err := s.fe.call(s.evalCtx(), *node.Mature, s.flowCtx(), item, result)
			mature = err == nil && truthy(v)
		}
		out[i] = mature
	}
	return out, nil
}

// stopInFlightTx stops the unprotected children still in flight after the
// grace period: queued tool tasks are deleted, held ones and child runs are
// cancelled through the normal cancel path after the commit (ct says which
// child runs a worker holds and how many finished).
func (s *stepper) stopInFlightTx(tx store.Tx, c *store.Cohort, now time.Time) (tasks []string, ct cancelTree, err error) {
	items, err := tx.CohortItemList(c.RunID, c.Node, c.Visit)
	if err != nil {
		return nil, ct, err
	}
	for _, it := range items {
		if it.State != store.ItemAdmitted {
			continue
		}
		if slices.Contains(c.Asking, it.Index) {
			// It waited for a person to resolve its call: it waits no
			// more, and its outcome stays unknown (markUnknownTx below).
			c.Asking = slices.DeleteFunc(c.Asking, func(i int) bool { return i == it.Index })
			it.Error = nil
		}
		// Parked on its exhaustion: its task is deleted below, and its
		// dead letter can no longer be redriven (notParked).
		c.Exhausted = slices.DeleteFunc(c.Exhausted, func(i int) bool { return i == it.Index })
		it.State, it.At = store.ItemStopped, now
		if err := tx.CohortItemPut(it); err != nil {
			return nil, ct, err
		}
		c.InFlight--
		c.Stopped++
		// A call that is not idempotent started and not recorded may have
		// had its effect: the item says so (docs/design.md §3).
		started, err := startedUnrecordedTx(tx, c, it)
		if err != nil {
			return nil, ct, err
		}
		if started != "" {
			if err := markUnknownTx(tx, c, it, unknownStopMessage(started), now); err != nil {
				return nil, ct, err
			}
		}
		if strings.HasPrefix(it.Child, "run_") {
			run, err := tx.RunGet(it.Child)
			if err == nil && !run.Phase.Terminal() {
				if err := s.e.journal.cancelTx(tx, run, "cohort "+c.Node, now, &ct); err != nil {
					return nil, ct, err
				}
			}
			continue
		}
		t, err := tx.TaskGet(it.Child)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, ct, err
		}
		if t.Leased {
			tasks = append(tasks, t.ID)
			continue
		}
		if err := tx.TaskDelete(t.ID); err != nil {
			return nil, ct, err
		}
	}
	return tasks, ct, appendEvent(tx, s.run.ID, evCohortStopped, s.run.Attempt, c.Node, map[string]any{"stopped": c.Stopped}, now)
}

// stopChildren cancels the calls of stopped children held by workers.
func (s *stepper) stopChildren(tasks, runs []string) {
	e := s.e
	e.held.cancelItems(tasks)
	cancelHeld(e.held, runs, nil)
}

// cohortReduce finishes a closing cohort in the fixed order of docs/design.md §7:
// collect the results published before the cutoff, canonicalize them,
// update the canonical state, update the derived state (reduce), then
// write the marker together with the node's result and the run's advance.
// Every step is idempotent: a crash anywhere is finished on resume with
// the same cutoff, never skipped, and what arrived after the cutoff stays
// out.
func (s *stepper) cohortReduce(ctx context.Context, node *flows.Node, c *store.Cohort) bool {
	e := s.e
	var items []*store.CohortItem
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		items, err = tx.CohortItemList(c.RunID, c.Node, c.Visit)
		return err
	}); err != nil {
		e.admission.storageFailed(err)
		return false
	}
	published, late, unknown := []any{}, []any{}, []any{}
	publishedItems := []any{} // publishedItems[i] gave published[i]
	for _, it := range items {
		var v, item any
		_ = json.Unmarshal(it.Result, &v)
		_ = json.Unmarshal(it.Value, &item)
		if it.Error != nil && it.Error.Code == CodeOutcomeUnknown {
			unknown = append(unknown, map[string]any{"index": it.Index, "item": item, "state": string(it.State),
				"error": map[string]any{"code": it.Error.Code, "message": it.Error.Message}})
		}
		switch {
		case it.State == store.ItemPublished && !it.At.After(c.Cutoff):
			published = append(published, v)
			publishedItems = append(publishedItems, item)
		case it.State == store.ItemLate || (it.State == store.ItemPublished && it.At.After(c.Cutoff)):
			late = append(late, map[string]any{"item": item, "result": v})
		}
	}
	canonical, err := canonicalInput(mustJSON(published))
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
	}
	if !s.commit(ctx, func(tx store.Tx) error {
		return s.cohortUpdateTx(tx, c, func(c *store.Cohort) { c.Canonical = canonical })
	}) {
		return false
	}
	failpoint.Hit(failpoint.ReduceCanonical)
	derived := json.RawMessage(canonical)
	if node.Reduce != nil {
		// reduce(ctx, results, items); the evaluator drops items for a
		// reduce that takes two arguments.
		v, err := s.fe.call(s.evalCtx(), *node.Reduce, s.flowCtx(), published, publishedItems)
		if err != nil {
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: "reduce: " + err.Error()})
		}
		if derived, err = json.Marshal(v); err != nil {
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: "reduce: " + err.Error()})
		}
	}
	if !s.commit(ctx, func(tx store.Tx) error { return s.cohortUpdateTx(tx, c, func(c *store.Cohort) { c.Derived = derived }) }) {
		return false
	}
	failpoint.Hit(failpoint.ReduceDerived)
	result := mustJSON(map[string]any{"results": derived, "late": late, "unknown": unknown, "sufficient": c.Sufficient, "cutoff": c.Cutoff})
	now := e.clock.Now()
	return s.resultDoneTx(ctx, node, result, map[string]any{"sufficient": c.Sufficient, "published": len(published), "late": len(late)}, func(tx store.Tx) error {
		if err := s.cohortUpdateTx(tx, c, func(c *store.Cohort) { c.State, c.Marker = store.CohortClosed, true }); err != nil {
			return err
		}
		return appendEvent(tx, s.run.ID, evCohortClosed, s.run.Attempt, node.ID, map[string]any{"cutoff": c.Cutoff, "sufficient": c.Sufficient, "marker": true}, now)
	})
}

// cohortUpdateTx re-reads the cohort in tx (children change its counters
// concurrently) and applies f.
func (s *stepper) cohortUpdateTx(tx store.Tx, c *store.Cohort, f func(*store.Cohort)) error {
	cur, err := tx.CohortGet(c.RunID, c.Node, c.Visit)
	if err != nil {
		return err
	}
	f(cur)
	*c = *cur
	return tx.CohortPut(cur)
}

// childEndedTx records a fan-out child's end on its cohort item and wakes
// the parent (unless the cohort is closed): the one who knows tells. After
// the cutoff the result is kept as late and stays out of the batch.
//
// now is read again here, inside the transaction: a time read before it
// may precede a close that another daemon committed meanwhile. And a late
// end is stamped no earlier than the cutoff, whatever this daemon's clock
// says, since it committed after the close.
func (j *journal) childEndedTx(tx store.Tx, parentID string, ref *store.CohortRef, ok bool, result json.RawMessage, rerr *store.RunError, now time.Time) (bool, error) {
	now = later(now, j.clock.Now())
	c, err := tx.CohortGet(parentID, ref.Node, ref.Visit)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	it, err := tx.CohortItemGet(parentID, ref.Node, ref.Visit, ref.Item)
	if err != nil {
		return false, err
	}
	if it.State != store.ItemAdmitted {
		// Stopped (or timed out): its end changes nothing, except that a
		// stopped child whose call's outcome turned out unknown says so.
		if it.State == store.ItemStopped && rerr != nil && rerr.Code == CodeOutcomeUnknown && it.Error == nil {
			if err := markUnknownTx(tx, c, it, "stopped by its cohort; the child run then ended with: "+rerr.Message, now); err != nil {
				return false, err
			}
			return false, tx.CohortPut(c)
		}
		return false, nil
	}
	it.Result, it.Error, it.At = result, rerr, now
	c.InFlight--
	switch {
	case c.State == store.CohortClosing || c.State == store.CohortClosed:
		it.State = store.ItemLate
		c.Late++
		now = later(now, c.Cutoff)
		it.At = now
	case ok:
		it.State = store.ItemPublished
		c.Published++
		c.Fresh = append(c.Fresh, ref.Item)
	default:
		it.State = store.ItemFailed
		c.Failed++
		c.Fresh = append(c.Fresh, ref.Item)
	}
	if err := tx.CohortItemPut(it); err != nil {
		return false, err
	}
	if err := tx.CohortPut(c); err != nil {
		return false, err
	}
	detail := map[string]any{"item": ref.Item, "state": string(it.State)}
	if strings.HasPrefix(it.Child, "task_") {
		detail["task"] = it.Child // the tool child's task ends here
		// Its call's arguments and answer, as a task's node_completed
		// carries them: a recording answers the item from them.
		detail["args"] = jsonOrEmpty(it.Input)
		if rerr == nil {
			detail["output"] = jsonOrNull(result)
		}
	} else {
		detail["child"] = it.Child
	}
	if rerr != nil {
		detail["code"] = rerr.Code
		detail["message"] = rerr.Message
	}
	// The parent's attempt, as on its other events.
	parent, err := tx.RunGet(parentID)
	if err != nil {
		return false, err
	}
	if err := appendEvent(tx, parentID, evItemDone, parent.Attempt, ref.Node, detail, now); err != nil {
		return false, err
	}
	if c.State == store.CohortClosed {
		return false, nil
	}
	t, err := tx.TaskGet(c.Task)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return wakeParkedTx(tx, t, now)
}

// CohortView is a cohort as `weir run get` shows it.
type CohortView struct {
	Node       string    `json:"node"`
	Visit      int       `json:"visit"`
	State      string    `json:"state"`
	Items      int       `json:"items"`
	Need       int       `json:"need"`
	Admitted   int       `json:"admitted"`
	InFlight   int       `json:"in_flight"`
	Published  int       `json:"published"`
	Mature     int       `json:"mature"`
	Failed     int       `json:"failed"`
	Stopped    int       `json:"stopped"`
	Late       int       `json:"late"`
	Cutoff     time.Time `json:"cutoff,omitzero"`
	Sufficient *bool     `json:"sufficient,omitempty"` // set once closing
	Marker     bool      `json:"marker"`
	// Unknown lists the items whose call's outcome is unknown
	// (E_OUTCOME_UNKNOWN): stopped or failed after a call that is not
	// idempotent started and before its result was recorded.
	Unknown []int `json:"unknown,omitempty"`
	// ChildBudget is what each child run reserves when its node and
	// flow declare no budget.
	ChildBudget int64 `json:"child_budget,omitempty"`
}

func cohortView(c *store.Cohort) CohortView {
	v := CohortView{Node: c.Node, Visit: c.Visit, State: string(c.State), Items: c.Items, Need: c.Need, Admitted: c.Next,
		InFlight: c.InFlight, Published: c.Published, Mature: c.Mature, Failed: c.Failed, Stopped: c.Stopped, Late: c.Late,
		Cutoff: c.Cutoff, Marker: c.Marker, Unknown: c.Unknown, ChildBudget: c.ChildBudget}
	if c.State == store.CohortClosing || c.State == store.CohortClosed {
		suff := c.Sufficient
		v.Sufficient = &suff
	}
	return v
}

// itemFailedTx ends an item failed with rerr before its child ended by
// itself (refused at admission, or timed out), as childEndedTx would:
// the cohort counts it failed and judges it at its next look. The caller
// adjusts InFlight and writes c.
func itemFailedTx(tx store.Tx, c *store.Cohort, it *store.CohortItem, child string, rerr *store.RunError, now time.Time) error {
	it.State, it.Error, it.At = store.ItemFailed, rerr, now
	c.Failed++
	c.Fresh = append(c.Fresh, it.Index)
	if err := tx.CohortItemPut(it); err != nil {
		return err
	}
	detail := map[string]any{"item": it.Index, "state": string(it.State), "code": rerr.Code, "message": rerr.Message}
	if child != "" {
		detail["child"] = child
	}
	return appendEvent(tx, c.RunID, evItemDone, 0, c.Node, detail, now)
}

// childDeadlines reads, for a flow fan-out with a timeout, which child
// runs in flight are past their deadline at now (due) and the earliest
// deadline still ahead (zero: none). The transaction re-reads each due
// item before acting on it.
func (s *stepper) childDeadlines(ctx context.Context, node *flows.Node, c *store.Cohort, now time.Time) (due []int, next time.Time, err error) {
	if node.Flow == "" || node.Timeout <= 0 || c.InFlight == 0 {
		return nil, time.Time{}, nil
	}
	var items []*store.CohortItem
	if err := s.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		items, err = tx.CohortItemList(c.RunID, c.Node, c.Visit)
		return err
	}); err != nil {
		return nil, time.Time{}, err
	}
	for _, it := range items {
		switch {
		case it.State != store.ItemAdmitted || it.Deadline.IsZero():
		case !now.Before(it.Deadline):
			due = append(due, it.Index)
		case next.IsZero() || it.Deadline.Before(next):
			next = it.Deadline
		}
	}
	return due, next, nil
}

// timeOutChildrenTx ends the child runs of due items still in flight
// past their deadline, as a tool child's timeout ends its call: the item
// fails with E_CHILD_TIMEOUT and the child run is cancelled through the
// cancel path, its descendants with it (ct says which a worker holds).
func (s *stepper) timeOutChildrenTx(tx store.Tx, node *flows.Node, c *store.Cohort, due []int, now time.Time, ct *cancelTree) error {
	for _, i := range due {
		it, err := tx.CohortItemGet(c.RunID, c.Node, c.Visit, i)
		if err != nil {
			return err
		}
		if it.State != store.ItemAdmitted || it.Deadline.IsZero() || now.Before(it.Deadline) {
			continue // ended meanwhile
		}
		c.InFlight--
		rerr := &store.RunError{Code: CodeChildTimeout, Message: fmt.Sprintf("child run %s of item %d did not finish within %s", it.Child, i, node.Timeout)}
		if err := itemFailedTx(tx, c, it, it.Child, rerr, now); err != nil {
			return err
		}
		run, err := tx.RunGet(it.Child)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if !run.Phase.Terminal() {
			if err := s.e.journal.cancelTx(tx, run, "timeout of "+node.ID, now, ct); err != nil {
				return err
			}
		}
	}
	return nil
}

// startedUnrecordedTx says what call of a stopped item's child had
// started without its result recorded ("" if none): the item's own call
// for a tool child, any call of the child run for a flow child.
func startedUnrecordedTx(tx store.Tx, c *store.Cohort, it *store.CohortItem) (string, error) {
	if strings.HasPrefix(it.Child, "run_") {
		recs, err := tx.IdemListRun(it.Child)
		if err != nil {
			return "", err
		}
		for _, r := range recs {
			if r.State == store.IdemStarted {
				return fmt.Sprintf("%s at node %s of child run %s", r.Tool, r.Node, it.Child), nil
			}
		}
		return "", nil
	}
	r, err := tx.IdemGet(itemKey(c, it.Index))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case r.State == store.IdemStarted:
		return r.Tool, nil
	}
	return "", nil
}

func unknownStopMessage(started string) string {
	return "stopped by its cohort after " + started + " (not idempotent) was started and before its result was recorded; it was not run again"
}

// itemKey is the idempotency key of a tool child's call (toolCall.key).
func itemKey(c *store.Cohort, item int) string { return idemKey(c.RunID, c.Node, c.Visit, item) }

// markUnknownTx records on a stopped item that the outcome of its call
// is unknown: the item's error, the cohort's list (the caller writes c)
// and an item_done event that says so.
func markUnknownTx(tx store.Tx, c *store.Cohort, it *store.CohortItem, msg string, now time.Time) error {
	if it.Error != nil && it.Error.Code == CodeOutcomeUnknown {
		return nil
	}
	it.Error = &store.RunError{Code: CodeOutcomeUnknown, Message: msg}
	if err := tx.CohortItemPut(it); err != nil {
		return err
	}
	if !slices.Contains(c.Unknown, it.Index) {
		c.Unknown = append(c.Unknown, it.Index)
	}
	detail := map[string]any{"item": it.Index, "state": string(it.State), "code": it.Error.Code, "message": it.Error.Message}
	if strings.HasPrefix(it.Child, "task_") {
		detail["task"] = it.Child
	} else if it.Child != "" {
		detail["child"] = it.Child
	}
	return appendEvent(tx, c.RunID, evItemDone, 0, c.Node, detail, now)
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
