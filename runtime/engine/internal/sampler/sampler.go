// Package sampler is the stats sampler: it takes a sample of the engine's
// figures (admission, queue and slots, what finished, the queue's depth
// per type) into the history that `weir stats --history` and the
// console's status page draw — on the first tick after the engine starts,
// then every sampling interval by the engine's clock (Due).
package sampler

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
)

// Due says a sample is due at now when the last was taken at last (zero:
// none yet) and samples are every apart.
func Due(now, last time.Time, every time.Duration) bool {
	return last.IsZero() || now.Sub(last) >= every
}

// Engine is what the sampler needs from the engine.
type Engine interface {
	// Sample takes the figures at at into the history.
	Sample(ctx context.Context, at time.Time)
	// Tick is the scheduler's tick: the sampler looks on each.
	Tick() time.Duration
}

// Sampler is the sampling service.
type Sampler struct {
	eng   Engine
	clk   clock.Clock
	every time.Duration
	last  time.Time // only the loop's goroutine (or a test's RunOnce) reads it
	*service.Loop
}

// New returns a sampler taking a sample every interval on clk.
func New(eng Engine, clk clock.Clock, every time.Duration) *Sampler {
	s := &Sampler{eng: eng, clk: clk, every: every}
	s.Loop = &service.Loop{ServiceName: "sampler", Clock: clk, Interval: eng.Tick, Pass: func(ctx context.Context) { s.runOnce(ctx) }}
	return s
}

// RunOnce takes a sample if one is due and says so, for tests.
func (s *Sampler) RunOnce(ctx context.Context) bool { return s.runOnce(ctx) }

// runOnce takes a sample if one is due; a sample that takes longer than
// the interval is cut short (its figures read from the store left out).
func (s *Sampler) runOnce(ctx context.Context) bool {
	at := s.clk.Now()
	if !Due(at, s.last, s.every) {
		return false
	}
	s.last = at
	ctx, cancel := context.WithTimeout(ctx, s.every)
	defer cancel()
	s.eng.Sample(ctx, at)
	return true
}
