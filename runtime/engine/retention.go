package engine

import (
	"context"
	"errors"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// pruneBatch bounds the runs one pruning pass removes.
const pruneBatch = 500

// Prune removes runs that finished more than age ago, with their
// continuations, events, dedup keys, cohorts and idempotency records, so
// the store does not grow without bound. A child whose parent has not
// finished is kept: the parent may still read it. Dead letters are kept
// for the operator. It returns how many runs it removed.
func (e *Engine) Prune(ctx context.Context, age time.Duration) (int, error) {
	if age <= 0 {
		return 0, nil
	}
	return e.pruneBefore(ctx, e.now().Add(-age))
}

// pruneBefore removes the runs that finished before cutoff.
func (e *Engine) pruneBefore(ctx context.Context, cutoff time.Time) (int, error) {
	removed := 0
	for _, phase := range []store.Phase{store.PhaseCompleted, store.PhaseFailed, store.PhaseCancelled} {
		var runs []*store.Run
		if err := e.st.View(ctx, func(tx store.Tx) error {
			var err error
			runs, err = tx.RunList(store.RunListParams{Phase: phase, FinishedBefore: cutoff, Limit: pruneBatch})
			return err
		}); err != nil {
			return removed, err
		}
		for _, r := range runs {
			err := e.st.Update(ctx, func(tx store.Tx) error {
				if r.ParentRunID != "" {
					p, err := tx.RunGet(r.ParentRunID)
					if err == nil && !p.Phase.Terminal() {
						return errSkip
					}
				}
				if err := tx.RunDelete(r.ID); err != nil {
					return err
				}
				if err := tx.ContinuationDelete(r.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if r.RequestID != "" {
					if err := tx.DedupDelete(r.Owner, r.RequestID); err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
				}
				if err := tx.EventDeleteRun(r.ID); err != nil {
					return err
				}
				if err := tx.CohortDeleteRun(r.ID); err != nil {
					return err
				}
				if err := tx.AgentTurnDeleteRun(r.ID); err != nil {
					return err
				}
				return tx.IdemDeleteRun(r.ID)
			})
			switch {
			case err == nil:
				removed++
			case !errors.Is(err, errSkip):
				return removed, err
			}
		}
	}
	if removed > 0 {
		e.log.Info("pruned finished runs", "count", removed, "finished_before", cutoff)
	}
	return removed, nil
}

// maintain prunes on a timer while the engine runs.
func (e *Engine) maintain() {
	const every = time.Minute
	t := e.clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C():
		}
		if age := e.config().Retention; age > 0 {
			if _, err := e.Prune(context.Background(), age); err != nil {
				e.log.Error("pruning", "error", err)
			}
		}
		if n, err := e.PruneAudit(context.Background(), e.now().Add(-e.auditor.retention())); err != nil {
			e.log.Error("pruning the audit stream", "error", err)
		} else if n > 0 {
			e.log.Info("pruned audit events", "count", n)
		}
	}
}
