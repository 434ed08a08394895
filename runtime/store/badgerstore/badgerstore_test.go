package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storetest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	testutil.Main(m)
}

// The assertions of Update functions, as in storetest.
var (
	check         = storetest.Check
	first         = storetest.First
	checkNotFound = storetest.CheckNotFound
)

// opener opens a store per test, in a directory kept per test so that a
// second open after Close finds the same data (storetest.Opener).
func opener(opts Options) storetest.Opener {
	return storetest.PerTest(func(t *testing.T) string { return t.TempDir() },
		func(_ *testing.T, dir string) (store.Store, error) { return Open(dir, opts) })
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, opener(Options{}))
}

// TestStoreSmallTransactions runs the suite with Badger's transaction limit
// so small that group commits split, and memtables small enough to flush
// during the tests, so reads merge tables, memtables and pending writes.
func TestStoreSmallTransactions(t *testing.T) {
	t.Parallel()
	storetest.Run(t, opener(Options{MemTableSize: 1 << 20, MaxBatch: 4}))
}

func openStore(t *testing.T, opts Options) *Store {
	t.Helper()
	return opener(opts)(t).(*Store)
}

var ctx = context.Background()

// waitQueued waits until n Updates queue behind a stalled committer
// (storetest.Stall), so that they form one group.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	storetest.WaitQueued(t, func() int { return queued(s) }, n)
}

// queued counts the Updates waiting for s's committer.
func queued(s store.Store) int { return len(s.(*Store).reqs) }

var errBoom = errors.New("boom")

// TestFailedFunctionInSharedCommit queues failing and succeeding functions
// behind a stalled committer so they share one group commit, and checks
// that the group is one commit holding exactly the successful functions'
// writes, and that a function later in the group reads what earlier
// successful functions wrote but not what a failed one wrote.
func TestFailedFunctionInSharedCommit(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	release := storetest.Stall(t, s)
	before := s.Stats()

	type result struct {
		name string
		err  error
		saw  string
	}
	results := make(chan result, 16)
	submit := func(name string, fn func(tx store.Tx) (string, error)) {
		n := len(s.reqs)
		go func() {
			var saw string
			err := s.Update(ctx, func(tx store.Tx) error {
				var err error
				saw, err = fn(tx)
				return err
			})
			results <- result{name, err, saw}
		}()
		waitQueued(t, s, n+1) // fixes the order within the group
	}
	get := func(tx store.Tx, k string) string {
		b, err := tx.MetaGet(k)
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	submit("a", func(tx store.Tx) (string, error) { return "", tx.MetaPut("k", []byte("a")) })
	submit("fail", func(tx store.Tx) (string, error) {
		if err := tx.MetaPut("k", []byte("fail")); err != nil {
			return "", err
		}
		return "", first(tx.MetaPut("only-fail", []byte("x")), errBoom)
	})
	submit("b", func(tx store.Tx) (string, error) {
		return get(tx, "k") + "," + get(tx, "only-fail"), tx.MetaPut("b", []byte(get(tx, "k")+"b"))
	})
	for i := range 10 {
		submit(fmt.Sprint("n", i), func(tx store.Tx) (string, error) {
			if err := tx.MetaPut(fmt.Sprint("n", i), []byte("v")); err != nil {
				return "", err
			}
			if i%2 == 0 {
				return "", errBoom
			}
			return "", nil
		})
	}
	release()
	got := map[string]result{}
	for range 13 {
		r := <-results
		got[r.name] = r
	}

	if r := got["fail"]; !errors.Is(r.err, errBoom) {
		t.Fatalf("failing function: %v", r.err)
	}
	if r := got["b"]; r.err != nil || r.saw != "a,"+store.ErrNotFound.Error() {
		t.Fatalf("b: err %v, read %q; want the value of a and no trace of the failed function", r.err, r.saw)
	}
	after := s.Stats()
	// The stalled function and the 13 queued behind it form one group:
	// one commit for the stalled one, a, b and the five n that succeeded.
	if c, u := after.Commits-before.Commits, after.Updates-before.Updates; c != 1 || u != 1+2+5 {
		t.Fatalf("commits %d, committed updates %d; want 1 and 8 (the stalled one, a, b and five n)", c, u)
	}
	err := s.View(ctx, func(tx store.Tx) error {
		var errs []error
		want := map[string]string{"k": "a", "b": "ab", "only-fail": store.ErrNotFound.Error()}
		for i := range 10 {
			want[fmt.Sprint("n", i)] = map[bool]string{true: store.ErrNotFound.Error(), false: "v"}[i%2 == 0]
		}
		for k, v := range want {
			if g := get(tx, k); g != v {
				errs = append(errs, fmt.Errorf("%s = %q, want %q", k, g, v))
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupSplitsAtTransactionLimit queues more writes than one Badger
// transaction holds: the group must commit in several transactions, every
// function succeeding, and a single function too big for any transaction
// must fail alone with ErrTxnTooBig.
func TestGroupSplitsAtTransactionLimit(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{MemTableSize: 1 << 20}) // ~140 KB per transaction
	release := storetest.Stall(t, s)
	before := s.Stats()
	const n = 40
	value := []byte(strings.Repeat("x", 10<<10))
	wait := storetest.PutContinuations(t, s, n, value)
	tooBig := make(chan error, 1)
	go func() {
		tooBig <- s.Update(ctx, func(tx store.Tx) error {
			for i := range 30 {
				if err := tx.ContinuationPut(fmt.Sprint("big", i), value); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	waitQueued(t, s, n+1)
	release()
	wait()
	if err := <-tooBig; !errors.Is(err, badger.ErrTxnTooBig) || !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Update bigger than a transaction: %v, want ErrTxnTooBig and store.ErrTooLarge", err)
	}
	after := s.Stats()
	if c := after.Commits - before.Commits; c < 3 {
		t.Fatalf("%d commits for 400 KB of writes, want at least 3", c)
	}
	if u := after.Updates - before.Updates; u != n+1 {
		t.Fatalf("%d committed updates, want %d", u, n+1)
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

// TestOpenLockedInProcess: a second Open of a directory in use is refused
// with store.ErrLocked naming the directory, and opens once the first is
// closed.
func TestOpenLockedInProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseAtCleanup(t, s)
	storetest.CheckSecondOpenLocked(t, s, func() (store.Store, error) { return Open(dir, Options{}) }, dir)
}

func TestOpenError(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/file"
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(file, Options{})
	if err == nil || errors.Is(err, store.ErrLocked) {
		t.Fatalf("Open on a regular file: %v, want an error that is not ErrLocked", err)
	}
}

// TestParkedTasksAreNotScanned parks many tasks in the future and checks
// that listing the ready ones visits only the ready ones.
func TestParkedTasksAreNotScanned(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const parked, ready, per = 20000, 5, 1000
	for b := range parked / per {
		err := s.Update(ctx, func(tx store.Tx) error {
			for i := range per {
				id := fmt.Sprintf("p%06d", b*per+i)
				if err := tx.TaskPut(&store.Task{ID: id, RunID: id, ReadyAt: now.Add(time.Hour + time.Duration(i)*time.Second)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := s.Update(ctx, func(tx store.Tx) error {
		for i := range ready {
			if err := tx.TaskPut(&store.Task{ID: fmt.Sprint("r", i), RunID: "r", ReadyAt: now.Add(-time.Duration(i) * time.Second)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var visited int
	err = s.View(ctx, func(tx store.Tx) error {
		ts, err := tx.TaskListReady(now, 0)
		visited = tx.(*storeTx).kv.visited
		q, _, err2 := tx.TaskCount()
		return first(err, err2, check(len(ts) == ready, "%d ready tasks, want %d", len(ts), ready),
			check(q == parked+ready, "TaskCount %d, want %d", q, parked+ready))
	})
	if err != nil {
		t.Fatal(err)
	}
	if visited > ready+1 {
		t.Fatalf("listing %d ready tasks visited %d keys: the parked ones were scanned", ready, visited)
	}
}

// TestDiskReserve: a commit that would leave less than MinFreeBytes on
// the disk is refused with store.ErrDiskFull before anything is written,
// reads go on, and writes succeed again once space returns.
func TestDiskReserve(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{MinFreeBytes: 64 << 20})
	var free atomic.Int64
	free.Store(1 << 30)
	probe := func() (int64, error) { return free.Load(), nil }
	s.testFree.Store(&probe)
	put := func(k string) error {
		return s.Update(ctx, func(tx store.Tx) error { return tx.MetaPut(k, []byte("v")) })
	}
	if err := put("before"); err != nil {
		t.Fatal(err)
	}
	free.Store(64<<20 + 10)
	if err := put("full"); !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), "67108874 bytes free") {
		t.Fatalf("a commit into the reserve: %v, want store.ErrDiskFull with the free space", err)
	}
	if err := s.View(ctx, func(tx store.Tx) error {
		_, gone := tx.MetaGet("full")
		v, err := tx.MetaGet("before")
		return errors.Join(err, check(string(v) == "v", "before = %q", v), check(errors.Is(gone, store.ErrNotFound), "the refused write exists: %v", gone))
	}); err != nil {
		t.Fatal(err)
	}
	free.Store(1 << 30)
	if err := put("after"); err != nil {
		t.Fatalf("once space returns: %v", err)
	}
	// The real probe reads the disk of the store's directory.
	if n, err := FreeSpace(t.TempDir()); err != nil || n <= 0 {
		t.Fatalf("FreeSpace = %d, %v", n, err)
	}
}

// TestFailedCommitFailsTheBatchBuiltOnIt holds a group commit in flight,
// lets the next group run on top of it (reading its writes), then fails the
// first commit: both groups' callers get the error, neither group's writes
// exist, and the store goes on from the last durable state.
func TestFailedCommitFailsTheBatchBuiltOnIt(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	errDisk := errors.New("disk on fire")
	held := make(chan error, 1)
	inFlight := make(chan struct{})
	s.testSubmit = func(l *layer) chan error {
		if _, ok := l.get(string(key(pMeta, "poison"))); ok {
			close(inFlight)
			return held
		}
		return nil
	}
	// Registered after the store's Close, so it runs first: a failing test
	// must not leave Close waiting for the held commit.
	t.Cleanup(func() {
		select {
		case held <- errDisk:
		default:
		}
	})
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.MetaPut("base", []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	errA := make(chan error, 1)
	go func() {
		errA <- s.Update(ctx, func(tx store.Tx) error { return tx.MetaPut("poison", []byte("p")) })
	}()
	<-inFlight
	ranB := make(chan string, 1)
	errB := make(chan error, 1)
	go func() {
		errB <- s.Update(ctx, func(tx store.Tx) error {
			b, err := tx.MetaGet("poison")
			ranB <- fmt.Sprintf("%s %v", b, err)
			return tx.MetaPut("derived", append(b, '!'))
		})
	}()
	if saw := <-ranB; saw != "p <nil>" {
		t.Fatalf("the function built on the commit in flight read %q, want its write", saw)
	}
	if st := s.Stats(); st.Overlapped == 0 {
		t.Fatal("the second function did not run while the first commit was in flight")
	}
	held <- errDisk
	if err := <-errA; !errors.Is(err, errDisk) {
		t.Fatalf("Update whose commit failed: %v", err)
	}
	if err := <-errB; !errors.Is(err, errDisk) {
		t.Fatalf("Update that read the failed commit's writes: %v, want the commit's error", err)
	}
	err := s.Update(ctx, func(tx store.Tx) error {
		_, e1 := tx.MetaGet("poison")
		_, e2 := tx.MetaGet("derived")
		b, e3 := tx.MetaGet("base")
		return first(checkNotFound(e1), checkNotFound(e2), e3, check(string(b) == "1", "base = %q", b))
	})
	if err != nil {
		t.Fatalf("after the failed commit: %v", err)
	}
}
