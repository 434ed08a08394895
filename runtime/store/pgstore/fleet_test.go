package pgstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storetest"
)

// TestStoreShared runs the suite on a shared store: announcements and the
// per-run event lock change nothing the contract promises.
func TestStoreShared(t *testing.T) {
	t.Parallel()
	storetest.Run(t, opener(Options{Shared: true}))
}

// nextWake waits for s's next announcement.
func nextWake(t *testing.T, s *Store) store.Wake {
	t.Helper()
	select {
	case w := <-s.Wakes():
		return w
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up announced")
		return store.Wake{}
	}
}

// TestWakesAcrossStores: a write on one shared store is announced to the
// others on the schema after its commit (a ready task, a cancel, a run's
// end), a
// function that fails announces nothing, and a store on another schema
// hears nothing of it.
func TestWakesAcrossStores(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	a, b := openURL(t, u, Options{Shared: true}), openURL(t, u, Options{Shared: true})
	other := openURL(t, pgtest.Schema(t), Options{Shared: true})
	if openStore(t, Options{}).Wakes() != nil {
		t.Fatal("an unshared store announces wake-ups")
	}
	if !a.Capabilities().Shared || openStore(t, Options{}).Capabilities().Shared {
		t.Fatal("Capabilities().Shared does not follow Options.Shared")
	}

	// A failed function's ready task is never announced: the cancel that
	// follows it is the first thing b hears.
	boom := errors.New("boom")
	if err := a.Update(ctx, func(tx store.Tx) error {
		if err := tx.TaskPut(&store.Task{ID: "t0", RunID: "r1", Kind: store.TaskStep}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := a.Update(ctx, func(tx store.Tx) error {
		if err := tx.RunInsert(&store.Run{ID: "r1", Owner: "o", Phase: store.PhaseRunning}); err != nil {
			return err
		}
		return tx.RunUpdate(&store.Run{ID: "r1", Owner: "o", Phase: store.PhaseRunning, CancelRequested: true})
	}); err != nil {
		t.Fatal(err)
	}
	if w := nextWake(t, b); w.CancelRunID != "r1" {
		t.Fatalf("b heard %+v first, want the cancel of r1", w)
	}
	// A parked task is not announced, a ready one is.
	if err := a.Update(ctx, func(tx store.Tx) error {
		return tx.TaskPut(&store.Task{ID: "t1", RunID: "r1", Kind: store.TaskStep, ReadyAt: time.Now().Add(time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, func(tx store.Tx) error {
		return tx.TaskPut(&store.Task{ID: "t2", RunID: "r1", Kind: store.TaskStep, ReadyAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	if w := nextWake(t, b); w != (store.Wake{}) {
		t.Fatalf("b heard %+v, want a ready task", w)
	}
	// The writer hears its own announcements too; the other schema's store
	// hears only its own.
	if w := nextWake(t, a); w.CancelRunID != "r1" {
		t.Fatalf("a heard %+v first, want its own cancel of r1", w)
	}
	if err := other.Update(ctx, func(tx store.Tx) error {
		if err := tx.RunInsert(&store.Run{ID: "x", Owner: "o", Phase: store.PhaseRunning, CancelRequested: true}); err != nil {
			return err
		}
		return tx.RunUpdate(&store.Run{ID: "x", Owner: "o", Phase: store.PhaseRunning, CancelRequested: true})
	}); err != nil {
		t.Fatal(err)
	}
	if w := nextWake(t, other); w.CancelRunID != "x" {
		t.Fatalf("the other schema's store heard %+v first, want its own cancel of x", w)
	}
	// A run's end is announced, with its id.
	for _, ph := range []store.Phase{store.PhaseWaiting, store.PhaseCompleted} {
		if err := a.Update(ctx, func(tx store.Tx) error {
			return tx.RunUpdate(&store.Run{ID: "r1", Owner: "o", Phase: ph})
		}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		w := nextWake(t, b)
		if w.CancelRunID != "" || w == (store.Wake{}) {
			continue // what b heard before
		}
		if w.FinishedRunID != "r1" {
			t.Fatalf("b heard %+v, want the end of r1", w)
		}
		break
	}
}

// TestClaimOnceAcrossStores: claimers on three shared stores race for the
// same tasks, claiming alone (READ COMMITTED, SKIP LOCKED) one task or a
// page at a time, inside Updates (SERIALIZABLE), and by reading, checking
// and writing each task in an Update; each task goes to exactly one of
// them, with that one's lease.
func TestClaimOnceAcrossStores(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	stores := []store.Store{openURL(t, u, Options{Shared: true}), openURL(t, u, Options{Shared: true}), openURL(t, u, Options{Shared: true})}
	const tasks, claimers = 60, 8
	if err := stores[0].Update(ctx, func(tx store.Tx) error {
		for i := range tasks {
			if err := tx.TaskPut(&store.Task{ID: fmt.Sprintf("t%03d", i), RunID: "r", Kind: store.TaskStep}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	won, err := storetest.ClaimRace(stores, claimers, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.CheckClaimedOnce(stores[0], won, tasks); err != nil {
		t.Fatal(err)
	}
	var conflicts, claims uint64
	for _, s := range stores {
		conflicts += s.(*Store).Stats().Conflicts
		claims += s.(*Store).Stats().Claims
	}
	t.Logf("conflicts retried: %d; tasks claimed alone: %d", conflicts, claims)
}

// TestEventOrderManyWriters: writers on three shared stores append events
// to one run while a reader follows it with AfterSeq, as `weir events
// --follow` does; the reader sees every event, none skipped because a
// lower number committed after a higher one.
func TestEventOrderManyWriters(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	stores := []*Store{openURL(t, u, Options{Shared: true}), openURL(t, u, Options{Shared: true, MaxBatch: 1}), openURL(t, u, Options{Shared: true})}
	const writers, each = 9, 40
	var wg sync.WaitGroup
	errc := make(chan error, writers+1)
	for w := range writers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for i := range each {
				if err := s.Update(ctx, func(tx store.Tx) error {
					return tx.EventAppend(&store.Event{RunID: "r", Type: "x", Attempt: w*each + i, At: time.Now()})
				}); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()
	var seen []uint64
	follow := func() error {
		after := uint64(0)
		if len(seen) > 0 {
			after = seen[len(seen)-1]
		}
		return stores[0].View(ctx, func(tx store.Tx) error {
			evs, err := tx.EventList(store.EventListParams{RunID: "r", AfterSeq: after})
			for _, e := range evs {
				seen = append(seen, e.Seq)
			}
			return err
		})
	}
	for done := false; !done; {
		select {
		case <-writing:
			done = true
		default:
		}
		if err := follow(); err != nil {
			t.Fatal(err)
		}
	}
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := follow(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != writers*each {
		t.Fatalf("the follower saw %d events, want %d: a number committed after a higher one was read", len(seen), writers*each)
	}
}

// TestSharedAndUnsharedExclude: shared stores open together, but never
// beside an unshared one, in either order.
func TestSharedAndUnsharedExclude(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	openURL(t, u, Options{Shared: true})
	openURL(t, u, Options{Shared: true})
	if _, err := Open(ctx, u, Options{LockWait: 50 * time.Millisecond}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("an unshared store beside a fleet: %v, want ErrLocked", err)
	}
	v := pgtest.Schema(t)
	openURL(t, v, Options{})
	_, err := Open(ctx, v, Options{Shared: true, LockWait: 50 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "not in a fleet") {
		t.Fatalf("a shared store beside an unshared one: %v, want ErrLocked saying why", err)
	}
}

// TestSharedSessionsEndStalledTransactions: a shared store's sessions
// carry IdleInTransactionTimeout, unless the URL sets its own; an
// unshared store's keep the server's.
func TestSharedSessionsEndStalledTransactions(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	setting := func(s *Store) string {
		var v string
		if err := s.View(ctx, func(tx store.Tx) error {
			return tx.(*storeTx).queryRow(`SELECT current_setting('idle_in_transaction_session_timeout')`).Scan(&v)
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := setting(openURL(t, u, Options{Shared: true})); got != "30s" {
		t.Fatalf("shared: %s, want 30s", got)
	}
	if got := setting(openURL(t, u+"&idle_in_transaction_session_timeout=5000", Options{Shared: true})); got != "5s" {
		t.Fatalf("set in the URL: %s, want 5s", got)
	}
	if got := setting(openStore(t, Options{})); got != "0" {
		t.Fatalf("unshared: %s, want the server's 0", got)
	}
}

// TestRoll: the fleet's roll keeps each daemon's entry whole, replaces it
// on a second put, lists in id order, refuses a bad id with nothing
// written, and deletes (ErrNotFound for an entry not there).
func TestRoll(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{Shared: true})
	seen := time.Unix(1700000000, 123456789).UTC()
	b := &store.Daemon{ID: "h_b", Host: "box", PID: 9, Tools: map[string]string{"mail.send": "ab"}, SeenAt: seen}
	put := func(ds ...*store.Daemon) error {
		return s.Update(ctx, func(tx store.Tx) error {
			for _, d := range ds {
				if err := tx.(store.Roll).DaemonPut(d); err != nil {
					return err
				}
			}
			return nil
		})
	}
	list := func() []*store.Daemon {
		t.Helper()
		var out []*store.Daemon
		if err := s.View(ctx, func(tx store.Tx) error {
			var err error
			out, err = tx.(store.Roll).DaemonList()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := put(b, &store.Daemon{ID: "h_a", SeenAt: seen}); err != nil {
		t.Fatal(err)
	}
	later := *b
	later.SeenAt = seen.Add(time.Second)
	later.Tools = map[string]string{"mail.send": "cd"}
	if err := put(&later); err != nil {
		t.Fatal(err)
	}
	got := list()
	if len(got) != 2 || got[0].ID != "h_a" || got[1].ID != "h_b" || !got[1].SeenAt.Equal(later.SeenAt) ||
		got[1].Tools["mail.send"] != "cd" || got[1].Host != "box" || got[1].PID != 9 {
		t.Fatalf("roll %+v %+v, want h_a then h_b as put last", got[0], got[1])
	}
	if err := put(&store.Daemon{ID: "h_c"}, &store.Daemon{ID: "bad\x00id"}); err == nil {
		t.Fatal("a daemon id with NUL was accepted")
	}
	if n := len(list()); n != 2 {
		t.Fatalf("%d entries after a refused put, want 2", n)
	}
	del := func(id string) error {
		return s.Update(ctx, func(tx store.Tx) error { return tx.(store.Roll).DaemonDelete(id) })
	}
	if err := del("h_a"); err != nil {
		t.Fatal(err)
	}
	if err := del("h_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting a missing entry: %v, want ErrNotFound", err)
	}
	if got := list(); len(got) != 1 || got[0].ID != "h_b" {
		t.Fatalf("roll after delete: %v", got)
	}
}
