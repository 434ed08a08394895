// Package storage is the storage service: while some owner has a storage
// quota (an owner block's storage), each pass measures what every owner's
// runs and kept events take in the store and hands the figures to
// admission, which refuses the starts and events of an owner at its quota
// (E_OWNER_QUOTA). Measuring reads every run, so it is a pass a minute,
// not a count kept in every transaction: an owner may pass its quota by
// what it stores within one interval, and its refusals end within one
// interval of retention (or a prune) freeing the space. Every daemon of a
// fleet measures the shared store itself, so they agree within a pass.
package storage

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
)

// Interval is the time between passes.
const Interval = time.Minute

// Engine is what the service needs from the engine.
type Engine interface {
	// Needed says whether any owner has a storage quota now (a reload
	// may set or clear one).
	Needed() bool
	// Measure is the bytes each owner's runs and events take.
	Measure(ctx context.Context) (map[string]int64, error)
	// Publish hands the figures to admission (nil: no quota to check).
	Publish(map[string]int64)
	Error(msg string, args ...any)
}

// Result is what one pass did.
type Result struct {
	// Measured says the pass measured (some owner has a quota); Owners
	// and Bytes are what it found.
	Measured bool
	Owners   int
	Bytes    int64
}

// Service is the storage service.
type Service struct {
	eng Engine
	*service.Loop
}

// New returns the service over eng on clk.
func New(eng Engine, clk clock.Clock) *Service {
	s := &Service{eng: eng}
	s.Loop = &service.Loop{ServiceName: "storage", Clock: clk, Interval: func() time.Duration { return Interval },
		Pass: func(ctx context.Context) { s.runOnce(ctx) }}
	return s
}

// Start measures once before the first interval, so that quotas hold
// from the daemon's start, then begins the loop.
func (s *Service) Start(ctx context.Context) error {
	s.runOnce(ctx)
	return s.Loop.Start(ctx)
}

// RunOnce is one pass, for tests.
func (s *Service) RunOnce(ctx context.Context) Result { return s.runOnce(ctx) }

func (s *Service) runOnce(ctx context.Context) Result {
	if !s.eng.Needed() {
		s.eng.Publish(nil)
		return Result{}
	}
	used, err := s.eng.Measure(ctx)
	if err != nil {
		// The last figures stay in force: a store that cannot be read
		// now refuses the starts itself.
		if !service.Stopping(ctx) {
			s.eng.Error("measuring the owners' storage", "error", err)
		}
		return Result{}
	}
	s.eng.Publish(used)
	res := Result{Measured: true, Owners: len(used)}
	for _, n := range used {
		res.Bytes += n
	}
	return res
}
