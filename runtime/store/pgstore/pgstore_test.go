package pgstore

import (
	"context"
	"errors"
	"sync"
	"testing"

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
	var schemas sync.Map
	return func(t *testing.T) store.Store {
		u, ok := schemas.Load(t)
		if !ok {
			u, _ = schemas.LoadOrStore(t, pgtest.Schema(t))
		}
		return openURL(t, u.(string), opts)
	}
}

func openURL(t testing.TB, u string, opts Options) *Store {
	t.Helper()
	s, err := Open(ctx, u, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
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
