// Package schedules is the schedule service: each pass it fires the ticks
// of the schedules that are due, as accepted runs, and stores each
// schedule's next tick. A firing's run has a request id derived from the
// schedule and the tick (RequestID), so a pass that fired and then died
// before it stored the next tick fires the same tick again on the next
// pass and finds the run it started, never a second one; in a fleet one
// daemon at a time holds the service lease (store.ServiceLease) and every
// save carries its fence. What a pass does to one schedule is Plan, a pure
// function over package tick's Due and the overlap policy.
package schedules

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/tick"
	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/internal/requestid"
	"github.com/weirhq/weir/runtime/store"
)

// LeaseName is the service lease the schedule service holds.
const LeaseName = "schedules"

// Batch bounds the schedules one pass reads.
const Batch = 256

// AlignAfter places the passes just after each whole interval (a whole
// second), where ticks are due: a tick waits for its pass only as long as
// the pass takes to reach it, not up to a second more by the phase of the
// daemon's start.
const AlignAfter = 5 * time.Millisecond

// The overlap policies (flows.Schedule.Overlap): what a tick does while
// the run of the schedule's previous firing has not ended.
const (
	OverlapSkip  = flows.OverlapSkip  // the tick is skipped
	OverlapQueue = flows.OverlapQueue // the tick waits (Next stays) until that run ends
	OverlapAllow = flows.OverlapAllow // the tick fires
)

// Skip reasons recorded on a schedule's firings.
const (
	SkippedOverlap = "overlap"  // the previous firing's run had not ended
	SkippedMissed  = "catch_up" // missed while away; the catch-up policy skipped it
	SkippedPaused  = "paused"   // held back by a pause; catch_up none fires none on resume
)

// RequestID is the request id of the run a schedule's tick starts
// (DESIGN §12): the schedule's name and the tick as its zone reads it.
func RequestID(name string, t time.Time, loc *time.Location) string {
	return requestid.Derive("schedule:", name, t.In(loc).Format(time.RFC3339))
}

// Decision is what a pass does to one schedule.
type Decision struct {
	// Fire are the ticks to fire, oldest first.
	Fire []time.Time
	// Skipped counts the ticks skipped, by reason.
	Skipped map[string]int
	// Next is the next tick to store.
	Next time.Time
}

// Plan decides a pass over schedule s at now: the due ticks (tick.Due with
// the schedule's catch-up policy, on-time within grace), then the overlap
// policy when previousRunning says its last firing's run has not ended.
func Plan(s *store.Schedule, spec *tick.Spec, now time.Time, grace time.Duration, previousRunning bool) Decision {
	d := tick.Due(spec, tick.Pass{Next: s.Next, Now: now, Grace: grace, CatchUp: tick.CatchUp(s.CatchUp), MaxCatchUp: s.MaxCatchUp})
	out := Decision{Fire: d.Fire, Next: d.Next, Skipped: map[string]int{}}
	if d.Skipped > 0 {
		out.Skipped[SkippedMissed] = d.Skipped
	}
	if len(out.Fire) == 0 || !previousRunning {
		return out
	}
	switch s.Overlap {
	case OverlapAllow:
	case OverlapQueue:
		// The oldest tick waits for the run to end; nothing else fires
		// meanwhile, and the ticks after it are the catch-up policy's
		// once it does.
		return Decision{Next: out.Fire[0], Skipped: out.Skipped}
	default:
		out.Skipped[SkippedOverlap] += len(out.Fire)
		out.Fire = nil
	}
	return out
}

// Skip is a Fire error that skips the tick, recorded with its reason,
// instead of trying it again at the next pass: the tick can never start
// its run (its input failed to evaluate, its flow refuses that input).
type Skip struct{ Reason string }

func (s *Skip) Error() string { return s.Reason }

// Engine is what the service needs from the engine.
type Engine interface {
	// Holder names this daemon in the service lease.
	Holder() string
	// TakeLease takes or renews the service lease for ttl; ok false while
	// another daemon holds it.
	TakeLease(ctx context.Context, ttl time.Duration) (fence uint64, ok bool, err error)
	// Due lists up to limit schedules due at now.
	Due(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, error)
	// Running says the run runID of owner has not ended ("" or a run no
	// longer kept: false).
	Running(ctx context.Context, owner, runID string) (bool, error)
	// Fire starts the run of s's tick t with request id RequestID, as
	// s's owner, through admission; a refusal is an error, and the tick
	// is tried again at the next pass, unless it is a *Skip.
	Fire(ctx context.Context, s *store.Schedule, t time.Time, requestID string) (runID string, err error)
	// Save stores next (s's new Next and firings) under the lease's
	// fence, unless the stored schedule is no longer at next's Revision
	// (registered again, paused or resumed meanwhile: nothing is written,
	// and saved is false).
	Save(ctx context.Context, next *store.Schedule, fence uint64) (saved bool, err error)
	// Interval is the time between passes; Grace how late a tick may
	// fire and still be on time.
	Interval() time.Duration
	Grace() time.Duration
	// Error logs a failure.
	Error(msg string, args ...any)
}

// Result is what one pass did.
type Result struct {
	// Held says this daemon held the service lease for the pass.
	Held    bool
	Due     int
	Fired   []store.ScheduleFiring
	Skipped int
	// Refused counts ticks admission refused, to be fired again.
	Refused int
	Failed  int
}

// Service is the schedule service.
type Service struct {
	eng   Engine
	clock clock.Clock
	*service.Loop
}

// New returns the service over eng on clk.
func New(eng Engine, clk clock.Clock) *Service {
	s := &Service{eng: eng, clock: clk}
	s.Loop = &service.Loop{ServiceName: "schedules", Clock: clk, Interval: eng.Interval, AlignAfter: AlignAfter,
		Pass: func(ctx context.Context) { s.runOnce(ctx) }}
	return s
}

// RunOnce is one pass, for tests.
func (s *Service) RunOnce(ctx context.Context) Result { return s.runOnce(ctx) }

// leaseTTL is how long a pass's holding lasts: a few passes, so a daemon
// that stops renewing it gives the schedules up within seconds.
func (s *Service) leaseTTL() time.Duration { return 3*s.eng.Interval() + time.Second }

func (s *Service) runOnce(ctx context.Context) Result {
	var res Result
	fence, ok, err := s.eng.TakeLease(ctx, s.leaseTTL())
	if err != nil {
		if !service.Stopping(ctx) {
			s.eng.Error("taking the schedules lease", "error", err)
		}
		return res
	}
	if !ok {
		return res
	}
	res.Held = true
	now := s.clock.Now()
	due, err := s.eng.Due(ctx, now, Batch)
	if err != nil {
		if !service.Stopping(ctx) {
			s.eng.Error("listing due schedules", "error", err)
		}
		return res
	}
	res.Due = len(due)
	for _, sc := range due {
		s.pass(ctx, sc, now, fence, &res)
	}
	return res
}

// pass fires what Plan decides for one schedule and saves its next tick.
func (s *Service) pass(ctx context.Context, sc *store.Schedule, now time.Time, fence uint64, res *Result) {
	spec, err := tick.Parse(sc.Cron, sc.Every, sc.Zone)
	if err != nil {
		// Registration checked it; a record that no longer parses (a
		// zone gone from the system's database) is logged, not fired.
		res.Failed++
		s.eng.Error("a stored schedule does not parse", "owner", sc.Owner, "schedule", sc.Name, "error", err)
		return
	}
	running := false
	if last := LastRun(sc.Firings); last != "" && sc.Overlap != OverlapAllow {
		if running, err = s.eng.Running(ctx, sc.Owner, last); err != nil {
			res.Failed++
			if !service.Stopping(ctx) {
				s.eng.Error("reading a schedule's last run", "owner", sc.Owner, "schedule", sc.Name, "error", err)
			}
			return
		}
	}
	d := Plan(sc, spec, now, s.eng.Grace(), running)
	was := sc.Next
	next := *sc
	next.Next = d.Next
	for reason, n := range d.Skipped {
		res.Skipped += n
		next.Firings = AppendFiring(next.Firings, store.ScheduleFiring{Tick: was, Skipped: fmt.Sprintf("%s (%d ticks)", reason, n), At: now})
	}
	for _, t := range d.Fire {
		failpoint.Hit(failpoint.ScheduleDecided)
		runID, err := s.eng.Fire(ctx, sc, t, RequestID(sc.Name, t, spec.Location()))
		var skip *Skip
		if errors.As(err, &skip) {
			res.Skipped++
			next.Firings = AppendFiring(next.Firings, store.ScheduleFiring{Tick: t, Skipped: skip.Reason, At: now})
			continue
		}
		if err != nil {
			// Refused at admission (or the store failed): this tick and
			// the ones after it are tried again at the next pass.
			res.Refused++
			next.Next = t
			if !service.Stopping(ctx) {
				s.eng.Error("a schedule's tick was not fired", "owner", sc.Owner, "schedule", sc.Name, "tick", t, "error", err)
			}
			break
		}
		failpoint.Hit(failpoint.ScheduleFired)
		f := store.ScheduleFiring{Tick: t, RunID: runID, At: now}
		res.Fired = append(res.Fired, f)
		next.Firings = AppendFiring(next.Firings, f)
	}
	next.UpdatedAt = now
	if _, err := s.eng.Save(ctx, &next, fence); err != nil {
		res.Failed++
		if !service.Stopping(ctx) {
			s.eng.Error("saving a schedule's next tick", "owner", sc.Owner, "schedule", sc.Name, "error", err)
		}
	}
}

// LastRun is the run of the latest firing that started one ("": none).
func LastRun(fs []store.ScheduleFiring) string {
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].RunID != "" {
			return fs[i].RunID
		}
	}
	return ""
}

// AppendFiring appends f and keeps the latest store.MaxFirings firings.
func AppendFiring(fs []store.ScheduleFiring, f store.ScheduleFiring) []store.ScheduleFiring {
	fs = append(append([]store.ScheduleFiring(nil), fs...), f)
	if n := len(fs); n > store.MaxFirings {
		fs = fs[n-store.MaxFirings:]
	}
	return fs
}

// Stored is the store's half of Engine, the same for every engine: the
// service lease, the due listing and the fenced save. The engine's host
// embeds it and adds Fire, Running and the figures.
type Stored struct {
	Store      store.Store
	HolderName string
	Clock      clock.Clock
}

// Holder names this daemon in the service lease.
func (st Stored) Holder() string { return st.HolderName }

// TakeLease takes or renews the schedules lease.
func (st Stored) TakeLease(ctx context.Context, ttl time.Duration) (fence uint64, ok bool, err error) {
	err = st.Store.Update(ctx, func(tx store.Tx) error {
		l, took, err := store.TakeServiceLease(tx, LeaseName, st.HolderName, st.Clock.Now(), ttl)
		if err != nil {
			return err
		}
		fence, ok = l.Fence, took
		return nil
	})
	return fence, ok, err
}

// Due lists the schedules due at now.
func (st Stored) Due(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, error) {
	var out []*store.Schedule
	err := st.Store.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.ScheduleListDue(now, limit)
		return err
	})
	return out, err
}

// Save writes next under the lease's fence if the stored schedule is at
// next's Revision (the one the pass read), and moves the revision on.
func (st Stored) Save(ctx context.Context, next *store.Schedule, fence uint64) (saved bool, err error) {
	err = st.Store.Update(ctx, func(tx store.Tx) error {
		saved = false
		if err := store.CheckServiceLease(tx, LeaseName, st.HolderName, fence, st.Clock.Now()); err != nil {
			return err
		}
		cur, err := tx.ScheduleGet(next.Owner, next.Name)
		if errors.Is(err, store.ErrNotFound) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		if cur.Revision != next.Revision || cur.Paused {
			return nil
		}
		w := *next
		w.Revision++
		saved = true
		return tx.SchedulePut(&w)
	})
	return saved, err
}
