package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// A fan-out that says on_unknown = "ask" parks an item whose call's outcome
// stays unknown on a wait of kind unknown, NODE@VISIT.ITEM.unknown.N (ITEM
// the item's index; DESIGN §12 places it as an agent call's
// NODE@VISIT.TURN.CALL): the item's task leaves the unknown on the item,
// which stays in flight (cohort.Asking), and the parent's step opens the
// wait and applies its answer. An item that waits is neither failed nor
// mature, so the cohort never closes as if it had failed; a quorum the
// other items meet closes it as it would with the item still running.

// itemAsk leaves the worker's item in flight with its unknown outcome
// rerr, listed as asking, and wakes the parent, in the transaction that
// drops the task; false when the item no longer waits for its call (its
// cohort closed, it was stopped): the caller ends it as any other.
func (w *worker) itemAsk(ctx context.Context, ref *store.CohortRef, rerr *store.RunError) bool {
	return w.itemHold(ctx, ref, rerr, func(c *store.Cohort) *[]int { return &c.Asking }, w.dropTaskTx)
}

// itemHold leaves the worker's item in flight with rerr on it, listed in
// the cohort's list (Asking, Exhausted) whose items the parent's step
// opens waits for, and wakes the parent, in one transaction with the
// task's own writes (taskTx); false when the item no longer waits for its
// call. The slice's reservation goes back: the call cost nothing known.
func (w *worker) itemHold(ctx context.Context, ref *store.CohortRef, rerr *store.RunError, list func(*store.Cohort) *[]int, taskTx func(tx store.Tx) error) bool {
	e, t := w.e, w.task
	now := e.clock.Now()
	var woke bool
	err := w.itemCommit(ctx, func(tx store.Tx) error {
		woke = false
		c, err := tx.CohortGet(t.RunID, ref.Node, ref.Visit)
		if err != nil {
			return err
		}
		it, err := tx.CohortItemGet(t.RunID, ref.Node, ref.Visit, ref.Item)
		if err != nil {
			return err
		}
		if it.State != store.ItemAdmitted || it.Child != t.ID || c.State == store.CohortClosing || c.State == store.CohortClosed {
			return errSkip
		}
		it.Error = rerr
		if err := tx.CohortItemPut(it); err != nil {
			return err
		}
		if l := list(c); !slices.Contains(*l, ref.Item) {
			*l = append(*l, ref.Item)
		}
		if err := tx.CohortPut(c); err != nil {
			return err
		}
		parent, err := tx.TaskGet(c.Task)
		switch {
		case err == nil:
			if woke, err = wakeParkedTx(tx, parent, now); err != nil {
				return err
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		return taskTx(tx)
	})
	if err != nil {
		return false
	}
	w.setLease(nil, true)
	w.slice, _, _ = e.ledger.Reslice(w.slice, w.spent, 0)
	w.spent = 0
	if woke {
		e.wake.kick()
	}
	return true
}

// itemWaits is itemUnknowns and itemExhaustedWaits: the items' waits open
// (an exhausted one has no deadline: a redrive ends it) and those to
// settle in the parent's commit.
func (s *stepper) itemWaits(ctx context.Context, node *flows.Node, snap *store.Cohort, now time.Time) ([]*waitState, []itemSettle, error) {
	open, settle, err := s.itemUnknowns(ctx, node, snap, now)
	if err != nil {
		return nil, nil, err
	}
	exhausted, err := s.itemExhaustedWaits(ctx, snap, node.Tool, now)
	return append(open, exhausted...), settle, err
}

// itemSettle is an asking item whose wait the parent applies in its
// commit: resolved (happened or not) or past its deadline.
type itemSettle struct {
	item   int
	action callUnknownAction
	ws     *waitState
}

// itemUnknowns looks at the asking items of snap: it opens the wait of
// one that has none, and returns the waits still open and the items to
// settle in the parent's commit (applyItemUnknownsTx). A wait of an item
// that no longer asks or is no longer exhausted (stopped by its cohort,
// redriven) is dropped.
func (s *stepper) itemUnknowns(ctx context.Context, node *flows.Node, snap *store.Cohort, now time.Time) (open []*waitState, settle []itemSettle, err error) {
	for id, ws := range s.cont.Approvals {
		if ws.Node != node.ID || ws.Visit != snap.Visit || len(ws.Call) != 1 {
			continue
		}
		if (ws.Kind == WaitUnknown && !slices.Contains(snap.Asking, ws.Call[0])) || (ws.Kind == WaitExhausted && !slices.Contains(snap.Exhausted, ws.Call[0])) {
			s.cont.consumed(ws)
			delete(s.cont.Approvals, id)
		}
	}
	for _, i := range snap.Asking {
		base := WaitID(node.ID, snap.Visit, i)
		ws := s.callUnknownWait(base)
		switch a := decideCallUnknown(ws, now); a {
		case unknownAsk:
			var shown unknownShown
			if err := s.e.st.View(ctx, func(tx store.Tx) error {
				it, err := tx.CohortItemGet(snap.RunID, snap.Node, snap.Visit, i)
				if err != nil {
					return err
				}
				shown, err = unknownShownTx(tx, itemKey(snap, i), node.Tool, it.Input, it.Error)
				return err
			}); err != nil {
				return nil, nil, err
			}
			open = append(open, s.openCallUnknown(node, snap.Visit, base, []int{i}, shown, now, now.Add(unknownTimeout(node))))
		case unknownWaiting:
			open = append(open, ws)
		default:
			s.settleCallUnknown(ws)
			settle = append(settle, itemSettle{item: i, action: a, ws: ws})
		}
	}
	return open, settle, nil
}

// applyItemUnknownsTx applies the settled waits of asking items: happened
// ends the item with the resolved result, not happened queues its call
// once more on a new task (its idempotency record says not sent), a wait
// past its deadline fails it E_OUTCOME_UNKNOWN. Each leaves the asking
// list.
func (s *stepper) applyItemUnknownsTx(tx store.Tx, node *flows.Node, snap *store.Cohort, settle []itemSettle, now time.Time) error {
	for _, st := range settle {
		ref := &store.CohortRef{Node: snap.Node, Visit: snap.Visit, Item: st.item}
		it, err := tx.CohortItemGet(snap.RunID, snap.Node, snap.Visit, st.item)
		if err != nil {
			return err
		}
		if it.State == store.ItemAdmitted {
			switch st.action {
			case unknownHappened:
				out, err := resolvedResultTx(tx, itemKey(snap, st.item))
				if err != nil {
					return err
				}
				if _, err := s.e.journal.childEndedTx(tx, s.run.ID, ref, true, out, nil, now); err != nil {
					return err
				}
			case unknownExpired:
				if _, err := s.e.journal.childEndedTx(tx, s.run.ID, ref, false, nil, unresolvedErr(node.Tool, st.ws), now); err != nil {
					return err
				}
			case unknownRemake:
				task := &store.Task{ID: newID("task"), RunID: s.run.ID, Owner: s.run.Owner, Kind: store.TaskItem, Node: node.ID, Visit: snap.Visit,
					Item: st.item, Attempt: 1, ReadyAt: now, CreatedAt: now}
				if err := tx.TaskPut(task); err != nil {
					return err
				}
				it.Error, it.Child = nil, task.ID
				if err := tx.CohortItemPut(it); err != nil {
					return err
				}
			}
		}
		c, err := tx.CohortGet(snap.RunID, snap.Node, snap.Visit)
		if err != nil {
			return err
		}
		c.Asking = slices.DeleteFunc(c.Asking, func(i int) bool { return i == st.item })
		if err := tx.CohortPut(c); err != nil {
			return err
		}
	}
	return nil
}
