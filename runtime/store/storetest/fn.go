package storetest

import (
	"errors"
	"testing"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
)

// testRetainedTx: a Tx used after its function returned fails, reads and
// writes alike, instead of reaching into a later transaction.
func testRetainedTx(t *testing.T, s store.Store, _ Opener) {
	var kept store.Tx
	update(t, s, func(tx store.Tx) error { kept = tx; return nil })
	if err := kept.MetaPut("k", []byte("v")); !errors.Is(err, storekit.ErrTxDone) {
		t.Fatalf("write through a retained Update tx: %v, want ErrTxDone", err)
	}
	if _, err := kept.MetaGet("k"); !errors.Is(err, storekit.ErrTxDone) {
		t.Fatalf("read through a retained Update tx: %v, want ErrTxDone", err)
	}
	view(t, s, func(tx store.Tx) error { kept = tx; return nil })
	if _, err := kept.RunGet("r"); !errors.Is(err, storekit.ErrTxDone) {
		t.Fatalf("read through a retained View tx: %v, want ErrTxDone", err)
	}
}

// testPanicReachesCaller: a panic in an Update function reaches the
// caller, its writes are discarded and the store goes on. A backend with
// group commit runs the function on its committer, so the panic comes as a
// *storekit.PanicError holding the value (and the committer's stack).
func testPanicReachesCaller(t *testing.T, s store.Store, _ Opener) {
	func() {
		defer func() {
			p := recover()
			if pe, ok := p.(*storekit.PanicError); ok && pe.Value == "kaboom" {
				return
			}
			if s.Capabilities().GroupCommit || p != "kaboom" {
				t.Fatalf("recovered %v, want the function's panic (a *PanicError with its value under group commit)", p)
			}
		}()
		_ = s.Update(ctx, func(tx store.Tx) error {
			_ = tx.MetaPut("k", []byte("v"))
			panic("kaboom")
		})
		t.Fatal("Update returned after its function panicked")
	}()
	update(t, s, func(tx store.Tx) error {
		_, err := tx.MetaGet("k")
		return first(isNotFound("meta of a function that panicked", err), tx.MetaPut("k2", nil))
	})
}
