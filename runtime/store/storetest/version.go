package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// A backend keeps a format version with each record and refuses one
// written by a newer weir rather than decode it by guess. Its test writes
// the records below (PutVersionRecords), marks them newer behind the
// store's back, and checks the reads refuse them (CheckNewerRefused).

// PutVersionRecords writes run "run1" with its continuation, meta "k" and
// flow version "f"/"h".
func PutVersionRecords(t *testing.T, s store.Store) {
	t.Helper()
	now := time.Unix(1700000000, 0).UTC()
	update(t, s, func(tx store.Tx) error {
		return first(
			tx.RunInsert(&store.Run{ID: "run1", Flow: "f", Version: "h", Owner: "o", Phase: store.PhaseRunning, CreatedAt: now}),
			tx.ContinuationPut("run1", []byte(`{}`)),
			tx.MetaPut("k", []byte("v")),
			tx.FlowVersionPut(&store.FlowVersion{Name: "f", Hash: "h"}))
	})
}

// RecordRead is one read of a record PutVersionRecords wrote, and the
// name of the record its refusal must give.
type RecordRead struct {
	Record string
	Read   func(tx store.Tx) error
}

// RunReads read run1 and its continuation; VersionReads add the meta key
// and the flow version.
var (
	RunReads = []RecordRead{
		{"Run", func(tx store.Tx) error { _, err := tx.RunGet("run1"); return err }},
		{"Run", func(tx store.Tx) error { _, err := tx.RunList(store.RunListParams{}); return err }},
		{"continuation", func(tx store.Tx) error { _, err := tx.ContinuationGet("run1"); return err }},
	}
	VersionReads = append(RunReads[:len(RunReads):len(RunReads)],
		RecordRead{"meta", func(tx store.Tx) error { _, err := tx.MetaGet("k"); return err }},
		RecordRead{"flow latest", func(tx store.Tx) error { _, err := tx.FlowVersionLatest("f"); return err }},
		RecordRead{"FlowVersion", func(tx store.Tx) error { _, err := tx.FlowVersionGet("f", "h"); return err }},
	)
)

// CheckNewerRefused checks that each read fails with sentinel, saying
// that the record has format version 2 and this weir reads version 1.
func CheckNewerRefused(t *testing.T, s store.Store, sentinel error, reads []RecordRead) {
	t.Helper()
	for _, r := range reads {
		err := s.View(ctx, r.Read)
		want := r.Record + " record has format version 2, this weir reads version 1"
		if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %v saying %q", r.Record, err, sentinel, want)
		}
	}
}
