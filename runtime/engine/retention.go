package engine

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/pruner"
)

// Prune removes runs that finished more than age ago, with their
// continuations, events, dedup keys, cohorts and idempotency records, so
// the store does not grow without bound (internal/pruner does it once a
// minute with the configured retention). A child whose parent has not
// finished is kept: the parent may still read it. Dead letters are kept
// for the operator. It returns how many runs it removed.
func (e *Engine) Prune(ctx context.Context, age time.Duration) (int, error) {
	if age <= 0 {
		return 0, nil
	}
	cutoff := e.clock.Now().Add(-age)
	n, err := pruner.Runs(ctx, e.st, cutoff)
	if n > 0 {
		e.log.Info("pruned finished runs", "count", n, "finished_before", cutoff)
	}
	return n, err
}

// pruneHost is the engine's side of the pruner (internal/pruner).
type pruneHost struct{ e *Engine }

// Retention is how long finished runs are kept (0: for ever).
func (h pruneHost) Retention() time.Duration { return h.e.cfg.Load().Retention }

// AuditRetention is how long audit events are kept.
func (h pruneHost) AuditRetention() time.Duration { return h.e.auditor.retention() }

// SpendSince is the first minute of the owners' spend window at now.
func (h pruneHost) SpendSince(now time.Time) int64 { return spendSince(now) }

// Info logs what a pass removed.
func (h pruneHost) Info(msg string, args ...any) { h.e.log.Info(msg, args...) }

// Error logs a failed pass.
func (h pruneHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }
