// Package service is how the engine does background work: each piece
// (the dispatcher, the lease rescuer, the queue reaper, the roll keeper,
// the pruner, the sampler, the fallback clock) is a Service with an owner,
// started and stopped in order by a Supervisor. A periodic service is a
// Loop around its runOnce, which returns what the pass did so a test can
// drive one pass on a fake clock and assert it; the decision a pass makes
// is a pure function in the service's own package. The packages under
// runtime/engine/internal do not import the engine: each names the little
// it needs from it as an interface, so the compiler says who may touch what.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
)

// Service is one piece of background work.
type Service interface {
	// Name says which service it is, in logs and errors.
	Name() string
	// Start begins the work; it returns once the work runs.
	Start(ctx context.Context) error
	// Stop ends the work and returns once it has ended.
	Stop()
}

// Supervisor starts services in the order given and stops them in the
// reverse order, so a service may rely on those started before it.
type Supervisor struct {
	mu      sync.Mutex
	started []Service
}

// Start starts each service in turn. When one fails, those already
// started are stopped again and the error names the one that failed.
func (s *Supervisor) Start(ctx context.Context, services ...Service) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, svc := range services {
		if err := svc.Start(ctx); err != nil {
			s.stopLocked()
			return fmt.Errorf("starting %s: %w", svc.Name(), err)
		}
		s.started = append(s.started, svc)
	}
	return nil
}

// Stop stops every started service, the last started first.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Supervisor) stopLocked() {
	for i := len(s.started) - 1; i >= 0; i-- {
		s.started[i].Stop()
	}
	s.started = nil
}

// StopNamed stops the started service of that name and forgets it, so a
// test can drive that service's passes itself without its loop racing
// them. It reports whether one was started.
func (s *Supervisor) StopNamed(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, svc := range s.started {
		if svc.Name() == name {
			svc.Stop()
			s.started = append(s.started[:i:i], s.started[i+1:]...)
			return true
		}
	}
	return false
}

// Names lists the started services in start order.
func (s *Supervisor) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.started))
	for i, svc := range s.started {
		out[i] = svc.Name()
	}
	return out
}

// ErrStarted is Start called on a Loop that runs.
var ErrStarted = errors.New("service: already started")

// Loop runs a pass on its clock's ticker and at each wake-up, until Stop.
// The interval is read again after every pass, so a reload that changes it
// takes effect at the next pass.
type Loop struct {
	// ServiceName is what Name returns: a service embeds its Loop for
	// Name, Start and Stop.
	ServiceName string
	// Clock is the service's time (the engine's clock).
	Clock clock.Clock
	// Interval is the time between passes; Wake, if set, starts a pass
	// at once.
	Interval func() time.Duration
	Wake     <-chan struct{}
	// AlignAfter, when not 0, moves the passes to this long after each
	// whole multiple of the interval (a second's schedule ticks are due
	// on the second): without it the passes keep the phase of Start, and
	// a tick waits up to an interval longer for its pass.
	AlignAfter time.Duration
	// Pass is the service's runOnce with its result dropped (the result
	// is for tests, which call runOnce themselves).
	Pass func(ctx context.Context)

	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
}

// Name says which service it is.
func (l *Loop) Name() string { return l.ServiceName }

// Start begins the loop.
func (l *Loop) Start(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		return ErrStarted
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	// The ticker exists once Start returns: a test that moves a fake
	// clock after Start reaches every service.
	every := l.Interval()
	go l.run(l.stop, l.done, every, l.Clock.NewTicker(every))
	return nil
}

// Stop ends the loop after the pass in progress, if any.
func (l *Loop) Stop() {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
}

func (l *Loop) run(stop, done chan struct{}, every time.Duration, tick clock.Ticker) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	defer func() { tick.Stop() }()
	for {
		select {
		case <-stop:
			return
		case <-l.Wake:
		case <-tick.C():
		}
		started := l.Clock.Now()
		l.Pass(ctx)
		want := l.Interval()
		if l.AlignAfter != 0 {
			want = Realign(started, l.Clock.Now(), want, l.AlignAfter)
		}
		if want != every {
			tick.Stop()
			every, tick = want, l.Clock.NewTicker(want)
		}
	}
}

// Realign is the period of the ticker after a pass that started at
// started and ended at end, for passes that start after each whole
// multiple of every: every itself while the pass started within a
// twentieth of every of its place, else the time from end to the next
// such place, so that the following pass starts there (and the one after
// it goes back to every).
func Realign(started, end time.Time, every, after time.Duration) time.Duration {
	tol := every / 20
	off := started.Sub(started.Truncate(every).Add(after))
	if off < 0 {
		off += every
	}
	if off <= tol || off >= every-tol {
		return every
	}
	next := started.Add(every - off)
	for !next.After(end) {
		next = next.Add(every)
	}
	return next.Sub(end)
}

// Go is a service that is one goroutine (following a channel, say) until
// Stop.
type Go struct {
	// ServiceName is what Name returns.
	ServiceName string
	// Run does the work until stop is closed.
	Run func(stop <-chan struct{})

	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
}

// Name says which service it is.
func (g *Go) Name() string { return g.ServiceName }

// Start begins Run.
func (g *Go) Start(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stop != nil {
		return ErrStarted
	}
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) { defer close(done); g.Run(stop) }(g.stop, g.done)
	return nil
}

// Stop closes Run's stop channel and waits for Run to return.
func (g *Go) Stop() {
	g.mu.Lock()
	stop, done := g.stop, g.done
	g.stop, g.done = nil, nil
	g.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
}

// Stopping says a pass's context ended: the service is being stopped,
// and a store call it cut short is no failure to report.
func Stopping(ctx context.Context) bool { return ctx.Err() != nil }
