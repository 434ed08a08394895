// Package pruner is the retention service: once a minute it removes the
// runs that finished longer ago than the retention (with their events,
// continuations, dedup keys, cohorts, agent turns and idempotency
// records, and their trace outbox entries) and the audit events older
// than theirs, so the store does not
// grow without bound, and the owners' spend rows that have left the
// spend window. A child whose parent has not finished is kept: the
// parent may still read it. Dead letters are kept for the operator.
package pruner

import (
	"context"
	"errors"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// Interval is the time between pruning passes.
const Interval = time.Minute

// RunBatch bounds the runs of each phase one pass removes; AuditBatch the
// audit events read at once.
const (
	RunBatch   = 500
	AuditBatch = 1000
)

// Engine is what the pruner needs from the engine.
type Engine interface {
	// Retention is how long finished runs are kept (0: for ever).
	Retention() time.Duration
	// AuditRetention is how long audit events are kept.
	AuditRetention() time.Duration
	// SpendSince is the first minute of the owners' spend window at now
	// (store.OwnerSpend): the rows of earlier minutes count for nothing.
	SpendSince(now time.Time) int64
	// Info and Error log.
	Info(msg string, args ...any)
	Error(msg string, args ...any)
}

// Result is what one pass removed.
type Result struct{ Runs, AuditEvents, SpendRows, OutboxEntries int }

// Pruner is the retention service.
type Pruner struct {
	eng   Engine
	st    store.Store
	clk   clock.Clock
	audit string // the audit stream's run id
	// outbox is the trace outbox's run id: its entries go with their
	// runs, so a trace never exported (tracing turned off meanwhile, a
	// collector down for longer than the retention) does not stay.
	outbox string
	*service.Loop
}

// New returns a pruner of st, whose audit events are under auditStream
// and trace outbox entries under outboxStream.
func New(eng Engine, st store.Store, clk clock.Clock, auditStream, outboxStream string) *Pruner {
	p := &Pruner{eng: eng, st: st, clk: clk, audit: auditStream, outbox: outboxStream}
	p.Loop = &service.Loop{ServiceName: "pruner", Clock: clk, Interval: func() time.Duration { return Interval },
		Pass: func(ctx context.Context) { p.runOnce(ctx) }}
	return p
}

// RunOnce is one pass, for tests.
func (p *Pruner) RunOnce(ctx context.Context) Result { return p.runOnce(ctx) }

func (p *Pruner) runOnce(ctx context.Context) Result {
	var res Result
	now := p.clk.Now()
	if age := p.eng.Retention(); age > 0 {
		n, err := Runs(ctx, p.st, now.Add(-age))
		res.Runs = n
		if err != nil {
			if !service.Stopping(ctx) {
				p.eng.Error("pruning", "error", err)
			}
		}
		if n > 0 {
			p.eng.Info("pruned finished runs", "count", n, "finished_before", now.Add(-age))
		}
		n, err = Audit(ctx, p.st, p.outbox, now.Add(-age))
		res.OutboxEntries = n
		if err != nil && !service.Stopping(ctx) {
			p.eng.Error("pruning the trace outbox", "error", err)
		}
	}
	n, err := Audit(ctx, p.st, p.audit, now.Add(-p.eng.AuditRetention()))
	res.AuditEvents = n
	if err != nil {
		if !service.Stopping(ctx) {
			p.eng.Error("pruning the audit stream", "error", err)
		}
	} else if n > 0 {
		p.eng.Info("pruned audit events", "count", n)
	}
	err = p.st.Update(ctx, func(tx store.Tx) error {
		var err error
		res.SpendRows, err = tx.OwnerSpendPrune(p.eng.SpendSince(now))
		return err
	})
	if err != nil && !service.Stopping(ctx) {
		p.eng.Error("pruning the owners' spend", "error", err)
	}
	return res
}

// errKept aborts a run's removal: its parent has not finished.
var errKept = errors.New("pruner: the run's parent has not finished")

// Runs removes up to RunBatch runs of each terminal phase that finished
// before cutoff and returns how many it removed.
func Runs(ctx context.Context, st store.Store, cutoff time.Time) (int, error) {
	removed := 0
	for _, phase := range []store.Phase{store.PhaseCompleted, store.PhaseFailed, store.PhaseCancelled} {
		var runs []*store.Run
		if err := st.View(ctx, func(tx store.Tx) error {
			var err error
			runs, err = tx.RunList(store.RunListParams{Phase: phase, FinishedBefore: cutoff, Limit: RunBatch})
			return err
		}); err != nil {
			return removed, err
		}
		for _, r := range runs {
			err := st.Update(ctx, func(tx store.Tx) error { return deleteRunTx(tx, r) })
			switch {
			case err == nil:
				removed++
			case !errors.Is(err, errKept):
				return removed, err
			}
		}
	}
	return removed, nil
}

// deleteRunTx removes one finished run and everything kept for it.
func deleteRunTx(tx store.Tx, r *store.Run) error {
	if r.ParentRunID != "" {
		p, err := tx.RunGet(r.ParentRunID)
		if err == nil && !p.Phase.Terminal() {
			return errKept
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
}

// Audit removes the events of a stream (the audit stream, the trace
// outbox) recorded before cutoff and returns how many it removed.
func Audit(ctx context.Context, st store.Store, stream string, cutoff time.Time) (int, error) {
	removed := 0
	for {
		var evs []*store.Event
		if err := st.View(ctx, func(tx store.Tx) error {
			var err error
			evs, err = tx.EventList(store.EventListParams{RunID: stream, Limit: AuditBatch})
			return err
		}); err != nil {
			return removed, err
		}
		old := 0
		for old < len(evs) && evs[old].At.Before(cutoff) {
			old++
		}
		if old == 0 {
			return removed, nil
		}
		before := evs[old-1].Seq + 1
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.EventDeleteBefore(stream, before) }); err != nil {
			return removed, err
		}
		removed += old
		if old < len(evs) {
			return removed, nil
		}
	}
}
