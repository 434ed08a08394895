package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

// TestWakeWhileHeldIsNotLost: a wake that comes while a worker holds the
// task — after the holder read the wait's state, before it parks — makes
// the park end now instead of at the fallback; the holder's other writes
// keep the mark; without a wake the park keeps its time. Before the one
// wake path, a child's end while its parent was held was written under
// the holder's copy (lost until the fallback rang), and an agent call's or
// an item's end was not written at all.
func TestWakeWhileHeldIsNotLost(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := t0.Add(time.Hour)
	for _, tt := range []struct {
		name        string
		wake        func(tx store.Tx, now time.Time) error
		holderPuts  bool // the holder writes its copy once more before parking
		wantReadyAt time.Time
	}{
		{"no wake", nil, false, later},
		{"a child's end", func(tx store.Tx, now time.Time) error { _, err := wakeWaiterTx(tx, "run_child", now); return err }, false, t0},
		{"a wake of the task", func(tx store.Tx, now time.Time) error {
			cur, err := tx.TaskGet("task_p")
			if err != nil {
				return err
			}
			_, err = wakeParkedTx(tx, cur, now)
			return err
		}, false, t0},
		{"a child's end, then the holder's own write", func(tx store.Tx, now time.Time) error { _, err := wakeWaiterTx(tx, "run_child", now); return err }, true, t0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			defer st.Close()
			ctx := context.Background()
			held := &store.Task{ID: "task_p", RunID: "run_p", Kind: store.TaskStep, Attempt: 1, ReadyAt: t0, Leased: true, WaitKind: "child", WaitChild: "run_child", CreatedAt: t0}
			update := func(fn func(tx store.Tx) error) {
				t.Helper()
				if err := st.Update(ctx, fn); err != nil {
					t.Fatal(err)
				}
			}
			update(func(tx store.Tx) error { return tx.TaskPut(held) })
			holder := *held // what the worker read when it took the task
			if tt.wake != nil {
				update(func(tx store.Tx) error { return tt.wake(tx, t0) })
			}
			if tt.holderPuts {
				update(func(tx store.Tx) error { return putHeldTx(tx, &holder) })
			}
			var parked *store.Task
			update(func(tx store.Tx) error {
				var err error
				parked, err = parkHeldTx(tx, &holder, t0, later)
				return err
			})
			var stored *store.Task
			if err := st.View(ctx, func(tx store.Tx) error {
				var err error
				stored, err = tx.TaskGet("task_p")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if !stored.ReadyAt.Equal(tt.wantReadyAt) || stored.Leased || stored.Woken || !parked.ReadyAt.Equal(stored.ReadyAt) {
				t.Fatalf("parked until %v (leased %v, woken %v; returned %v), want %v", stored.ReadyAt, stored.Leased, stored.Woken, parked.ReadyAt, tt.wantReadyAt)
			}
		})
	}
}

// TestWakeParkedDue: a parked task is made ready now; one due already is
// left as it is and nothing is written.
func TestWakeParkedDue(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	defer st.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		readyAt time.Time
		woke    bool
	}{{t0.Add(time.Minute), true}, {t0, false}, {t0.Add(-time.Minute), false}} {
		task := &store.Task{ID: "task_x", RunID: "run_x", Kind: store.TaskStep, ReadyAt: tt.readyAt, CreatedAt: t0}
		err := st.Update(context.Background(), func(tx store.Tx) error {
			woke, err := wakeParkedTx(tx, task, t0)
			if woke != tt.woke || (woke && !task.ReadyAt.Equal(t0)) {
				t.Errorf("ready at %v: woke %v (now ready at %v), want %v", tt.readyAt, woke, task.ReadyAt, tt.woke)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCancelWhileHeldWakesThePark: a cancel that finds the run's step task
// held marks it woken, so a worker parking it at that moment parks it
// until now and the next lease finishes the run cancelled; before, the
// run stayed parked with its cancel recorded and nobody to act on it (a
// fan-out's timed-out child seen "waiting" forever).
func TestCancelWhileHeldWakesThePark(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, "")
	ctx := context.Background()
	now := b.clock.Now()
	run := &store.Run{ID: "run_c", Flow: "f", Owner: "alice", Phase: store.PhaseWaiting, Attempt: 1, CreatedAt: now, UpdatedAt: now}
	held := &store.Task{ID: "task_c", RunID: run.ID, Kind: store.TaskStep, Attempt: 1, ReadyAt: now, Leased: true, CreatedAt: now}
	if err := b.mem.Update(ctx, func(tx store.Tx) error {
		if err := tx.RunInsert(run); err != nil {
			return err
		}
		return tx.TaskPut(held)
	}); err != nil {
		t.Fatal(err)
	}
	holder := *held
	var c cancelTree
	if err := b.mem.Update(ctx, func(tx store.Tx) error { return b.eng.journal.cancelTx(tx, run, "alice", now, &c) }); err != nil {
		t.Fatal(err)
	}
	if len(c.held) != 1 {
		t.Fatalf("the cancel did not find the run held: %+v", c)
	}
	var parked *store.Task
	if err := b.mem.Update(ctx, func(tx store.Tx) error {
		var err error
		parked, err = parkHeldTx(tx, &holder, now, now.Add(24*time.Hour))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if parked.ReadyAt.After(now) {
		t.Fatalf("parked until %v after a cancel, want now (%v)", parked.ReadyAt, now)
	}
}

// TestNoChildAfterTheParentsCancel: a child run is not started once its
// parent's cancel is recorded: the cancel's cascade could not find it, and
// it would live on, orphaned (a fan-out child's subflow started in the
// same tick as the fan-out's timeout stayed leased for ever).
func TestNoChildAfterTheParentsCancel(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, "")
	ctx := context.Background()
	now := b.clock.Now()
	parent := &store.Run{ID: "run_p", Flow: "f", Owner: "alice", Phase: store.PhaseRunning, Attempt: 1, CancelRequested: true, CreatedAt: now, UpdatedAt: now}
	child := &store.Run{ID: "run_k", Flow: "f", Owner: "alice", Phase: store.PhaseRunning, Attempt: 1, ParentRunID: parent.ID, CreatedAt: now, UpdatedAt: now}
	task := &store.Task{ID: "task_k", RunID: child.ID, Kind: store.TaskStep, Attempt: 1, ReadyAt: now, CreatedAt: now}
	err := b.mem.Update(ctx, func(tx store.Tx) error {
		if err := tx.RunInsert(parent); err != nil {
			return err
		}
		return b.eng.journal.insertRun(tx, child, task, "n", nil)
	})
	if !errors.Is(err, errCancelSeen) {
		t.Fatalf("a child of a cancelled parent: %v, want errCancelSeen", err)
	}
	err = b.mem.View(ctx, func(tx store.Tx) error { _, err := tx.RunGet(child.ID); return err })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the child was stored: %v", err)
	}
}
