package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirhq/weir/runtime/store"
)

// testRunCount: a backend whose Tx is a store.RunCounter counts what
// RunList finds, in all and per owner, after inserts, a phase change and
// a delete, and inside the transaction that made them.
func testRunCount(t *testing.T, s store.Store, _ Opener) {
	counts := false
	view(t, s, func(tx store.Tx) error {
		_, counts = tx.(store.RunCounter)
		return nil
	})
	if !counts {
		t.Skip("the backend's Tx is not a store.RunCounter (an optional ability)")
	}
	phases := []store.Phase{store.PhaseQueued, store.PhaseQueued, store.PhaseRunning, store.PhaseWaiting, store.PhaseWaiting, store.PhaseCompleted}
	want := func(tx store.Tx) error {
		for _, p := range []store.Phase{store.PhaseQueued, store.PhaseRunning, store.PhaseWaiting, store.PhaseCompleting, store.PhaseCompleted} {
			runs, err := tx.RunList(store.RunListParams{Phase: p})
			if err != nil {
				return err
			}
			n, err := tx.(store.RunCounter).RunCount(p)
			if err != nil {
				return err
			}
			if n != len(runs) {
				return fmt.Errorf("RunCount(%s) = %d, RunList finds %d", p, n, len(runs))
			}
			for _, owner := range []string{"o", "p", "", "nobody"} {
				runs, err := tx.RunList(store.RunListParams{Owner: owner, Phase: p})
				if err != nil {
					return err
				}
				if owner == "" {
					runs = slices.DeleteFunc(runs, func(r *store.Run) bool { return r.Owner != "" })
				}
				n, err := tx.(store.RunCounter).OwnerRunCount(owner, p)
				if err != nil {
					return err
				}
				if n != len(runs) {
					return fmt.Errorf("OwnerRunCount(%q, %s) = %d, RunList finds %d", owner, p, n, len(runs))
				}
			}
		}
		return nil
	}
	update(t, s, func(tx store.Tx) error {
		for i, p := range phases {
			if err := tx.RunInsert(&store.Run{ID: fmt.Sprintf("r%d", i), Owner: []string{"o", "p", "o", ""}[i%4], Phase: p}); err != nil {
				return err
			}
		}
		return want(tx)
	})
	update(t, s, func(tx store.Tx) error {
		if err := ChangeRun(tx, "r0", func(r *store.Run) { r.Phase = store.PhaseRunning }); err != nil {
			return err
		}
		if err := tx.RunDelete("r3"); err != nil {
			return err
		}
		// An owner's run moving to another phase leaves the old phase's
		// count, as a run changing owner leaves the old owner's.
		r4, err := tx.RunGet("r4")
		if err != nil {
			return err
		}
		r4.Phase, r4.Owner = store.PhaseCompleted, "p"
		if err := tx.RunUpdate(r4); err != nil {
			return err
		}
		return want(tx)
	})
	view(t, s, func(tx store.Tx) error {
		if err := want(tx); err != nil {
			return err
		}
		n, err := tx.(store.RunCounter).RunCount(store.PhaseRunning)
		if err := first(err, check(n == 2, "%d running, want 2", n)); err != nil {
			return err
		}
		n, err = tx.(store.RunCounter).OwnerRunCount("o", store.PhaseRunning)
		return first(err, check(n == 2, "%d of o's running, want 2", n))
	})
}
