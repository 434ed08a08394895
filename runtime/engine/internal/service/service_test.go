package service

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
)

type recorder struct {
	name string
	log  *[]string
	fail error
}

func (r recorder) Name() string { return r.name }
func (r recorder) Start(context.Context) error {
	if r.fail != nil {
		return r.fail
	}
	*r.log = append(*r.log, "start "+r.name)
	return nil
}
func (r recorder) Stop() { *r.log = append(*r.log, "stop "+r.name) }

func TestSupervisorStopsInReverseOrder(t *testing.T) {
	t.Parallel()
	var log []string
	var s Supervisor
	if err := s.Start(context.Background(), recorder{"a", &log, nil}, recorder{"b", &log, nil}); err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("started %v", got)
	}
	s.Stop()
	if want := []string{"start a", "start b", "stop b", "stop a"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("order %v, want %v", log, want)
	}
}

func TestSupervisorUndoesAFailedStart(t *testing.T) {
	t.Parallel()
	var log []string
	var s Supervisor
	err := s.Start(context.Background(), recorder{"a", &log, nil}, recorder{"b", &log, errors.New("no port")}, recorder{"c", &log, nil})
	if err == nil || err.Error() != "starting b: no port" {
		t.Fatalf("error %v, want the failed service named", err)
	}
	if want := []string{"start a", "stop a"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("order %v, want %v: c never starts, a is stopped again", log, want)
	}
	if len(s.Names()) != 0 {
		t.Fatalf("still started: %v", s.Names())
	}
}

func TestLoopPassesOnTickAndWakeUntilStopped(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	wake := make(chan struct{})
	passed := make(chan struct{})
	var interval atomic.Int64
	interval.Store(int64(time.Second))
	l := &Loop{Clock: clk, Interval: func() time.Duration { return time.Duration(interval.Load()) }, Wake: wake,
		Pass: func(context.Context) { passed <- struct{}{} }}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	if clk.Tickers() != 1 {
		t.Fatalf("%d tickers once Start returned, want 1", clk.Tickers())
	}
	clk.Advance(time.Second)
	<-passed
	wake <- struct{}{}
	<-passed
	l.Stop()
	if clk.Tickers() != 0 {
		t.Fatalf("%d tickers after Stop, want 0", clk.Tickers())
	}
	l.Stop() // a second Stop is harmless
}

// StopNamed stops one service and forgets it: the supervisor's Stop does
// not stop it a second time, and a name it never started is reported.
func TestSupervisorStopsOneByName(t *testing.T) {
	t.Parallel()
	var log []string
	var s Supervisor
	if err := s.Start(context.Background(), recorder{"a", &log, nil}, recorder{"b", &log, nil}, recorder{"c", &log, nil}); err != nil {
		t.Fatal(err)
	}
	if !s.StopNamed("b") || s.StopNamed("b") || s.StopNamed("z") {
		t.Fatal("StopNamed reports a service that is not started")
	}
	s.Stop()
	if want := []string{"start a", "start b", "start c", "stop b", "stop c", "stop a"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("order %v, want %v", log, want)
	}
}

func TestRealignMovesPassesToJustAfterTheSecond(t *testing.T) {
	t.Parallel()
	sec := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	const after = 5 * time.Millisecond
	for _, c := range []struct {
		name         string
		started, end time.Duration // after sec
		want         time.Duration
	}{
		{"in place", 5 * time.Millisecond, 300 * time.Millisecond, time.Second},
		{"a little late, within a twentieth", 40 * time.Millisecond, 300 * time.Millisecond, time.Second},
		{"a little early", 990 * time.Millisecond, 1200 * time.Millisecond, time.Second},
		{"out of phase: to the next place", 600 * time.Millisecond, 800 * time.Millisecond, 205 * time.Millisecond},
		{"a pass past the next place: the one after", 600 * time.Millisecond, 1100 * time.Millisecond, 905 * time.Millisecond},
	} {
		got := Realign(sec.Add(c.started), sec.Add(c.end), time.Second, after)
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
