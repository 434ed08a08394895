package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/store"
)

// testOverlongIDs: an id past store.MaxIDBytes, with a NUL or with
// invalid UTF-8 is refused with a short store.ErrBadID (a 65,000-byte
// request id must not become a 65,000-byte error); ids at the bound are
// kept; reads that name an id no record can have find nothing.
func testOverlongIDs(t *testing.T, s store.Store, _ Opener) {
	long := strings.Repeat("r", 65000)
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.DedupPut(&store.Dedup{Owner: "alice", RequestID: long, RunID: "run_1"})
	})
	if !errors.Is(err, store.ErrBadID) || len(err.Error()) > 200 {
		t.Fatalf("request id of 65000 bytes: %v, want a short ErrBadID", err)
	}
	for _, id := range []string{strings.Repeat("r", store.MaxIDBytes+1), "a\x00b", "abc\xff"} {
		err = s.Update(ctx, func(tx store.Tx) error {
			return tx.RunInsert(&store.Run{ID: id, Phase: store.PhaseQueued})
		})
		if !errors.Is(err, store.ErrBadID) {
			t.Fatalf("run id %.20q: %v, want ErrBadID", id, err)
		}
	}
	max := strings.Repeat("r", store.MaxIDBytes)
	update(t, s, func(tx store.Tx) error {
		return tx.DedupPut(&store.Dedup{Owner: strings.Repeat("o", store.MaxIDBytes), RequestID: max, RunID: "run_1"})
	})
	view(t, s, func(tx store.Tx) error {
		_, e1 := tx.RunGet("abc\xff")
		_, e2 := tx.TaskByChild("a\x00b")
		d, e3 := tx.DedupGet(strings.Repeat("o", store.MaxIDBytes), max)
		if e3 != nil {
			return e3
		}
		return first(isNotFound("a run of an invalid id", e1), isNotFound("a waiter of an id with a NUL", e2), check(d.RunID == "run_1", "dedup run %q", d.RunID))
	})
}
