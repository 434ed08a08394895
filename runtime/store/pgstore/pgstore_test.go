package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storetest"
)

func TestMain(m *testing.M) {
	testutil.Main(m)
}

var ctx = context.Background()

// opener opens a store per test in a schema of its own, kept per test so
// that a second open after Close finds the same data (storetest.Opener).
func opener(opts Options) storetest.Opener {
	return storetest.PerTest(func(t *testing.T) string { return pgtest.Schema(t) },
		func(_ *testing.T, u string) (store.Store, error) { return Open(ctx, u, opts) })
}

func openURL(t testing.TB, u string, opts Options) *Store {
	t.Helper()
	s, err := Open(ctx, u, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	storetest.CloseAtCleanup(t, s)
	return s
}

// TestStore runs the suite with group commit, the daemon's configuration.
func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, opener(Options{}))
}

// TestStoreOneTransactionPerUpdate runs the suite with every Update in a
// transaction of its own on a pool of connections: concurrent functions
// then really conflict, and only SERIALIZABLE with retries keeps the
// read-modify-writes whole.
func TestStoreOneTransactionPerUpdate(t *testing.T) {
	t.Parallel()
	storetest.Run(t, opener(Options{MaxBatch: 1, MaxConns: 16}))
}

func openStore(t *testing.T, opts Options) *Store {
	t.Helper()
	return openURL(t, pgtest.Schema(t), opts)
}

// waitQueued waits until n Updates queue behind a stalled committer
// (storetest.Stall), so that they form one group.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	storetest.WaitQueued(t, func() int { return queued(s) }, n)
}

// queued counts the Updates waiting for s's committer.
func queued(s store.Store) int { return len(s.(*Store).reqs) }

// TestGroupCommitAndTooLarge queues functions behind a stalled committer
// so they share one transaction: they commit in one COMMIT, and the one
// function that writes more than MaxUpdateBytes fails alone with
// store.ErrTooLarge, leaving nothing, while the others' writes are kept.
// A function that ignores the refusal and returns nil fails all the same.
func TestGroupCommitAndTooLarge(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	release := storetest.Stall(t, s)
	before := s.Stats()
	const n = 20
	value := []byte(strings.Repeat("x", 100<<10))
	wait := storetest.PutContinuations(t, s, n, value)
	big := func(ignore bool) func(tx store.Tx) error {
		return func(tx store.Tx) error {
			for i := range 30 { // 3 MB
				if err := tx.ContinuationPut(fmt.Sprint("big", i), value); err != nil && !ignore {
					return err
				}
			}
			return nil
		}
	}
	tooBig, ignored := make(chan error, 1), make(chan error, 1)
	go func() { tooBig <- s.Update(ctx, big(false)) }()
	go func() { ignored <- s.Update(ctx, big(true)) }()
	waitQueued(t, s, n+2)
	release()
	wait()
	for _, ch := range []chan error{tooBig, ignored} {
		if err := <-ch; !errors.Is(err, store.ErrTooLarge) {
			t.Fatalf("Update over MaxUpdateBytes: %v, want store.ErrTooLarge", err)
		}
	}
	after := s.Stats()
	// The stalled function's group, then one group for all the queued.
	if c, u := after.Commits-before.Commits, after.Updates-before.Updates; c != 2 || u != n+1 {
		t.Fatalf("%d commits of %d updates, want 2 of %d (the stall's, then one group)", c, u, n+1)
	}
	storetest.CheckContinuations(t, s, n, value)
}

// TestCloseCompletesPendingUpdates closes the store while Updates wait
// behind a stalled committer: they complete, later calls get ErrClosed,
// and their writes are there after a new Open.
func TestCloseCompletesPendingUpdates(t *testing.T) {
	t.Parallel()
	storetest.CheckCloseCompletesPending(t, opener(Options{}), queued, func(s store.Store) bool { return s.(*Store).gate.Closed() })
}

// TestTwoStoresOneSchema increments one counter from two stores on the
// same schema, as two daemons on one database would: their group commits
// conflict, and the serialization failures are retried without losing an
// increment.
func TestTwoStoresOneSchema(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	stores := []*Store{openURL(t, u, Options{Shared: true}), openURL(t, u, Options{Shared: true})}
	storetest.IncrementConcurrently(t, []store.Store{stores[0], stores[1]}, 16, 20)
	t.Logf("conflicts retried: %d and %d", stores[0].Stats().Conflicts, stores[1].Stats().Conflicts)
}

// TestTwoStoresOneSlot: two stores on one schema, as two daemons, each
// accepting events and adding to one event slot: their group commits
// conflict on the slot's row and on the owner's Seq counter row, and the
// retried transactions lose no addition and repeat no Seq.
func TestTwoStoresOneSlot(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	a, b := openURL(t, u, Options{Shared: true}), openURL(t, u, Options{Shared: true})
	storetest.AddToSlotConcurrently(t, []store.Store{a, b}, 8, 10)
	storetest.AcceptConcurrently(t, []store.Store{a, b}, 8, 10)
	t.Logf("conflicts retried: %d and %d", a.Stats().Conflicts, b.Stats().Conflicts)
}

// TestSecondOpenLocked: without Shared, a second store on a schema in use
// is refused with store.ErrLocked naming the schema, and opens once the
// first is closed.
func TestSecondOpenLocked(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	s := openURL(t, u, Options{})
	// Close unlocks at once, so a short LockWait opens after it too.
	storetest.CheckSecondOpenLocked(t, s, func() (store.Store, error) { return Open(ctx, u, Options{LockWait: 100 * time.Millisecond}) }, "weir_test_")
}

// TestOpenWaitsForTheLockHolderToGo: an open that finds the schema held
// waits (up to LockWait) and succeeds once the holder goes, as a daemon
// restarted right after a crash finds its dead predecessor's session
// still ending on the server.
func TestOpenWaitsForTheLockHolderToGo(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	s, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		s2, err := Open(ctx, u, Options{LockWait: time.Minute})
		if err == nil {
			err = s2.Close()
		}
		opened <- err
	}()
	// The second open is waiting on the lock before the first closes.
	testutil.Eventually(t, 30*time.Second, func() error {
		var n int
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1`, storeLock).Scan(&n)
		if err == nil && n == 0 {
			err = errors.New("no open waits for the lock yet")
		}
		return err
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open after the holder closed: %v", err)
	}
}

// lockPID is the server pid of the session holding s's lock.
func lockPID(t *testing.T, s *Store) int {
	t.Helper()
	var pid int
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if err := s.lock.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// lockLostBy ends s's lock session with end (run from another
// connection), waits until the server has ended it, and checks the store
// reports the loss: LockLost closed, every Update and View refused with
// ErrLockLost, and a second unshared store getting in only then.
func lockLostBy(t *testing.T, u string, s *Store, end func(conn *pgx.Conn, pid int)) {
	t.Helper()
	pid := lockPID(t, s)
	other, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	end(other, pid)
	testutil.Eventually(t, 30*time.Second, func() error {
		var n int
		if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil || n > 0 {
			return fmt.Errorf("the lock's session %d is still there (%v)", pid, err)
		}
		return nil
	})
	if err := s.checkLock(ctx); !errors.Is(err, ErrLockLost) || !strings.Contains(err.Error(), "another daemon may hold it") {
		t.Fatalf("checkLock after the session ended: %v", err)
	}
	select {
	case <-s.LockLost():
	default:
		t.Fatal("LockLost is not closed")
	}
	if err := s.Update(ctx, func(store.Tx) error { return nil }); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Update after the loss: %v", err)
	}
	if err := s.View(ctx, func(store.Tx) error { return nil }); !errors.Is(err, ErrLockLost) {
		t.Fatalf("View after the loss: %v", err)
	}
	openURL(t, u, Options{LockWait: time.Second}) // the schema is free: this store must not write again
	if err := s.Close(); err != nil {
		t.Fatalf("Close after the loss: %v", err)
	}
}

// A store notices that the session holding its lock was terminated
// (pg_terminate_backend, as an operator or a failover does) and refuses
// everything after: re-taking the lock is unsafe, another daemon may hold
// it. The watcher finds it by itself too.
func TestLockSessionTerminated(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	s, err := Open(ctx, u, Options{LockCheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.checkLock(ctx); err != nil {
		t.Fatalf("checkLock of a held lock: %v", err)
	}
	lockLostBy(t, u, s, func(conn *pgx.Conn, pid int) {
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	})

	// The watcher, at its own pace, without checkLock being called.
	u2 := pgtest.Schema(t)
	s2 := openURL(t, u2, Options{LockCheck: 20 * time.Millisecond})
	other, err := pgx.Connect(ctx, u2)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `SELECT pg_terminate_backend($1)`, lockPID(t, s2)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s2.LockLost():
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not notice the lost session")
	}
}

// Variant: the server itself ends the lock's session, as
// idle_session_timeout does (set here on that session alone).
func TestLockSessionEndedByIdleTimeout(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	s, err := Open(ctx, u, Options{LockCheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	lockLostBy(t, u, s, func(*pgx.Conn, int) {
		s.lockMu.Lock()
		defer s.lockMu.Unlock()
		if _, err := s.lock.Exec(ctx, `SET idle_session_timeout = '50ms'`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestServiceLeaseOneHolderAcrossStores: eight daemons on two stores of
// one schema take the same service lease at the same instant: exactly
// one takes it, and every other is told who holds it.
func TestServiceLeaseOneHolderAcrossStores(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	stores := []*Store{openURL(t, u, Options{Shared: true}), openURL(t, u, Options{Shared: true})}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type took struct {
		holder, seen string
		ok           bool
	}
	out := make(chan took, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprint("daemon-", i)
			var l *store.ServiceLease
			var ok bool
			err := stores[i%2].Update(ctx, func(tx store.Tx) error {
				var err error
				l, ok, err = store.TakeServiceLease(tx, "schedules", holder, now, time.Minute)
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			out <- took{holder, l.Holder, ok}
		}()
	}
	wg.Wait()
	close(out)
	var winners []string
	seen := map[string]bool{}
	for r := range out {
		if r.ok {
			winners = append(winners, r.holder)
		}
		seen[r.seen] = true
	}
	if len(winners) != 1 || len(seen) != 1 || !seen[winners[0]] {
		t.Fatalf("winners %v, holders seen %v: want one holder everyone sees", winners, seen)
	}
}
