package owner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestFrom(t *testing.T) {
	t.Parallel()
	if got := From(context.Background()); got != "" {
		t.Errorf("no owner: %q", got)
	}
	ctx := WithOwner(context.Background(), "alice")
	if got := From(WithOwner(ctx, "bob")); got != "bob" {
		t.Errorf("the innermost owner: %q", got)
	}
	if got := From(ctx); got != "alice" {
		t.Errorf("alice: %q", got)
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		waiting []Load
		want    int
	}{
		{"nobody waits", nil, -1},
		{"alone it is chosen, however many slots it holds", []Load{{InUse: 8, Served: 9}}, 0},
		{"fewest slots in use first", []Load{{InUse: 3, Served: 1}, {InUse: 1, Served: 7}}, 1},
		{"an owner holding none goes before one holding some", []Load{{InUse: 1}, {InUse: 0, Served: 5}}, 1},
		{"equal use: served longest ago (round robin)", []Load{{InUse: 1, Served: 6}, {InUse: 1, Served: 4}, {InUse: 1, Served: 5}}, 1},
		{"never served goes before served", []Load{{InUse: 0, Served: 2}, {InUse: 0}}, 1},
		{"a full tie goes to the first", []Load{{InUse: 2, Served: 3}, {InUse: 2, Served: 3}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Next(tt.waiting); got != tt.want {
				t.Errorf("Next(%+v) = %d, want %d", tt.waiting, got, tt.want)
			}
		})
	}
}

// acquire starts Acquire for name and returns its result's channel once
// it waits in line (or has its slot).
func acquire(t *testing.T, s *Slots, ctx context.Context, name string, stop chan struct{}) chan error {
	t.Helper()
	before := s.Waiting()
	got := make(chan error, 1)
	go func() { got <- s.Acquire(ctx, name, stop) }()
	testutil.Eventually(t, time.Minute, func() error {
		if s.Waiting() == before && len(got) == 0 {
			return fmt.Errorf("%s neither waits nor holds a slot", name)
		}
		return nil
	})
	return got
}

func held(t *testing.T, got chan error, who string) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s never got a slot", who)
	}
}

func waits(t *testing.T, got chan error, who string) {
	t.Helper()
	select {
	case err := <-got:
		t.Fatalf("%s should wait, got a slot (%v)", who, err)
	default:
	}
}

// An owner alone takes every slot; when another owner comes, each slot
// that frees goes to whoever holds fewer, and within an owner the order
// is first come first served.
func TestSlotsShareBetweenOwners(t *testing.T) {
	t.Parallel()
	s := NewSlots(2)
	ctx := context.Background()
	for range 2 {
		if err := s.Acquire(ctx, "a", nil); err != nil {
			t.Fatal(err)
		}
	}
	a3 := acquire(t, s, ctx, "a", nil)
	a4 := acquire(t, s, ctx, "a", nil)
	b1 := acquire(t, s, ctx, "b", nil)
	b2 := acquire(t, s, ctx, "b", nil)
	waits(t, a3, "a's third")

	s.Release("a") // a holds 1, b 0: b's first
	held(t, b1, "b's first")
	waits(t, a3, "a's third")
	s.Release("a") // a 0, b 1: a's third, before its fourth
	held(t, a3, "a's third")
	waits(t, a4, "a's fourth")
	s.Release("b") // a 1, b 0
	held(t, b2, "b's second")
	s.Release("a")
	held(t, a4, "a's fourth")
	if n := s.Waiting(); n != 0 {
		t.Errorf("%d still wait", n)
	}
	s.Release("a")
	s.Release("b")
	if len(s.lines) != 0 || s.free != 2 {
		t.Errorf("after every release: lines %v, %d free", s.lines, s.free)
	}
}

// A caller that stops waiting holds no slot, whether it stopped before
// its turn or as its turn came.
func TestSlotsAcquireStops(t *testing.T) {
	t.Parallel()
	s := NewSlots(1)
	if err := s.Acquire(context.Background(), "a", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := acquire(t, s, ctx, "b", nil)
	stop := make(chan struct{})
	stopped := acquire(t, s, context.Background(), "c", stop)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	close(stop)
	if err := <-stopped; !errors.Is(err, ErrStopped) {
		t.Errorf("stopped: %v", err)
	}
	s.Release("a")
	if len(s.lines) != 0 || s.free != 1 {
		t.Fatalf("lines %v, %d free", s.lines, s.free)
	}

	// Given the slot and stopped at once: the slot goes back.
	if err := s.Acquire(context.Background(), "a", nil); err != nil {
		t.Fatal(err)
	}
	stop = make(chan struct{})
	raced := acquire(t, s, context.Background(), "b", stop)
	close(stop)
	s.Release("a")
	if err := <-raced; err == nil {
		s.Release("b") // its slot came before the stop did
	} else if !errors.Is(err, ErrStopped) {
		t.Fatalf("raced: %v", err)
	}
	if err := s.Acquire(context.Background(), "c", nil); err != nil {
		t.Fatal(err)
	}
	s.Release("c")
	if len(s.lines) != 0 || s.free != 1 {
		t.Fatalf("lines %v, %d free", s.lines, s.free)
	}
}

// A spare slot goes at once to an owner holding none while another holds
// every slot, never to an owner that holds one; it comes back as spare.
func TestSpareSlotsForOwnersHoldingNone(t *testing.T) {
	t.Parallel()
	s := NewSlotsWithSpare(2, 1)
	ctx := context.Background()
	for range 2 {
		if err := s.Acquire(ctx, "a", nil); err != nil {
			t.Fatal(err)
		}
	}
	a3 := acquire(t, s, ctx, "a", nil)
	waits(t, a3, "a's third (a holds slots: no spare for it)")
	b1 := acquire(t, s, ctx, "b", nil)
	held(t, b1, "b's first, on the spare")
	b2 := acquire(t, s, ctx, "b", nil)
	c1 := acquire(t, s, ctx, "c", nil)
	waits(t, b2, "b's second (b holds the spare)")
	waits(t, c1, "c's first (the spare is taken)")

	s.Release("b") // the spare is free again: c holds none
	held(t, c1, "c's first, on the spare b gave back")
	waits(t, b2, "b's second")
	s.Release("a") // a holds 1, b 0, c 1 (spare): b's second
	held(t, b2, "b's second")
	waits(t, a3, "a's third")
	s.Release("c")
	s.Release("b")
	held(t, a3, "a's third")
	s.Release("a")
	s.Release("a")
	if len(s.lines) != 0 || s.free != 2 || s.spare != 1 {
		t.Errorf("after every release: lines %v, %d free, %d spare", s.lines, s.free, s.spare)
	}
}

// Without spares an owner arriving while another holds every slot waits
// for one to free: the case the spares are for.
func TestNoSpareTheNewcomerWaits(t *testing.T) {
	t.Parallel()
	s := NewSlots(1)
	if err := s.Acquire(context.Background(), "a", nil); err != nil {
		t.Fatal(err)
	}
	b := acquire(t, s, context.Background(), "b", nil)
	waits(t, b, "b")
	s.Release("a")
	held(t, b, "b")
	s.Release("b")
}

// An owner under its share takes a second spare while another owner holds
// every slot: it needs two at once and the other's long work would make
// the second wait for it to end. Past its share it waits like anyone.
func TestASpareForAnOwnerBelowItsShare(t *testing.T) {
	t.Parallel()
	s := NewSlotsWithSpare(4, 3)
	ctx := context.Background()
	for range 4 {
		if err := s.Acquire(ctx, "a", nil); err != nil {
			t.Fatal(err)
		}
	}
	a5 := acquire(t, s, ctx, "a", nil)
	waits(t, a5, "a's fifth (a holds every slot, over its share)")
	b1 := acquire(t, s, ctx, "b", nil)
	held(t, b1, "b's first, on a spare")
	b2 := acquire(t, s, ctx, "b", nil)
	held(t, b2, "b's second, on a spare (b holds 1 of its share of 2)")
	b3 := acquire(t, s, ctx, "b", nil)
	waits(t, b3, "b's third (b holds its share of 2)")
	waits(t, a5, "a's fifth")
	s.Release("b") // b holds 1: under its share again, b3 takes the spare
	held(t, b3, "b's third, on the spare b gave back")
	waits(t, a5, "a's fifth")
	for range 4 {
		s.Release("a")
	}
	held(t, a5, "a's fifth, on a slot a gave back")
	s.Release("a")
	s.Release("b")
	s.Release("b")
	if len(s.lines) != 0 || s.free != 4 || s.spare != 3 {
		t.Errorf("after every release: lines %v, %d free, %d spare", s.lines, s.free, s.spare)
	}
}
