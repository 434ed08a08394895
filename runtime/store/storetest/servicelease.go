package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// testServiceLease: a service lease is taken once, renewed by its holder
// with the same fence, refused to another while it lasts, taken over with
// a new fence once it expires or is released; a write fenced by an old
// holding fails with ErrFenced; records round-trip.
func testServiceLease(t *testing.T, s store.Store, _ Opener) {
	const name, ttl = "schedules", 30 * time.Second
	take := func(holder string, now time.Time) (*store.ServiceLease, bool) {
		t.Helper()
		var l *store.ServiceLease
		var ok bool
		update(t, s, func(tx store.Tx) error {
			var err error
			l, ok, err = store.TakeServiceLease(tx, name, holder, now, ttl)
			return err
		})
		return l, ok
	}
	fenced := func(holder string, fence uint64, now time.Time) error {
		t.Helper()
		return s.View(ctx, func(tx store.Tx) error { return store.CheckServiceLease(tx, name, holder, fence, now) })
	}
	if err := s.View(ctx, func(tx store.Tx) error { _, err := tx.ServiceLeaseGet(name); return err }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no lease yet: %v, want ErrNotFound", err)
	}
	if err := fenced("a", 1, t0); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write under a lease nobody took: %v, want ErrFenced", err)
	}
	a, ok := take("a", t0)
	if !ok || a.Holder != "a" || a.Fence != 1 || !a.Expires.Equal(t0.Add(ttl)) {
		t.Fatalf("first take: %+v %v", a, ok)
	}
	if b, ok := take("b", at(10*time.Second)); ok || b.Holder != "a" {
		t.Fatalf("b took a's live lease: %+v %v", b, ok)
	}
	if r, ok := take("a", at(20*time.Second)); !ok || r.Fence != 1 || !r.Expires.Equal(at(20*time.Second+ttl)) {
		t.Fatalf("renewal: %+v %v", r, ok)
	}
	if err := fenced("a", 1, at(21*time.Second)); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	// Past the renewed expiry, b takes over with a new fence, and a's
	// writes under fence 1 are refused.
	b, ok := take("b", at(20*time.Second+ttl))
	if !ok || b.Holder != "b" || b.Fence != 2 {
		t.Fatalf("take over an expired lease: %+v %v", b, ok)
	}
	if err := fenced("a", 1, at(20*time.Second+ttl)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old holder's write: %v, want ErrFenced", err)
	}
	// A release by someone else does nothing; b's own lets a take at once.
	now := at(time.Minute)
	update(t, s, func(tx store.Tx) error { return store.ReleaseServiceLease(tx, name, "a", 1, now) })
	if l, ok := take("a", now); ok {
		t.Fatalf("a took b's lease after releasing its own old one: %+v", l)
	}
	update(t, s, func(tx store.Tx) error { return store.ReleaseServiceLease(tx, name, "b", 2, now) })
	if l, ok := take("a", now); !ok || l.Fence != 3 {
		t.Fatalf("take after release: %+v %v", l, ok)
	}
	got := read(t, s, func(tx store.Tx) (*store.ServiceLease, error) { return tx.ServiceLeaseGet(name) })
	if got.Name != name || got.Holder != "a" || got.Fence != 3 || !got.Expires.Equal(now.Add(ttl)) {
		t.Fatalf("stored: %+v", got)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.ServiceLeasePut(&store.ServiceLease{Holder: "a"}) }); !errors.Is(err, store.ErrBadID) {
		t.Fatalf("a lease without a name: %v, want ErrBadID", err)
	}
}
