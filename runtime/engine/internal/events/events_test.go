package events

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// host is the engine's side, over a list of events: each with its
// acceptance time and whether its triggers are pending.
type host struct {
	events    []*store.OwnerEvent
	refuse    map[string]bool // event ids whose starts fail this pass
	retention time.Duration
	errors    []string
}

func (h *host) Pending(_ context.Context, limit int) ([]*store.OwnerEvent, error) {
	var out []*store.OwnerEvent
	for _, ev := range h.events {
		if ev.TriggersPending && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (h *host) StartTriggers(_ context.Context, ev *store.OwnerEvent) error {
	if h.refuse[ev.ID] {
		return errors.New("E_QUEUE_FULL")
	}
	ev.TriggersPending = false
	return nil
}

func (h *host) Expire(_ context.Context, before time.Time, limit int) (int, error) {
	var kept []*store.OwnerEvent
	n := 0
	for _, ev := range h.events {
		if ev.AcceptedAt.Before(before) && n < limit {
			n++
			continue
		}
		kept = append(kept, ev)
	}
	h.events = kept
	return n, nil
}

func (h *host) Retention() time.Duration { return h.retention }

func (h *host) Error(msg string, args ...any) { h.errors = append(h.errors, fmt.Sprint(msg, args)) }

func TestPassStartsPendingTriggersAndExpiresOldEvents(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	h := &host{retention: time.Hour, refuse: map[string]bool{"full": true}, events: []*store.OwnerEvent{
		{Owner: "a", ID: "old", AcceptedAt: t0.Add(-2 * time.Hour)},
		{Owner: "a", ID: "pending", AcceptedAt: t0.Add(-time.Minute), TriggersPending: true},
		{Owner: "b", ID: "full", AcceptedAt: t0.Add(-time.Minute), TriggersPending: true},
		{Owner: "b", ID: "done", AcceptedAt: t0.Add(-time.Minute)},
	}}
	s := New(h, clk)
	ctx := context.Background()
	if got, want := s.RunOnce(ctx), (Result{Started: 1, Pending: 1, Expired: 1}); got != want {
		t.Fatalf("first pass %+v, want %+v", got, want)
	}
	if len(h.errors) != 1 {
		t.Fatalf("the refused start is logged once: %v", h.errors)
	}
	// The refusal passes; the next pass starts it, and expires nothing
	// newer than the retention.
	delete(h.refuse, "full")
	if got, want := s.RunOnce(ctx), (Result{Started: 1}); got != want {
		t.Fatalf("second pass %+v, want %+v", got, want)
	}
	// An hour on, the rest are past their retention: a pass removes them
	// and starts nothing again.
	clk.Advance(time.Hour)
	if got, want := s.RunOnce(ctx), (Result{Expired: 3}); got != want {
		t.Fatalf("third pass %+v, want %+v", got, want)
	}
	if len(h.events) != 0 {
		t.Fatalf("left %d events", len(h.events))
	}
}

// A pass removes at most Batch events, so a backlog of old ones is
// cleared over several passes rather than in one long transaction.
func TestPassExpiresABatchAtATime(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	h := &host{retention: time.Hour}
	for i := range Batch + 7 {
		h.events = append(h.events, &store.OwnerEvent{Owner: "a", ID: fmt.Sprint(i), AcceptedAt: t0.Add(-2 * time.Hour)})
	}
	s := New(h, clock.NewFake(t0))
	if got := s.RunOnce(context.Background()).Expired; got != Batch {
		t.Fatalf("first pass expired %d, want %d", got, Batch)
	}
	if got := s.RunOnce(context.Background()).Expired; got != 7 {
		t.Fatalf("second pass expired %d, want 7", got)
	}
}
