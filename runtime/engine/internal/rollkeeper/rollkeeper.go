// Package rollkeeper keeps a fleet daemon's view of the others current
// (docs/design.md §10): on a shared store it renews this daemon's entry in
// the fleet's roll, and forgets from its queued count the runs another
// daemon started (max_queued is per daemon, and only the daemon that
// leases a run sees it leave the queue). It runs only on a shared store.
package rollkeeper

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
)

// StampDue says this daemon's roll entry, stamped at last, is due for
// renewal at now: at a third of the lease timeout, so it is renewed
// several times before any daemon counts it departed.
func StampDue(now, last time.Time, leaseTimeout time.Duration) bool {
	return now.Sub(last) >= leaseTimeout/3
}

// Engine is what the roll keeper needs from the engine.
type Engine interface {
	// ForgetStarted takes out of the queued count the runs that left the
	// queue on other daemons and says how many.
	ForgetStarted(ctx context.Context) int
	// StampedAt is when this daemon's roll entry was last written.
	StampedAt() time.Time
	// StampRoll writes this daemon's roll entry again.
	StampRoll(ctx context.Context) error
	// LeaseTimeout and Tick set the keeper's pace.
	LeaseTimeout() time.Duration
	Tick() time.Duration
	// Error logs a failure.
	Error(msg string, args ...any)
}

// Result is what one pass did.
type Result struct {
	Forgotten int  // runs taken out of the queued count
	Stamped   bool // the roll entry was renewed
}

// Keeper is the roll keeper service.
type Keeper struct {
	eng Engine
	clk clock.Clock
	*service.Loop
}

// New returns a roll keeper over eng on clk.
func New(eng Engine, clk clock.Clock) *Keeper {
	k := &Keeper{eng: eng, clk: clk}
	k.Loop = &service.Loop{ServiceName: "rollkeeper", Clock: clk, Interval: func() time.Duration { return max(eng.LeaseTimeout()/10, eng.Tick()) },
		Pass: func(ctx context.Context) { k.runOnce(ctx) }}
	return k
}

// RunOnce is one pass, for tests.
func (k *Keeper) RunOnce(ctx context.Context) Result { return k.runOnce(ctx) }

func (k *Keeper) runOnce(ctx context.Context) Result {
	res := Result{Forgotten: k.eng.ForgetStarted(ctx)}
	if !StampDue(k.clk.Now(), k.eng.StampedAt(), k.eng.LeaseTimeout()) {
		return res
	}
	if err := k.eng.StampRoll(ctx); err != nil {
		if !service.Stopping(ctx) {
			// A pass cut short by the service's stop is no failure.
			k.eng.Error("renewing this daemon's entry in the fleet's roll", "error", err)
		}
		return res
	}
	res.Stamped = true
	return res
}
