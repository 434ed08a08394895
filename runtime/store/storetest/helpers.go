package storetest

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// The helpers below serve the backends' own tests (locking, batching,
// crashes), which need the same few pieces around a store.

// CloseAtCleanup closes s when t ends, tolerating a store the test closed
// itself (Opener's contract).
func CloseAtCleanup(t testing.TB, s store.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
}

// Stall occupies the committer of s with a function that waits for
// release, so the test can queue Updates behind it (see WaitQueued) and
// know they form one group commit. The function may run more than once
// (a backend may retry a conflict). The stall ends at cleanup if the test
// did not release it, so that a failing test does not leave Close
// waiting.
func Stall(t *testing.T, s store.Store) (release func()) {
	t.Helper()
	started, ch := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(tx store.Tx) error {
			select {
			case <-started:
			default:
				close(started)
			}
			<-ch
			return nil
		})
	}()
	<-started
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(ch)
			if err := <-done; err != nil {
				t.Errorf("stalling Update: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// WaitQueued waits until queued (the backend's count of Updates waiting
// for its committer) reaches n.
func WaitQueued(t *testing.T, queued func() int, n int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if q := queued(); q < n {
			return fmt.Errorf("%d requests queued, want %d", q, n)
		}
		return nil
	})
}

// Check returns an error describing a failed expectation, or nil: for
// assertions inside an Update function, which may run on a goroutine of
// the store's and so must not call t.Fatal.
func Check(ok bool, format string, args ...any) error { return check(ok, format, args...) }

// First returns the first non-nil error.
func First(errs ...error) error { return first(errs...) }

// CheckNotFound describes err unless it is store.ErrNotFound.
func CheckNotFound(err error) error {
	return check(errors.Is(err, store.ErrNotFound), "got %v, want ErrNotFound", err)
}

// PutContinuations starts n Updates, each putting value as the
// continuation of run "r<i>" (behind a Stall they queue up), and returns a
// function that waits for them and fails the test unless each succeeded.
func PutContinuations(t *testing.T, s store.Store, n int, value []byte) (wait func()) {
	done := startUpdates(t, s, n, func(i int) func(tx store.Tx) error {
		return func(tx store.Tx) error { return tx.ContinuationPut(fmt.Sprint("r", i), value) }
	})
	return func() {
		t.Helper()
		done("Update")
	}
}

// startUpdates starts n Updates of s at once, the i-th running fn(i), and
// returns a function that waits for all of them and fails the test,
// naming them as what, unless each succeeded.
func startUpdates(t *testing.T, s store.Store, n int, fn func(i int) func(tx store.Tx) error) (wait func(what string)) {
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.Update(ctx, fn(i)) }()
	}
	return func(what string) {
		t.Helper()
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
}

// CheckContinuations checks that runs r0 to r<n-1> hold value as their
// continuation (PutContinuations) and that no continuation of "big0" (the
// first a refused function wrote) was kept.
func CheckContinuations(t *testing.T, s store.Store, n int, value []byte) {
	t.Helper()
	view(t, s, func(tx store.Tx) error {
		for i := range n {
			c, err := tx.ContinuationGet(fmt.Sprint("r", i))
			if err != nil || len(c) != len(value) {
				return fmt.Errorf("r%d: %d bytes, %v", i, len(c), err)
			}
		}
		_, err := tx.ContinuationGet("big0")
		return CheckNotFound(err)
	})
}

// PerTest returns an Opener that keeps a place of newPlace's (a data
// directory, a schema) per test and opens the store there with open: the
// second open of a test, after it closed the first store, finds the same
// data. The store is closed at the test's cleanup (CloseAtCleanup).
func PerTest[P any](newPlace func(t *testing.T) P, open func(t *testing.T, place P) (store.Store, error)) Opener {
	var places sync.Map
	return func(t *testing.T) store.Store {
		p, ok := places.Load(t)
		if !ok {
			p, _ = places.LoadOrStore(t, newPlace(t))
		}
		s, err := open(t, p.(P))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		CloseAtCleanup(t, s)
		return s
	}
}

// updateConcurrently calls fn(s, g, i) for each i below each from each of
// goroutines goroutines g, goroutine g on stores[g%len(stores)] (all on
// the same data), and fails the test with the first error once all have
// returned: a goroutine stops at its own first error.
func updateConcurrently(t *testing.T, stores []store.Store, goroutines, each int, fn func(s store.Store, g, i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		s := stores[g%len(stores)]
		wg.Go(func() {
			for i := range each {
				if err := fn(s, g, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// CheckSecondOpenLocked checks the hold every backend keeps on its data:
// while s is open, open (another open of the same data) is refused with
// store.ErrLocked, its message containing naming (what the data is: a
// directory, a schema); once s is closed the data opens, and is refused
// again while that store is open.
func CheckSecondOpenLocked(t *testing.T, s store.Store, open func() (store.Store, error), naming string) {
	t.Helper()
	refused := func(when string) {
		t.Helper()
		s2, err := open()
		if err == nil {
			s2.Close()
		}
		if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), naming) {
			t.Fatalf("%s: %v, want ErrLocked naming %q", when, err, naming)
		}
	}
	refused("second open while the first is open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := open()
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	CloseAtCleanup(t, s2)
	refused("another open while the reopened store is open")
}

// CheckCloseCompletesPending closes a store of open's while Updates wait
// behind a stalled committer (Stall; queued is the backend's count of
// waiting Updates, as for WaitQueued): they complete, an Update once Close
// began (closing reports it) gets store.ErrClosed, and their writes are
// there in the store open opens next on the same data.
func CheckCloseCompletesPending(t *testing.T, open Opener, queued func(store.Store) int, closing func(store.Store) bool) {
	t.Helper()
	s := open(t)
	release := Stall(t, s)
	const n = 10
	pending := startUpdates(t, s, n, func(i int) func(tx store.Tx) error {
		return func(tx store.Tx) error { return tx.MetaPut(fmt.Sprint("k", i), []byte("v")) }
	})
	WaitQueued(t, func() int { return queued(s) }, n)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for !closing(s) {
		runtime.Gosched()
	}
	if err := s.Update(ctx, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Update while closing: %v, want ErrClosed", err)
	}
	release()
	pending("pending Update")
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	view(t, open(t), func(tx store.Tx) error {
		for i := range n {
			if _, err := tx.MetaGet(fmt.Sprint("k", i)); err != nil {
				return fmt.Errorf("k%d: %w", i, err)
			}
		}
		return nil
	})
}

// listing is one listing a contract reads, as names, and the names it
// wants in that order.
type listing struct {
	name      string
	got, want []string
}

// checkListings reports each listing whose names are not its want.
func checkListings(t *testing.T, ls []listing) {
	t.Helper()
	for _, l := range ls {
		if !slices.Equal(l.got, l.want) {
			t.Errorf("%s: %v, want %v", l.name, l.got, l.want)
		}
	}
}

// ChangeTask reads task id in tx, lets change alter it and puts it back:
// the read-modify-write of one task the contract's and the backends' own
// tests make.
func ChangeTask(tx store.Tx, id string, change func(*store.Task)) error {
	return readModifyWrite(tx.TaskGet, tx.TaskPut, id, change)
}

// ChangeRun reads run id in tx, lets change alter it and updates it.
func ChangeRun(tx store.Tx, id string, change func(*store.Run)) error {
	return readModifyWrite(tx.RunGet, tx.RunUpdate, id, change)
}

// readModifyWrite reads record id with get, lets change alter it and
// writes it back with put.
func readModifyWrite[T any](get func(string) (*T, error), put func(*T) error, id string, change func(*T)) error {
	v, err := get(id)
	if err != nil {
		return err
	}
	change(v)
	return put(v)
}
