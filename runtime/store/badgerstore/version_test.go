package badgerstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storetest"
)

// TestNewerRecordVersionRefused writes records whose version byte is one
// this weir does not know, as a newer release would, and checks every
// reader refuses them with an error naming the record and both versions
// instead of decoding them by guess.
func TestNewerRecordVersionRefused(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	storetest.PutVersionRecords(t, s)

	// Bump the version byte of each record behind the store's back.
	const newer = encV1 + 1
	for _, k := range []string{pRun + "run1", pCont + "run1", pMeta + "k", pFlowLatest + "f", pFlowVersion + "f" + sep + "h"} {
		err := s.db.Update(func(txn *badger.Txn) error {
			item, err := txn.Get([]byte(k))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			v[0] = newer
			return txn.Set([]byte(k), v)
		})
		if err != nil {
			t.Fatalf("rewrite %q: %v", k, err)
		}
	}

	storetest.CheckNewerRefused(t, s, errBadValue, storetest.VersionReads)
}

// TestNewerLayoutRefused: a data directory whose key layout is newer than
// this weir's is refused at Open, saying both versions, and is left as it
// was; the current layout (or none recorded) opens.
func TestNewerLayoutRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	setLayout := func(v uint64) {
		t.Helper()
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(kLayout), encodeU64(v)) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	setLayout(layoutV1)
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatalf("layout %d: %v", layoutV1, err)
	}
	setLayout(layoutNow + 1)
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLayoutNewer) || !strings.Contains(err.Error(), fmt.Sprintf("layout version %d and this weir reads version %d", layoutNow+1, layoutNow)) {
		t.Fatalf("newer layout: %v, want ErrLayoutNewer naming both versions", err)
	}
	// Refused, not damaged: the lock is released and the record is kept.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatalf("reopen after the refusal: %v", err)
	}
	defer db.Close()
	if err := checkLayout(db); !errors.Is(err, ErrLayoutNewer) {
		t.Fatalf("layout record after the refusal: %v", err)
	}
}

// layoutT0 is when the records of the layout tests were written.
var layoutT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// openWritten opens a store in a new directory and commits put in it: the
// records a weir of an older layout wrote, before the test takes the
// newer layout's indexes away again.
func openWritten(t *testing.T, put func(tx store.Tx) error) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, put)
	return s, dir
}

// mustUpdate commits fn in s and fails the test if it does not commit.
func mustUpdate(t *testing.T, s *Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
}

// TestLayoutV1Upgraded opens a directory as a version 1 weir left it (runs
// without the rc/ index, no layout recorded) and checks the open writes
// the index, so the newest-first list holds the runs written before.
func TestLayoutV1Upgraded(t *testing.T) {
	s, dir := openWritten(t, func(tx store.Tx) error {
		for i, id := range []string{"b", "c", "a"} {
			r := &store.Run{ID: id, Flow: "f", Version: "h", Owner: "o", InputHash: "ih", Phase: store.PhaseQueued, CreatedAt: layoutT0.Add(time.Duration(i) * time.Second)}
			if err := tx.RunInsert(r); err != nil {
				return err
			}
		}
		return nil
	})
	// Back to layout 1: no rc/ entries, no layout record.
	err := s.db.DropPrefix([]byte(pRunCreated), []byte(kLayout))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	err = s.View(ctx, func(tx store.Tx) error {
		rs, err := tx.RunList(store.RunListParams{Owner: "o", Order: store.OrderNewest})
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return err
	})
	if err != nil || strings.Join(ids, ",") != "a,c,b" {
		t.Fatalf("newest first after the upgrade: %v, %v; want a,c,b", ids, err)
	}
	if err := checkLayout(s.db); err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(kLayout))
		if err != nil {
			return err
		}
		b, _ := item.ValueCopy(nil)
		v, err := decodeU64("layout", b)
		if err == nil && v != layoutNow {
			t.Errorf("layout after the upgrade: %d, want %d", v, layoutNow)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayoutV2Upgraded opens a directory as a version 2 weir left it
// (tasks without an owner of their own and no tqo/ index) and checks the
// open indexes every unleased task under its run's owner, so the
// per-owner listing holds the tasks queued before.
func TestLayoutV2Upgraded(t *testing.T) {
	s, dir := openWritten(t, func(tx store.Tx) error {
		// Put before their runs exist, the tasks keep no owner, as a
		// version 2 weir wrote them.
		for i, id := range []string{"t1", "t2"} {
			if err := tx.TaskPut(&store.Task{ID: id, RunID: "r" + id, Kind: store.TaskStep, Attempt: 1, ReadyAt: layoutT0.Add(time.Duration(i) * time.Second)}); err != nil {
				return err
			}
		}
		if err := tx.TaskPut(&store.Task{ID: "t3", RunID: "rt3", Kind: store.TaskStep, Attempt: 1, ReadyAt: layoutT0, Leased: true}); err != nil {
			return err
		}
		for _, r := range []*store.Run{{ID: "rt1", Owner: "alice"}, {ID: "rt2", Owner: "bob"}, {ID: "rt3", Owner: "carol"}} {
			r.Flow, r.Version, r.InputHash, r.Phase, r.CreatedAt = "f", "h", "ih", store.PhaseRunning, layoutT0
			if err := tx.RunInsert(r); err != nil {
				return err
			}
		}
		return nil
	})
	s = reopenAsLayout(t, s, dir, layoutV2, pTaskOwner)
	defer s.Close()
	// heads lists the per-owner heads as task:owner.
	heads := func() ([]string, error) {
		var got []string
		err := s.View(ctx, func(tx store.Tx) error {
			ts, err := tx.TaskListReadyByOwner(store.TaskListReadyByOwnerParams{Now: layoutT0.Add(time.Minute)})
			for _, tk := range ts {
				got = append(got, tk.ID+":"+tk.Owner)
			}
			return err
		})
		return got, err
	}
	if got, err := heads(); err != nil || strings.Join(got, ",") != "t1:alice,t2:bob" {
		t.Fatalf("per-owner heads after the upgrade: %v, %v; want t1:alice,t2:bob", got, err)
	}
	// Putting an old record again moves its entry rather than doubling it.
	mustUpdate(t, s, func(tx store.Tx) error {
		return storetest.ChangeTask(tx, "t1", func(tk *store.Task) { tk.Leased = true })
	})
	if got, err := heads(); err != nil || strings.Join(got, ",") != "t2:bob" {
		t.Fatalf("after leasing t1: %v, %v; want t2:bob", got, err)
	}
}

// TestLayoutV3Upgraded opens a directory as a version 3 weir left it (no
// rop/ index) and checks the open indexes every run under its owner and
// phase, so the owners' quotas count the runs written before; a run
// written again afterwards moves its entry rather than doubling it.
func TestLayoutV3Upgraded(t *testing.T) {
	runs := []*store.Run{{ID: "r1", Owner: "alice", Phase: store.PhaseQueued}, {ID: "r2", Owner: "alice", Phase: store.PhaseRunning},
		{ID: "r3", Owner: "alice", Phase: store.PhaseQueued}, {ID: "r4", Owner: "bob", Phase: store.PhaseQueued}}
	s, dir := openWritten(t, func(tx store.Tx) error {
		for _, r := range runs {
			r.Flow, r.Version, r.InputHash, r.CreatedAt = "f", "h", "ih", layoutT0
			if err := tx.RunInsert(r); err != nil {
				return err
			}
		}
		return nil
	})
	s = reopenAsLayout(t, s, dir, layoutV3, pRunOwnerPh)
	defer s.Close()
	counts := func() string {
		t.Helper()
		var got []string
		err := s.View(ctx, func(tx store.Tx) error {
			for _, o := range []string{"alice", "bob"} {
				for _, p := range []store.Phase{store.PhaseQueued, store.PhaseRunning} {
					n, err := tx.(store.RunCounter).OwnerRunCount(o, p)
					if err != nil {
						return err
					}
					got = append(got, fmt.Sprintf("%s/%s=%d", o, p, n))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, ",")
	}
	if got := counts(); got != "alice/queued=2,alice/running=1,bob/queued=1,bob/running=0" {
		t.Fatalf("counts after the upgrade: %s", got)
	}
	mustUpdate(t, s, func(tx store.Tx) error {
		return storetest.ChangeRun(tx, "r1", func(r *store.Run) { r.Phase = store.PhaseRunning })
	})
	if got := counts(); got != "alice/queued=1,alice/running=2,bob/queued=1,bob/running=0" {
		t.Fatalf("counts after r1 started: %s", got)
	}
}

// reopenAsLayout makes s's directory what a weir of layout left it: the
// index under prefix dropped and the version written; then it closes s
// and opens the directory again, which upgrades it.
func reopenAsLayout(t *testing.T, s *Store, dir string, layout uint64, prefix string) *Store {
	t.Helper()
	if err := s.db.DropPrefix([]byte(prefix)); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(kLayout), encodeU64(layout)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLayoutV4Upgraded opens a directory as a version 4 weir left it (no
// rpk/ index) and checks the open indexes every parked run, so a
// registration reports the runs parked before; a run that wakes
// afterwards leaves the index.
func TestLayoutV4Upgraded(t *testing.T) {
	runs := []*store.Run{{ID: "r1", Phase: store.PhaseWaiting, Position: "hold:x"}, {ID: "r2", Phase: store.PhaseRunning},
		{ID: "r3", Phase: store.PhaseWaiting}}
	s, dir := openWritten(t, func(tx store.Tx) error {
		for _, r := range runs {
			r.Owner, r.Flow, r.Version, r.InputHash, r.CreatedAt = "alice", "f", "h", "ih", layoutT0
			if err := tx.RunInsert(r); err != nil {
				return err
			}
		}
		return nil
	})
	s = reopenAsLayout(t, s, dir, layoutV4, pRunParked)
	defer s.Close()
	groups := func() []store.ParkedGroup {
		t.Helper()
		var gs []store.ParkedGroup
		if err := s.View(ctx, func(tx store.Tx) error {
			var err error
			gs, err = tx.RunParkedGroups(store.RunParkedGroupsParams{Flow: "f"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return gs
	}
	want := []store.ParkedGroup{{Version: "h", Position: "", First: "r3"}, {Version: "h", Position: "hold:x", First: "r1"}}
	if got := groups(); !slices.Equal(got, want) {
		t.Fatalf("parked groups after the upgrade: %v, want %v", got, want)
	}
	mustUpdate(t, s, func(tx store.Tx) error {
		return storetest.ChangeRun(tx, "r1", func(r *store.Run) { r.Phase = store.PhaseRunning })
	})
	if got := groups(); !slices.Equal(got, want[:1]) {
		t.Fatalf("parked groups after r1 woke: %v", got)
	}
}
