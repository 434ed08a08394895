package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// TestUnitAwaitRunIsWokenByTheCommit: AwaitRun on a running run returns
// with the run ended once its last commit is made, the fake clock never
// moving (nothing but the commit's wake can end it); held on a run that
// goes nowhere, it returns when the hold passes on the engine's clock;
// every watch is gone afterwards, and another owner's run is missing.
func TestUnitAwaitRunIsWokenByTheCommit(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitSrc)
	ctx := context.Background()
	terminal := func(_ context.Context, run *store.Run) (bool, error) { return run.Phase.Terminal(), nil }

	id := b.start(t, "held", `{"gate": "g"}`, "")
	b.kitIs(t, "the call running", func(k *kit) bool { return k.blocked == 1 })
	var last *store.Run
	done := make(chan error, 1)
	// await starts AwaitRun on id held for hold, each look at the run
	// kept in last, and returns once it is waiting on the engine's clock.
	await := func(id string, hold time.Duration) {
		t.Helper()
		before := b.clock.Tickers()
		go func() {
			done <- b.eng.AwaitRun(ctx, "alice", id, hold, AwaitEnd, func(ctx context.Context, run *store.Run) (bool, error) {
				last = run
				return terminal(ctx, run)
			})
		}()
		testutil.Eventually(t, 10*time.Second, func() error {
			if b.clock.Tickers() <= before {
				return errors.New("the await has not started")
			}
			return nil
		})
	}
	await(id, time.Hour)
	b.kit.open("g")
	if err := awaited(t, done); err != nil || last == nil || last.Phase != store.PhaseCompleted {
		t.Fatalf("await: %v, last %+v", err, last)
	}

	// A run that does not end: the hold passes on the engine's clock.
	id = b.start(t, "held", `{"gate": "never"}`, "")
	b.kitIs(t, "the second call running", func(k *kit) bool { return k.blocked == 1 })
	await(id, time.Minute)
	b.clock.Advance(time.Minute)
	if err := awaited(t, done); err != nil || last == nil || last.ID != id || last.Phase.Terminal() {
		t.Fatalf("await at the hold's end: %v, last %+v", err, last)
	}
	if err := b.eng.AwaitRun(ctx, "mallory", id, time.Minute, AwaitEnd, terminal); ErrorCode(err) != CodeNotFound {
		t.Errorf("another owner's run: %v, want %s", err, CodeNotFound)
	}
	b.eng.watchers.mu.Lock()
	left, n := len(b.eng.watchers.by), b.eng.watchers.n.Load()
	b.eng.watchers.mu.Unlock()
	if left != 0 || n != 0 {
		t.Errorf("%d runs still watched, %d watches, want none", left, n)
	}
	if _, err := b.eng.Cancel(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
}

// awaited is AwaitRun's answer; the bound only turns a missed wake into a
// failure instead of a hang.
func awaited(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("AwaitRun was not woken")
		return nil
	}
}

// TestUnitWatchersCoalesceAndEnd: wakes of one watch coalesce into one,
// a wake reaches only the named runs' watchers, and a watch ended twice
// is ended once.
func TestUnitWatchersCoalesceAndEnd(t *testing.T) {
	t.Parallel()
	var w runWatchers
	a, stopA := w.watch("r1")
	b, stopB := w.watch("r2")
	w.wake([]string{"r1", "r1", "r1"})
	if len(a) != 1 || len(b) != 0 {
		t.Fatalf("after three wakes of r1: r1's %d, r2's %d, want 1 and 0", len(a), len(b))
	}
	stopA()
	stopA()
	if n := w.n.Load(); n != 1 || len(w.by) != 1 {
		t.Fatalf("after r1's end: %d watches on %d runs, want 1 on 1", n, len(w.by))
	}
	stopB()
	w.wake([]string{"r2"}) // nobody watches: no send
	if n := w.n.Load(); n != 0 || len(w.by) != 0 || len(b) != 0 {
		t.Fatalf("after every end: %d watches on %d runs, %d wakes", n, len(w.by), len(b))
	}
}

// announcingStore is a shared store whose announcements (store.Waker) the
// test makes.
type announcingStore struct {
	sharedStore
	wakes chan store.Wake
}

func (s announcingStore) Wakes() <-chan store.Wake { return s.wakes }

// TestUnitAwaitEndHearsOtherDaemons: on a shared store that announces
// run ends, a wait for a run's end that another daemon commits (written
// behind this engine's back) ends on the announcement, the fake clock
// never moving: neither the hold nor the fallback look can end it.
func TestUnitAwaitEndHearsOtherDaemons(t *testing.T) {
	t.Parallel()
	st := announcingStore{wakes: make(chan store.Wake, 1)}
	b := setupUnitOn(t, Config{}, "", func(s store.Store) store.Store {
		st.sharedStore = sharedStore{s}
		return st
	})
	ctx := context.Background()
	run := &store.Run{ID: "r-elsewhere", Owner: "alice", Phase: store.PhaseRunning, CreatedAt: unitEpoch}
	if err := b.mem.Update(ctx, func(tx store.Tx) error { return tx.RunInsert(run) }); err != nil {
		t.Fatal(err)
	}
	if !b.eng.hearsFinishes {
		t.Fatal("the engine does not follow the store's announcements of ends")
	}
	looked := make(chan *store.Run, 16)
	done := make(chan error, 1)
	go func() {
		done <- b.eng.AwaitRun(ctx, "alice", run.ID, time.Hour, AwaitEnd, func(_ context.Context, r *store.Run) (bool, error) {
			looked <- r
			return r.Phase.Terminal(), nil
		})
	}()
	if r := <-looked; r.Phase.Terminal() {
		t.Fatalf("first look: %s", r.Phase)
	}
	if err := b.mem.Update(ctx, func(tx store.Tx) error {
		run.Phase = store.PhaseCompleted
		return tx.RunUpdate(run)
	}); err != nil {
		t.Fatal(err)
	}
	st.wakes <- store.Wake{FinishedRunID: run.ID}
	if err := awaited(t, done); err != nil {
		t.Fatal(err)
	}
	var last *store.Run
	for len(looked) > 0 {
		last = <-looked
	}
	if last == nil || last.Phase != store.PhaseCompleted {
		t.Fatalf("last look %+v, want the run completed", last)
	}
}
