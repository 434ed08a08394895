// Package rescuer is the lease rescuer: a service that finds the leases
// whose deadline passed (a holder that crashed, hung or lost its store)
// and has the engine take each back, queued again with attempt + 1 or
// dead-lettered once it has lost its lease MaxAttempts times
// (docs/design.md §4). The decision is Decide; the engine applies it in
// the lease's transaction.
package rescuer

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// Batch bounds the expired leases one pass takes back.
const Batch = 256

// Action is what becomes of a task whose lease was lost.
type Action int

const (
	// Requeue: the task is queued again with attempt + 1.
	Requeue Action = iota
	// DeadLetter: the task lost its lease MaxAttempts times; it is
	// dead-lettered and its run fails with E_ATTEMPTS_EXCEEDED.
	DeadLetter
)

// Decide decides a lost lease from the task's attempt and the engine's
// MaxAttempts.
func Decide(attempt, maxAttempts int) Action {
	if attempt >= maxAttempts {
		return DeadLetter
	}
	return Requeue
}

// Engine is what the rescuer needs from the engine.
type Engine interface {
	// ListExpired lists up to limit leases whose deadline is before now.
	ListExpired(ctx context.Context, now time.Time, limit int) ([]*store.Lease, error)
	// Rescue takes one lease back; taken is false when the lease was
	// renewed, released or rescued meanwhile (nothing was written).
	Rescue(ctx context.Context, l *store.Lease, why string) (action Action, taken bool, err error)
	// LeaseTimeout is the lease deadline now in force.
	LeaseTimeout() time.Duration
	// Tick is the scheduler's tick: the rescuer looks no more often.
	Tick() time.Duration
	// Error logs a failure; the pass goes on with the next lease.
	Error(msg string, args ...any)
}

// Result is what one pass did.
type Result struct {
	Expired      int // leases listed as expired
	Requeued     int
	DeadLettered int
	Skipped      int // renewed, released or rescued by another since listed
	Failed       int // the transaction failed; the lease is tried next pass
}

// Rescuer is the lease rescuer service.
type Rescuer struct {
	eng Engine
	clk clock.Clock
	*service.Loop
}

// New returns a rescuer over eng on clk.
func New(eng Engine, clk clock.Clock) *Rescuer {
	r := &Rescuer{eng: eng, clk: clk}
	r.Loop = &service.Loop{ServiceName: "rescuer", Clock: clk, Interval: r.interval, Pass: func(ctx context.Context) { r.runOnce(ctx) }}
	return r
}

// interval is a tenth of the lease timeout (expiry is measured in lease
// timeouts), never less than the scheduler's tick.
func (r *Rescuer) interval() time.Duration {
	return max(r.eng.LeaseTimeout()/10, r.eng.Tick())
}

// RunOnce is one pass, for tests.
func (r *Rescuer) RunOnce(ctx context.Context) Result { return r.runOnce(ctx) }

func (r *Rescuer) runOnce(ctx context.Context) Result {
	var res Result
	expired, err := r.eng.ListExpired(ctx, r.clk.Now(), Batch)
	if err != nil {
		if !service.Stopping(ctx) {
			r.eng.Error("listing expired leases", "error", err)
		}
		return res
	}
	res.Expired = len(expired)
	for _, l := range expired {
		action, taken, err := r.eng.Rescue(ctx, l, "lease expired")
		switch {
		case err != nil:
			res.Failed++
			if !service.Stopping(ctx) {
				r.eng.Error("rescuing lease", "task", l.TaskID, "error", err)
			}
		case !taken:
			res.Skipped++
		case action == DeadLetter:
			res.DeadLettered++
		default:
			res.Requeued++
		}
	}
	return res
}
