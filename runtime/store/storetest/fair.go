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
		if err := first(ChangeTask(tx, "a1", func(tk *store.Task) { tk.Leased = true }),
			ChangeTask(tx, "b1", func(tk *store.Task) { tk.ReadyAt = time.Time{} }),
			tx.TaskDelete("c1")); err != nil {
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

// testOwnerIndexFollowsTasks: after any sequence of TaskPut and
// TaskDelete — owners given or taken from the run, runs inserted after
// their tasks, leases taken and given back, ready times moved — the fair
// listing holds exactly the unleased tasks ready by now, each under its
// owner, and never fails on an index entry left behind.
func testOwnerIndexFollowsTasks(t *testing.T, s store.Store, _ Opener) {
	type want struct {
		owner  string
		ready  time.Time
		leased bool
	}
	model := map[string]want{}
	runOwner := map[string]string{"r-alice": "alice", "r-bob": "bob"}
	update(t, s, func(tx store.Tx) error {
		return first(tx.RunInsert(newRun("r-alice", "alice", store.PhaseQueued)), tx.RunInsert(newRun("r-bob", "bob", store.PhaseQueued)))
	})
	now := at(time.Minute)
	check := func(step string) {
		t.Helper()
		got := read(t, s, func(tx store.Tx) ([]*store.Task, error) {
			return tx.TaskListReadyByOwner(store.TaskListReadyByOwnerParams{Now: now})
		})
		gotIDs := map[string]string{}
		for _, tk := range got {
			gotIDs[tk.ID] = tk.Owner
		}
		wantIDs := map[string]string{}
		for id, w := range model {
			if !w.leased && !w.ready.After(now) {
				wantIDs[id] = w.owner
			}
		}
		if err := same(step, gotIDs, wantIDs); err != nil {
			t.Fatal(err)
		}
	}
	put := func(step, id, run, owner string, ready time.Time, leased bool) {
		t.Helper()
		tk := newTask(id, run, ready)
		tk.Owner, tk.Leased = owner, leased
		update(t, s, func(tx store.Tx) error { return tx.TaskPut(tk) })
		if owner == "" {
			owner = runOwner[run]
		}
		model[id] = want{owner, ready, leased}
		check(step)
	}
	del := func(step, id string) {
		t.Helper()
		update(t, s, func(tx store.Tx) error { return tx.TaskDelete(id) })
		delete(model, id)
		check(step)
	}
	put("named owner", "t1", "r-alice", "alice", at(time.Second), false)
	put("owner from the run", "t2", "r-bob", "", at(2*time.Second), false)
	put("leased", "t1", "r-alice", "alice", at(time.Second), true)
	put("given back, later", "t1", "r-alice", "alice", at(3*time.Second), false)
	put("parked past now", "t2", "r-bob", "", at(time.Hour), false)
	put("ready again, owner named now", "t2", "r-bob", "bob", at(4*time.Second), false)
	// A task put before its run exists has no owner to take; the run
	// inserted afterwards must not strand its index entry.
	put("run not there yet", "t3", "r-carol", "", at(5*time.Second), false)
	update(t, s, func(tx store.Tx) error { return tx.RunInsert(newRun("r-carol", "carol", store.PhaseQueued)) })
	runOwner["r-carol"] = "carol"
	put("put again once its run exists", "t3", "r-carol", "", at(6*time.Second), false)
	del("deleted", "t3")
	put("another before its run", "t4", "r-dave", "", at(7*time.Second), false)
	update(t, s, func(tx store.Tx) error { return tx.RunInsert(newRun("r-dave", "dave", store.PhaseQueued)) })
	del("deleted once its run exists", "t4")
	del("leased then deleted", "t1")
	del("last one", "t2")
}
