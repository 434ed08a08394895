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
	// Every key part of a record is checked, not only its id.
	bad := "a\x00b"
	for name, w := range map[string]func(tx store.Tx) error{
		"task id":             func(tx store.Tx) error { return tx.TaskPut(&store.Task{ID: bad, RunID: "r"}) },
		"task run id":         func(tx store.Tx) error { return tx.TaskPut(&store.Task{ID: "t", RunID: bad}) },
		"task wait child":     func(tx store.Tx) error { return tx.TaskPut(&store.Task{ID: "t", RunID: "r", WaitChild: bad}) },
		"dedup owner":         func(tx store.Tx) error { return tx.DedupPut(&store.Dedup{Owner: bad, RequestID: "q"}) },
		"dedup request id":    func(tx store.Tx) error { return tx.DedupPut(&store.Dedup{Owner: "o", RequestID: bad}) },
		"dead letter task id": func(tx store.Tx) error { return tx.DeadLetterPut(&store.DeadLetter{TaskID: bad}) },
		"dead letter owner":   func(tx store.Tx) error { return tx.DeadLetterPut(&store.DeadLetter{TaskID: "t", Owner: bad}) },
	} {
		if err := s.Update(ctx, w); !errors.Is(err, store.ErrBadID) {
			t.Errorf("%s with a NUL byte: %v, want ErrBadID", name, err)
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
