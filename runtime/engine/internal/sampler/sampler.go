// Package sampler is the stats sampler: every HistoryInterval it takes
// one sample of the engine's figures (admission, queue and slots, what
// finished, the queue's depth per type) into the history that `weir
// stats --history` and the console's status page draw. The first sample
// is taken as the engine starts.
package sampler

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
)

// Engine is what the sampler needs from the engine.
type Engine interface {
	// Sample takes the figures at at into the history.
	Sample(ctx context.Context, at time.Time)
}

// Sampler is the sampling service.
type Sampler struct {
	eng   Engine
	clk   clock.Clock
	every time.Duration
	loop  *service.Loop
}

// New returns a sampler taking a sample every interval on clk.
func New(eng Engine, clk clock.Clock, interval time.Duration) *Sampler {
	s := &Sampler{eng: eng, clk: clk, every: interval}
	s.loop = &service.Loop{Clock: clk, Interval: func() time.Duration { return interval }, Immediate: true,
		Pass: func(ctx context.Context) { s.runOnce(ctx) }}
	return s
}

// Name says which service it is.
func (s *Sampler) Name() string { return "sampler" }

// Start takes the first sample and begins sampling.
func (s *Sampler) Start(ctx context.Context) error { return s.loop.Start(ctx) }

// Stop ends sampling after the sample in progress.
func (s *Sampler) Stop() { s.loop.Stop() }

// RunOnce takes one sample and says when, for tests.
func (s *Sampler) RunOnce(ctx context.Context) time.Time { return s.runOnce(ctx) }

// runOnce takes one sample; a sample that takes longer than the interval
// is cut short (its figures read from the store are left out).
func (s *Sampler) runOnce(ctx context.Context) time.Time {
	at := s.clk.Now()
	ctx, cancel := context.WithTimeout(ctx, s.every)
	defer cancel()
	s.eng.Sample(ctx, at)
	return at
}
