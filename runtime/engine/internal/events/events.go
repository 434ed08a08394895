// Package events is the events service: each pass it starts the runs of
// the triggers a crash or a refusal of admission left unstarted (events
// still marked TriggersPending), and removes the events older than the
// event retention, so that an event no wait received is kept for the
// retention and no longer. Starting a trigger's run is deduplicated by
// its derived request id, and removing an event removed already does
// nothing, so several daemons of a fleet may run passes at once.
package events

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// Interval is the time between passes.
const Interval = 5 * time.Second

// Batch bounds the events one pass starts the triggers of, and the events
// it removes.
const Batch = 500

// Engine is what the service needs from the engine.
type Engine interface {
	// Pending lists up to limit events of every owner whose triggers'
	// runs are not all started.
	Pending(ctx context.Context, limit int) ([]*store.OwnerEvent, error)
	// StartTriggers starts what ev's triggers have not started yet.
	StartTriggers(ctx context.Context, ev *store.OwnerEvent) error
	// Expire removes up to limit events accepted before t, and says how
	// many it removed.
	Expire(ctx context.Context, before time.Time, limit int) (int, error)
	// Retention is how long an event is kept.
	Retention() time.Duration
	Error(msg string, args ...any)
}

// Result is what one pass did.
type Result struct {
	// Started counts the events whose triggers' runs are now all
	// started; Pending those still pending.
	Started, Pending int
	Expired          int
}

// Service is the events service.
type Service struct {
	eng   Engine
	clock clock.Clock
	*service.Loop
}

// New returns the service over eng on clk.
func New(eng Engine, clk clock.Clock) *Service {
	s := &Service{eng: eng, clock: clk}
	s.Loop = &service.Loop{ServiceName: "events", Clock: clk, Interval: func() time.Duration { return Interval },
		Pass: func(ctx context.Context) { s.runOnce(ctx) }}
	return s
}

// RunOnce is one pass, for tests.
func (s *Service) RunOnce(ctx context.Context) Result { return s.runOnce(ctx) }

func (s *Service) runOnce(ctx context.Context) Result {
	var res Result
	pending, err := s.eng.Pending(ctx, Batch)
	if err != nil {
		if !service.Stopping(ctx) {
			s.eng.Error("listing events with triggers pending", "error", err)
		}
		return res
	}
	for _, ev := range pending {
		if err := s.eng.StartTriggers(ctx, ev); err != nil {
			res.Pending++
			if !service.Stopping(ctx) {
				s.eng.Error("starting an event's triggers", "owner", ev.Owner, "event", ev.ID, "error", err)
			}
			continue
		}
		res.Started++
	}
	n, err := s.eng.Expire(ctx, s.clock.Now().Add(-s.eng.Retention()), Batch)
	res.Expired = n
	if err != nil && !service.Stopping(ctx) {
		s.eng.Error("removing expired events", "error", err)
	}
	return res
}
