package memstore

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storetest"
)

func TestMain(m *testing.M) {
	testutil.Main(m)
}

// opener hands each test a new store, and the same data again when the
// test opens a second time after closing the first (storetest.Opener).
func opener() storetest.Opener {
	var mu sync.Mutex
	last := map[*testing.T]*Store{}
	return func(t *testing.T) store.Store {
		mu.Lock()
		defer mu.Unlock()
		s := New()
		if prev, ok := last[t]; ok {
			var err error
			if s, err = prev.Reopen(); err != nil {
				t.Fatalf("Reopen: %v", err)
			}
		}
		last[t] = s
		storetest.CloseAtCleanup(t, s)
		return s
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, opener())
}

// TestReopenWhileOpen: the data is held by one open store at a time, as a
// Badger directory is.
func TestReopenWhileOpen(t *testing.T) {
	t.Parallel()
	s := New()
	storetest.CloseAtCleanup(t, s)
	storetest.CheckSecondOpenLocked(t, s, func() (store.Store, error) { return s.Reopen() }, "")
}

// TestViewIsASnapshot: a View keeps reading the state it began with while
// Updates commit, and the next View sees them.
func TestViewIsASnapshot(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()
	ctx := context.Background()
	put := func(v string) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.MetaPut("k", []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	put("1")
	err := s.View(ctx, func(tx store.Tx) error {
		put("2") // an Update from inside a View neither deadlocks nor shows through
		b, err := tx.MetaGet("k")
		if err != nil {
			return err
		}
		if string(b) != "1" {
			t.Errorf("View saw %q after a commit that began later, want 1", b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx store.Tx) error {
		b, err := tx.MetaGet("k")
		if err == nil && string(b) != "2" {
			t.Errorf("later View saw %q, want 2", b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBadIDs: ids the Badger backend refuses are refused here too, and the
// refused write changes nothing.
func TestBadIDs(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()
	err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.RunInsert(&store.Run{ID: "a\x00b", Phase: store.PhaseQueued})
	})
	if !errors.Is(err, errBadID) {
		t.Fatalf("run id with a NUL byte: %v, want errBadID", err)
	}
	err = s.View(context.Background(), func(tx store.Tx) error {
		rs, err := tx.RunList(store.RunListParams{})
		if err == nil && len(rs) != 0 {
			t.Errorf("refused insert left %d runs", len(rs))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
