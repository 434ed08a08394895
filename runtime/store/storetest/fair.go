package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// testTaskListReadyByOwner: the heads of every owner's queue, whatever
// another owner has queued ahead; an owner taken from the task's run when
// the task names none; leased, parked and deleted tasks never listed.
func testTaskListReadyByOwner(t *testing.T, s store.Store, _ Opener) {
	owned := func(id, run, owner string, ready time.Time) *store.Task {
		tk := newTask(id, run, ready)
		tk.Owner = owner
		return tk
	}
	update(t, s, func(tx store.Tx) error {
		errs := []error{
			tx.RunInsert(newRun("r-bob", "bob", store.PhaseQueued)),
			tx.RunInsert(newRun("r-carol", "carol", store.PhaseQueued)),
		}
		// alice has five tasks ahead of everyone else's.
		for i, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
			errs = append(errs, tx.TaskPut(owned(id, "r-alice", "alice", at(time.Duration(i+1)*time.Second))))
		}
		errs = append(errs,
			tx.TaskPut(owned("c1", "r-carol", "carol", at(3*time.Second))),
			// bob's task names no owner: it is its run's.
			tx.TaskPut(newTask("b1", "r-bob", at(10*time.Second))),
			tx.TaskPut(owned("d1", "r-dave", "dave", at(time.Hour))), // parked
			func() error {
				l := owned("e1", "r-erin", "erin", t0)
				l.Leased = true
				return tx.TaskPut(l)
			}(),
		)
		return first(errs...)
	})
	type listed struct{ ID, Owner string }
	heads := func(tx store.Tx, p store.TaskListReadyByOwnerParams) ([]listed, error) {
		ts, err := tx.TaskListReadyByOwner(p)
		out := []listed{}
		for _, tk := range ts {
			out = append(out, listed{tk.ID, tk.Owner})
		}
		return out, err
	}
	for _, c := range []struct {
		name string
		p    store.TaskListReadyByOwnerParams
		want []listed
	}{
		{"each owner's heads, owners by their oldest task", store.TaskListReadyByOwnerParams{Now: at(time.Minute), PerOwner: 2},
			[]listed{{"a1", "alice"}, {"a2", "alice"}, {"c1", "carol"}, {"b1", "bob"}}},
		{"limit", store.TaskListReadyByOwnerParams{Now: at(time.Minute), PerOwner: 2, Limit: 3},
			[]listed{{"a1", "alice"}, {"a2", "alice"}, {"c1", "carol"}}},
		{"no per-owner bound", store.TaskListReadyByOwnerParams{Now: at(time.Minute)},
			[]listed{{"a1", "alice"}, {"a2", "alice"}, {"a3", "alice"}, {"a4", "alice"}, {"a5", "alice"}, {"c1", "carol"}, {"b1", "bob"}}},
		{"ready time is inclusive", store.TaskListReadyByOwnerParams{Now: at(3 * time.Second), PerOwner: 1},
			[]listed{{"a1", "alice"}, {"c1", "carol"}}},
		{"parked task at its time", store.TaskListReadyByOwnerParams{Now: at(time.Hour), PerOwner: 1},
			[]listed{{"a1", "alice"}, {"c1", "carol"}, {"b1", "bob"}, {"d1", "dave"}}},
	} {
		got := read(t, s, func(tx store.Tx) ([]listed, error) { return heads(tx, c.p) })
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// Leasing alice's head, deleting carol's task and moving bob's ahead
	// of everyone show in the same transaction's listing and after it.
	want := []listed{{"b1", "bob"}, {"a2", "alice"}}
	update(t, s, func(tx store.Tx) error {
		a1, err := tx.TaskGet("a1")
		if err != nil {
			return err
		}
		a1.Leased = true
		b1, err := tx.TaskGet("b1")
		if err != nil {
			return err
		}
		b1.ReadyAt = time.Time{}
		if err := first(tx.TaskPut(a1), tx.TaskPut(b1), tx.TaskDelete("c1")); err != nil {
			return err
		}
		got, err := heads(tx, store.TaskListReadyByOwnerParams{Now: at(time.Minute), PerOwner: 1})
		return first(err, same("heads inside the transaction", got, want))
	})
	got := read(t, s, func(tx store.Tx) ([]listed, error) {
		return heads(tx, store.TaskListReadyByOwnerParams{Now: at(time.Minute), PerOwner: 1})
	})
	if !slices.Equal(got, want) {
		t.Errorf("after the commit: %v, want %v", got, want)
	}
}
