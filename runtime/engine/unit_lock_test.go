package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// lockedStore is a store that holds a lock on a server (store.LockHolder)
// the test can take away, as pg_terminate_backend does to PostgreSQL's.
type lockedStore struct {
	store.Store
	lost chan struct{}
}

func (s *lockedStore) LockLost() <-chan struct{} { return s.lost }

// TestUnitLockLostClosesAdmission: once the store says its lock is gone,
// every start is refused with E_STORAGE naming the lock, and health says
// why, though the store itself still answers (a second daemon may be
// writing to it by then).
func TestUnitLockLostClosesAdmission(t *testing.T) {
	t.Parallel()
	ls := &lockedStore{lost: make(chan struct{})}
	b := setupUnitOn(t, Config{}, `flow(name = "echo", nodes = [task("t", tool = "kit.echo")])`, func(s store.Store) store.Store {
		ls.Store = s
		return ls
	})
	b.waitTerminal(t, b.start(t, "echo", `{}`, "before"))

	close(ls.lost)
	testutil.Eventually(t, 30*time.Second, func() error {
		if h := b.eng.Health(context.Background()); h.Admission != CodeStorage || !strings.Contains(h.Reason, "lock") {
			return errors.New("health says admission " + h.Admission + ": " + h.Reason)
		}
		return nil
	})
	for _, rid := range []string{"after", "after-2"} {
		_, err := b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "echo", Input: json.RawMessage(`{}`), RequestID: rid})
		var ee *Error
		if !errors.As(err, &ee) || ee.Code != CodeStorage || !strings.Contains(ee.Message, "lock session ended") {
			t.Fatalf("start %q after the lock was lost: %v, want E_STORAGE naming the lock", rid, err)
		}
	}
}

// TestUnitNoLockNoWatch: a store that holds no lock (a nil LockLost, as
// storemetrics gives for Badger) leaves admission open.
func TestUnitNoLockNoWatch(t *testing.T) {
	t.Parallel()
	ls := &lockedStore{}
	b := setupUnitOn(t, Config{}, `flow(name = "echo", nodes = [task("t", tool = "kit.echo")])`, func(s store.Store) store.Store {
		ls.Store = s
		return ls
	})
	b.waitTerminal(t, b.start(t, "echo", `{}`, ""))
	if h := b.eng.Health(context.Background()); h.Admission != "open" {
		t.Fatalf("admission %s (%s), want open", h.Admission, h.Reason)
	}
}
