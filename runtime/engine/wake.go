package engine

import (
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// wakeParkedTx is the one way a task is told that what it waits for has
// come: a child's end (wakeWaiterTx), a fan-out item's end
// (childEndedTx), an agent call's end, a person's decision. Its one guard:
// a task due already is left as it is. A task a worker holds cannot be
// made ready under it; it is marked Woken instead, and its holder, which
// may have read the wait's state before the waker committed, finds the
// mark when it parks the task (parkHeldTx) and parks it until now, not
// until its fallback: the wake is never lost between the holder's check
// and its commit. woke reports that the task was made ready now (the
// scheduler has something to list).
func wakeParkedTx(tx store.Tx, t *store.Task, now time.Time) (woke bool, err error) {
	switch {
	case t.Leased:
		if t.Woken {
			return false, nil
		}
		t.Woken = true
		return false, tx.TaskPut(t)
	case t.ReadyAt.After(now):
		t.ReadyAt = now
		return true, tx.TaskPut(t)
	}
	return false, nil
}

// putHeldTx writes the holder's copy of its task, keeping a wake that came
// while it was held (the stored Woken): a blind write would erase it.
func putHeldTx(tx store.Tx, held *store.Task) error {
	t := *held
	cur, err := tx.TaskGet(t.ID)
	if err != nil {
		return err
	}
	t.Woken = t.Woken || cur.Woken
	return tx.TaskPut(&t)
}

// parkHeldTx gives the holder's task back to the queue at readyAt — now
// to yield or retry, later to park on a wait — unless a wake came while
// it was held: then it is ready now, so that the step looks at its wait
// again at once. It returns the task as written.
func parkHeldTx(tx store.Tx, held *store.Task, now, readyAt time.Time) (*store.Task, error) {
	t := *held
	cur, err := tx.TaskGet(t.ID)
	if err != nil {
		return nil, err
	}
	if (cur.Woken || t.Woken) && readyAt.After(now) {
		readyAt = now
	}
	t.Leased, t.Woken, t.ReadyAt = false, false, readyAt
	return &t, tx.TaskPut(&t)
}
