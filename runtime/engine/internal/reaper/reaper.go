// Package reaper is the queue reaper: a service that drops the tasks that
// waited past the queue deadline for a worker slot and a budget slice, so
// their runs fail with E_QUEUE_TIMEOUT and a reason instead of waiting
// forever (docs/design.md §8). The dispatcher drops the overdue tasks it
// meets on a pass; the reaper finds them when every slot is held and no
// pass looks at the queue. Overdue is the one decision both apply.
package reaper

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// Batch bounds the overdue tasks one pass drops.
const Batch = 64

// QueuedSince is when a task ready at readyAt began waiting for a slot on
// an engine started at startedAt: time the daemon was down is not time
// spent waiting.
func QueuedSince(readyAt, startedAt time.Time) time.Time {
	if startedAt.After(readyAt) {
		return startedAt
	}
	return readyAt
}

// Overdue says a task ready at readyAt has waited past the queue timeout
// at now (a timeout ≤ 0 is no deadline).
func Overdue(readyAt, startedAt, now time.Time, timeout time.Duration) bool {
	return timeout > 0 && now.After(QueuedSince(readyAt, startedAt).Add(timeout))
}

// Engine is what the reaper needs from the engine.
type Engine interface {
	// QueueTimeout is the queue deadline now in force (≤ 0: none).
	QueueTimeout() time.Duration
	// StartedAt is when the engine started.
	StartedAt() time.Time
	// ListReady lists up to limit tasks ready since before readyBefore,
	// oldest first.
	ListReady(ctx context.Context, readyBefore time.Time, limit int) ([]*store.Task, error)
	// Dispatched says a worker of this engine holds the task already.
	Dispatched(taskID string) bool
	// Drop ends a task that waited past its queue deadline; false when
	// it was leased or gone meanwhile.
	Drop(ctx context.Context, t *store.Task) bool
	// Tick is the scheduler's tick, the reaper's interval.
	Tick() time.Duration
	// Error logs a failure.
	Error(msg string, args ...any)
}

// Result is what one pass did.
type Result struct {
	Overdue int // tasks listed past the deadline
	Dropped int
	Held    int // dispatched to a worker of this engine already
}

// Reaper is the queue reaper service.
type Reaper struct {
	eng Engine
	clk clock.Clock
	*service.Loop
}

// New returns a reaper over eng on clk.
func New(eng Engine, clk clock.Clock) *Reaper {
	r := &Reaper{eng: eng, clk: clk}
	r.Loop = &service.Loop{ServiceName: "reaper", Clock: clk, Interval: eng.Tick, Pass: func(ctx context.Context) { r.runOnce(ctx) }}
	return r
}

// RunOnce is one pass, for tests.
func (r *Reaper) RunOnce(ctx context.Context) Result { return r.runOnce(ctx) }

func (r *Reaper) runOnce(ctx context.Context) Result {
	var res Result
	qt, now := r.eng.QueueTimeout(), r.clk.Now()
	if qt <= 0 || now.Before(r.eng.StartedAt().Add(qt)) {
		return res // nothing has waited that long on this engine yet
	}
	overdue, err := r.eng.ListReady(ctx, now.Add(-qt), Batch)
	if err != nil {
		if !service.Stopping(ctx) {
			r.eng.Error("listing overdue tasks", "error", err)
		}
		return res
	}
	res.Overdue = len(overdue)
	for _, t := range overdue {
		switch {
		case r.eng.Dispatched(t.ID):
			res.Held++
		case r.eng.Drop(ctx, t):
			res.Dropped++
		}
	}
	return res
}
