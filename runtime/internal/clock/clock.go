// Package clock is the engine's one source of time. Everything that reads
// the clock or waits on it (the scheduler's tick, lease deadlines and
// renewal, retry backoff, queue deadlines, waits and timeouts, a cohort's
// deadline fuse and grace period) goes through a Clock, so a test can put
// a Fake in its place and move time forward itself instead of waiting for
// wall time to pass.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes tickers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTicker returns a ticker that fires every d (d > 0), dropping
	// ticks a slow reader misses, as time.Ticker does.
	NewTicker(d time.Duration) Ticker
}

// Ticker delivers ticks until stopped.
type Ticker interface {
	// C is the channel the ticks arrive on.
	C() <-chan time.Time
	// Stop turns the ticker off; no tick arrives after Stop returns.
	Stop()
}

// Real is the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Fake is a clock that moves only when a test says so. Its tickers fire
// during Advance, in time order, each at most once per Advance call for
// every period that passed (a tick the reader has not taken yet is
// dropped, as with a real ticker). It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTicker returns a ticker that fires as Advance passes each period.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker period")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTicker{f: f, every: d, next: f.now.Add(d), c: make(chan time.Time, 1)}
	f.tickers = append(f.tickers, t)
	return t
}

// Tickers reports how many tickers are running: a test waits for the
// component under test to have started its ticker before advancing.
func (f *Fake) Tickers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tickers)
}

// Advance moves the clock forward by d and fires the tickers whose
// period ended meanwhile.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Advance backwards")
	}
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	due := make([]*fakeTicker, 0, len(f.tickers))
	for _, t := range f.tickers {
		if !t.next.After(now) {
			due = append(due, t)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].next.Before(due[j].next) })
	for _, t := range due {
		for !t.next.After(now) {
			t.next = t.next.Add(t.every)
		}
		select {
		case t.c <- now:
		default: // the reader has not taken the last tick: dropped
		}
	}
	f.mu.Unlock()
}

type fakeTicker struct {
	f     *Fake
	every time.Duration
	next  time.Time
	c     chan time.Time
}

func (t *fakeTicker) C() <-chan time.Time { return t.c }

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, x := range t.f.tickers {
		if x == t {
			t.f.tickers = append(t.f.tickers[:i], t.f.tickers[i+1:]...)
			return
		}
	}
}
