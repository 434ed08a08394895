package badgerstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/weirhq/weir/runtime/store"
)

// TestNewerRecordVersionRefused writes records whose version byte is one
// this weir does not know, as a newer release would, and checks every
// reader refuses them with an error naming the record and both versions
// instead of decoding them by guess.
func TestNewerRecordVersionRefused(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	now := time.Unix(1700000000, 0).UTC()
	err = s.Update(ctx, func(tx store.Tx) error {
		if err := tx.RunInsert(&store.Run{ID: "run1", Flow: "f", Version: "h", Owner: "o", Phase: store.PhaseRunning, CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.ContinuationPut("run1", []byte(`{}`)); err != nil {
			return err
		}
		if err := tx.MetaPut("k", []byte("v")); err != nil {
			return err
		}
		return tx.FlowVersionPut(&store.FlowVersion{Name: "f", Hash: "h"})
	})
	if err != nil {
		t.Fatal(err)
	}

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

	reads := []struct {
		record string
		read   func(tx store.Tx) error
	}{
		{"Run", func(tx store.Tx) error { _, err := tx.RunGet("run1"); return err }},
		{"Run", func(tx store.Tx) error { _, err := tx.RunList(store.RunListParams{}); return err }},
		{"continuation", func(tx store.Tx) error { _, err := tx.ContinuationGet("run1"); return err }},
		{"meta", func(tx store.Tx) error { _, err := tx.MetaGet("k"); return err }},
		{"flow latest", func(tx store.Tx) error { _, err := tx.FlowVersionLatest("f"); return err }},
		{"FlowVersion", func(tx store.Tx) error { _, err := tx.FlowVersionGet("f", "h"); return err }},
	}
	for _, r := range reads {
		err := s.View(ctx, r.read)
		if !errors.Is(err, errBadValue) {
			t.Errorf("%s: err = %v, want errBadValue", r.record, err)
			continue
		}
		want := r.record + " record has format version 2, this weir reads version 1"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %q, want it to say %q", r.record, err, want)
		}
	}
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
	setLayout(layoutV1 + 1)
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLayoutNewer) || !strings.Contains(err.Error(), "layout version 2 and this weir reads version 1") {
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
