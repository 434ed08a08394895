// Package traceexport is the trace-export service: it exports each
// finished run's trace once (runtime/telemetry). The terminal transaction
// of a run appends an entry naming the run to the trace outbox, a pseudo
// run's timeline, when tracing is on; each pass reads the oldest entries,
// builds each run's spans from its timeline (telemetry.Build, a pure
// function), hands them to the exporter in groups its queue holds and,
// once a group has reached the collector, removes its entries. The
// outbox is the durable mark: a kill before the export leaves the entry
// for the next daemon, a kill after the export and before the removal
// exports the run again with the same span ids. A run that cannot be
// traced (pruned, too long a timeline, a journal Build refuses) is
// logged and its entry removed: one bad run never stops the others.
package traceexport

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/telemetry"
)

// Bounds of a pass.
const (
	// Interval is the time between passes; after a failed export the
	// next waits twice as long as the last, up to MaxBackoff, so a
	// collector that is down is not asked (and logged) every pass.
	Interval   = 2 * time.Second
	MaxBackoff = time.Minute
	// Batch is how many outbox entries one page of a pass reads.
	Batch = 256
	// MaxPages bounds the pages a pass reads back to back: it reads the
	// next while the last was full and exported (runs finish faster than
	// a page an Interval), so the export keeps up with MaxPages × Batch
	// runs an Interval (2,048 a second) before the outbox grows.
	MaxPages = 16
	// MaxEvents bounds the timeline read for one run: a longer one is
	// skipped (logged), as a trace of it would be cut anyway.
	MaxEvents = 50_000
)

// Exporter is what the service hands spans to (telemetry.Exporter).
type Exporter interface {
	Sampled(trace.TraceID) bool
	QueueSize() int
	Export(ctx context.Context, spans []telemetry.Span) error
}

// Engine is what the service needs from the engine.
type Engine interface {
	// Holder names this daemon in the service lease.
	Holder() string
	Info(msg string, args ...any)
	Error(msg string, args ...any)
}

// LeaseName is the service lease a pass holds (store.ServiceLease), so
// that in a fleet one daemon at a time exports the outbox; LeaseTTL is
// how long it lasts unrenewed. Should two daemons still export a run
// (a lease that changed hands mid-pass), they send the same ids, and
// the removal under the old fence is refused.
const (
	LeaseName = "traceexport"
	LeaseTTL  = 2 * MaxBackoff // past a pass's slowest export (the SDK retries for up to a minute)
)

// Result is what one pass did (nothing while another daemon holds the
// service lease).
type Result struct {
	// Runs were exported; Unsampled were left out by the sample; Skipped
	// could not be traced; Spans is how many spans were exported.
	Runs, Unsampled, Skipped, Spans int
	// Err is the export that failed, if one did: its runs stay in the
	// outbox for the next pass.
	Err error
}

// Service is the trace-export service.
type Service struct {
	eng    Engine
	st     store.Store
	exp    Exporter
	outbox string
	clk    clock.Clock
	// fence is the service lease's, taken by this pass.
	fence uint64
	// every is the time to the next pass (Interval, or longer after
	// failures).
	every atomic.Int64
	*service.Loop
}

// New returns the service reading the outbox stream of st.
func New(eng Engine, st store.Store, clk clock.Clock, exp Exporter, outbox string) *Service {
	s := &Service{eng: eng, st: st, exp: exp, outbox: outbox, clk: clk}
	s.every.Store(int64(Interval))
	s.Loop = &service.Loop{ServiceName: "traceexport", Clock: clk, Interval: s.Interval,
		Pass: func(ctx context.Context) {
			if r := s.runOnce(ctx); r.Err != nil && !service.Stopping(ctx) {
				s.eng.Error("exporting traces", "error", r.Err, "exported", r.Runs)
			}
		}}
	return s
}

// RunOnce is one pass, for tests.
func (s *Service) RunOnce(ctx context.Context) Result { return s.runOnce(ctx) }

// Interval is the time to the next pass.
func (s *Service) Interval() time.Duration { return time.Duration(s.every.Load()) }

// Backoff is the time to the next pass after one whose result was r.
func Backoff(last time.Duration, r Result) time.Duration {
	if r.Err == nil {
		return Interval
	}
	return min(max(2*last, Interval), MaxBackoff)
}

// group is spans of several runs exported together, and the last outbox
// entry they cover.
type group struct {
	spans   []telemetry.Span
	runs    int
	lastSeq uint64
}

func (s *Service) runOnce(ctx context.Context) Result {
	var res Result
	for pages := 1; ; pages++ {
		r, full := s.page(ctx)
		res = res.plus(r)
		if !Again(r, full, pages) || service.Stopping(ctx) {
			break
		}
	}
	s.every.Store(int64(Backoff(s.Interval(), res)))
	return res
}

// Again decides whether a pass reads another page after one whose
// result was r: only if that page was full (the outbox may hold more), it
// failed nothing, and the pass has read fewer than MaxPages.
func Again(r Result, full bool, pages int) bool {
	return full && r.Err == nil && pages < MaxPages
}

// plus is what two pages did together; the error is the later's.
func (r Result) plus(o Result) Result {
	r.Runs, r.Unsampled, r.Skipped, r.Spans = r.Runs+o.Runs, r.Unsampled+o.Unsampled, r.Skipped+o.Skipped, r.Spans+o.Spans
	if o.Err != nil {
		r.Err = o.Err
	}
	return r
}

// page exports up to Batch outbox entries; full says it read Batch.
func (s *Service) page(ctx context.Context) (res Result, full bool) {
	var entries []*store.Event
	if err := s.st.Update(ctx, func(tx store.Tx) error {
		l, took, err := store.TakeServiceLease(tx, LeaseName, s.eng.Holder(), s.clk.Now(), LeaseTTL)
		if err != nil || !took {
			entries = nil
			return err // another daemon exports
		}
		s.fence = l.Fence
		entries, err = tx.EventList(store.EventListParams{RunID: s.outbox, Limit: Batch})
		return err
	}); err != nil {
		res.Err = err
		return res, false
	}
	full = len(entries) == Batch
	var g group
	for _, entry := range entries {
		spans, why := s.spansOf(ctx, entry)
		var se storeError
		if errors.As(why, &se) {
			// The store, not the run: keep the entry for the next pass.
			s.flush(ctx, &g, &res)
			res.Err = se.err
			return res, full
		}
		switch {
		case why == errUnsampled:
			res.Unsampled++
		case why != nil:
			res.Skipped++
			s.eng.Error("a run's trace is not exported", "run", entry.Detail["run"], "error", why)
		case len(g.spans)+len(spans) > s.exp.QueueSize():
			if !s.flush(ctx, &g, &res) {
				return res, full
			}
		}
		if why == nil {
			g.spans = append(g.spans, spans...)
			g.runs++
		}
		g.lastSeq = entry.Seq
	}
	s.flush(ctx, &g, &res)
	return res, full
}

var errUnsampled = errors.New("traceexport: not sampled")

// storeError is a read of the store that failed: the run is not at fault.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }

// spansOf builds the spans of the run an outbox entry names.
func (s *Service) spansOf(ctx context.Context, entry *store.Event) ([]telemetry.Span, error) {
	runID, _ := entry.Detail["run"].(string)
	if runID == "" {
		return nil, errors.New("the outbox entry names no run")
	}
	var evs []*store.Event
	unsampled := false
	if err := s.st.View(ctx, func(tx store.Tx) error {
		// The acceptance first: it gives the trace id, and a run the
		// sample leaves out is not read any further nor built.
		first, err := tx.EventList(store.EventListParams{RunID: runID, Limit: 1})
		if err != nil || len(first) == 0 {
			return err
		}
		if first[0].Type == telemetry.EvAccepted && !s.exp.Sampled(telemetry.RunTrace(first[0])) {
			unsampled = true
			return nil
		}
		evs, err = tx.EventList(store.EventListParams{RunID: runID, Limit: MaxEvents + 1})
		return err
	}); err != nil {
		return nil, storeError{err}
	}
	if unsampled {
		return nil, errUnsampled
	}
	switch {
	case len(evs) == 0:
		return nil, errors.New("the run's timeline is gone (pruned)")
	case len(evs) > MaxEvents:
		return nil, errors.New("the run's timeline is longer than the export reads")
	}
	spans, err := telemetry.Build(evs)
	if err != nil {
		return nil, err
	}
	if cc, ok := s.exp.(contentCapturer); ok && cc.CapturesContent() {
		if err := s.addContent(ctx, runID, spans); err != nil {
			return nil, storeError{err}
		}
	}
	return spans, nil
}

// contentCapturer is an Exporter that exports model turns' messages
// (telemetry.Exporter).
type contentCapturer interface{ CapturesContent() bool }

// addContent reads the journaled turns of each agent visit the spans
// hold a model turn of and puts their messages on those spans
// (telemetry.AddContent).
func (s *Service) addContent(ctx context.Context, runID string, spans []telemetry.Span) error {
	type visit struct {
		node string
		n    int
	}
	seen := map[visit]bool{}
	var turns []*store.AgentTurn
	return s.st.View(ctx, func(tx store.Tx) error {
		for _, sp := range spans {
			v := visit{sp.Key.Node, sp.Key.Visit}
			if !strings.HasPrefix(sp.Key.Call, "turn:") || seen[v] {
				continue
			}
			seen[v] = true
			ts, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: runID, Node: v.node, Visit: v.n})
			if err != nil {
				return err
			}
			turns = append(turns, ts...)
		}
		telemetry.AddContent(spans, turns)
		return nil
	})
}

// flush exports g and removes the entries it covers; it reports whether
// the pass may go on.
func (s *Service) flush(ctx context.Context, g *group, res *Result) bool {
	if g.lastSeq == 0 {
		return true
	}
	if len(g.spans) > 0 {
		if err := s.exp.Export(ctx, g.spans); err != nil {
			res.Err = err
			return false
		}
	}
	if err := s.st.Update(ctx, func(tx store.Tx) error {
		if err := store.CheckServiceLease(tx, LeaseName, s.eng.Holder(), s.fence, s.clk.Now()); err != nil {
			return err
		}
		return tx.EventDeleteBefore(s.outbox, g.lastSeq+1)
	}); err != nil {
		res.Err = err
		return false
	}
	res.Runs += g.runs
	res.Spans += len(g.spans)
	*g = group{}
	return true
}
