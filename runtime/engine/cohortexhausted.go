package engine

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// A fan-out that says on_exhausted = "park" parks an item whose task used
// up its tries instead of failing it: the task is dead-lettered and stays,
// parked, the item stays in flight (cohort.Exhausted), and the parent's
// step opens the item's wait of kind exhausted, NODE@VISIT.ITEM.exhausted.N,
// among the per-call waits. A redrive (redriveItemTx) sends the task back
// with its tries counted afresh and the same idempotency key; the item
// then ends as any other.

// itemParkExhausted dead-letters dl (the worker's item task with every
// try's error) for tool, parks it and leaves its item in flight with rerr,
// listed as exhausted, waking the parent, in one transaction; false when
// the item no longer waits for its call (its cohort closed, it was
// stopped): the caller ends it as any other.
func (w *worker) itemParkExhausted(ctx context.Context, ref *store.CohortRef, run *store.Run, dl *store.Task, tool string, rerr *store.RunError) bool {
	e, t := w.e, w.task
	held := w.itemHold(ctx, ref, rerr, func(c *store.Cohort) *[]int { return &c.Exhausted }, func(tx store.Tx) error {
		if err := e.journal.deadLetterTx(tx, run, dl, tool); err != nil {
			return err
		}
		parked := *dl
		parked.Leased, parked.Woken, parked.WaitKind, parked.ReadyAt = false, false, WaitExhausted, e.clock.Now().Add(noTimeout)
		if err := tx.TaskPut(&parked); err != nil {
			return err
		}
		return tx.LeaseDelete(t.ID)
	})
	if held {
		e.stats.deadLettered()
		failpoint.Hit(failpoint.ExhaustedParked)
	}
	return held
}

// itemExhaustedWaits opens the wait of each exhausted item of snap that
// has none (its number counted under the item's place in s.cont.Exhausted)
// and returns the waits open: a redrive ends them.
func (s *stepper) itemExhaustedWaits(ctx context.Context, snap *store.Cohort, tool string, now time.Time) ([]*waitState, error) {
	var open []*waitState
	for _, i := range snap.Exhausted {
		base := WaitID(snap.Node, snap.Visit, i)
		if ws := s.cont.Approvals[exhaustedWaitIDAt(base, s.cont.Exhausted[base].N)]; ws != nil {
			open = append(open, ws)
			continue
		}
		var shown map[string]any
		if err := s.e.st.View(ctx, func(tx store.Tx) error {
			it, err := tx.CohortItemGet(snap.RunID, snap.Node, snap.Visit, i)
			if err != nil {
				return err
			}
			shown = map[string]any{"task": it.Child, "tool": tool, "item": i, "error": it.Error}
			if t, err := tx.TaskGet(it.Child); err == nil {
				shown["tries"] = len(t.Errors)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if s.cont.Exhausted == nil {
			s.cont.Exhausted = map[string]exhaustCount{}
		}
		n := s.cont.Exhausted[base]
		n.Visit, n.N = snap.Visit, n.N+1
		s.cont.Exhausted[base] = n
		ws := &waitState{ID: exhaustedWaitIDAt(base, n.N), Kind: WaitExhausted, Node: snap.Node, Since: now, Until: now.Add(noTimeout),
			Visit: snap.Visit, Call: []int{i}, Shown: mustJSON(shown)}
		if s.cont.Approvals == nil {
			s.cont.Approvals = map[string]*waitState{}
		}
		s.cont.Approvals[ws.ID] = ws
		open = append(open, ws)
	}
	return open, nil
}
