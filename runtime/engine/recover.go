package engine

import (
	"context"

	"github.com/weirhq/weir/runtime/store"
)

// recover rebuilds the engine's view from the store (docs/design.md §5): leases
// held by a previous process are rescued at once (their holder is gone, so
// there is nothing to wait for; on a shared store they wait for expiry) and their runs resume with attempt + 1,
// same id and owner; the count of never-started runs is re-read. Ledger
// accounts open lazily when a run's task is next dispatched, so parked runs
// cost nothing at restart.
func (e *Engine) recover(ctx context.Context) error {
	var leases []*store.Lease
	queued := map[string]string{} // run id → owner
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		if leases, err = tx.LeaseList(); err != nil {
			return err
		}
		runs, err := tx.RunList(store.RunListParams{Phase: store.PhaseQueued})
		for _, r := range runs {
			queued[r.ID] = r.Owner
		}
		return err
	}); err != nil {
		return err
	}
	rescued := 0
	if !e.st.Capabilities().Shared {
		for _, l := range leases {
			if l.Holder != e.holder {
				if _, _, err := (rescueHost{e}).Rescue(ctx, l, "holder "+l.Holder+" is gone (restart)"); err != nil {
					e.log.Error("rescuing lease", "task", l.TaskID, "error", err)
				}
				rescued++
			}
		}
	}
	// In a fleet another holder may be alive: its leases are rescued only
	// when they expire, by whichever daemon's rescuer sees it first.
	e.queued.reset(queued)
	e.log.Info("recovered", "holder", e.holder, "rescued_leases", rescued, "queued_runs", len(queued))
	return nil
}
