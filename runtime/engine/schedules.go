package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/tick"
	"github.com/weirhq/weir/runtime/engine/internal/schedules"
	ownerctx "github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/internal/requestid"
	"github.com/weirhq/weir/runtime/store"
)

// ScheduleInterval is the time between passes of the schedule service;
// ScheduleGrace how late a tick may fire and still count as on time
// (later, it was missed, and the schedule's catch-up policy decides).
const (
	ScheduleInterval = time.Second
	ScheduleGrace    = time.Minute
)

// scheduleHost is the engine's side of the schedule service
// (internal/schedules): the store's half, firing a tick through the
// admission every start passes, and whether a firing's run still runs.
type scheduleHost struct {
	schedules.Stored
	e *Engine
}

func newScheduleHost(e *Engine) scheduleHost {
	return scheduleHost{Stored: schedules.Stored{Store: e.st, HolderName: hostOf(e), Clock: e.clock}, e: e}
}

// Running says the run has not ended; a run no longer kept has.
func (h scheduleHost) Running(ctx context.Context, owner, runID string) (bool, error) {
	var run *store.Run
	err := h.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		run, err = tx.RunGet(runID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return run.Owner == owner && !run.Phase.Terminal(), nil
}

// Fire starts the run of s's tick as s's owner: a start like a client's,
// deduplicated on the tick's derived request id, so a tick fired again
// after a crash finds the run it started.
//
// A tick that can never start its run is skipped with the reason (an
// input function that fails, a flow gone or refusing the input); a
// refusal of admission is tried again at the next pass.
func (h scheduleHost) Fire(ctx context.Context, s *store.Schedule, t time.Time, requestID string) (string, error) {
	if s.InputFn != "" {
		if res, err := startedBefore(ctx, h.e, s.Owner, requestID); res != nil || err != nil {
			if err != nil {
				return "", err
			}
			return res.RunID, nil
		}
	}
	input, err := h.input(ctx, s, t)
	if err != nil {
		return "", err
	}
	res, err := h.e.Submit(ctx, StartRequest{Owner: s.Owner, Flow: s.Flow, Input: input, RequestID: requestID,
		startedBy: "schedule:" + s.Name})
	var ee *Error
	if errors.As(err, &ee) && slices.Contains(tickNeverStarts, ee.Code) {
		return "", &schedules.Skip{Reason: ee.Code + ": " + ee.Message}
	}
	if err != nil {
		return "", err
	}
	return res.RunID, nil
}

// tickNeverStarts are the refusals of a tick's start that firing it again
// cannot change.
var tickNeverStarts = []string{CodeUnknownFlow, CodeBadInput, CodeDedupConflict}

// input is the input of s's run for tick t: its constant input, or what
// its input function returns for {"time", "schedule"}, evaluated as s's
// owner (in the owner's share of the sandbox).
func (h scheduleHost) input(ctx context.Context, s *store.Schedule, t time.Time) (json.RawMessage, error) {
	if s.InputFn == "" {
		return s.Input, nil
	}
	loc := time.UTC
	if spec, err := tick.Parse(s.Cron, s.Every, s.Zone); err == nil {
		loc = spec.Location()
	}
	arg := map[string]any{"time": t.In(loc).Format(time.RFC3339), "schedule": s.Name}
	v, err := h.e.book.declCall(ctx, s.Owner, s.SourceHash, flows.CallableRef{Decl: flows.DeclSchedule + s.Name, Param: s.InputFn}, arg)
	var failed *declFailed
	switch {
	case errors.As(err, &failed):
		return nil, &schedules.Skip{Reason: "input: " + failed.Error()}
	case err != nil:
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &schedules.Skip{Reason: "input: " + err.Error()}
	}
	return b, nil
}

// declCall calls a declaration's callable — a schedule's input, a
// trigger's input or filter — with its one argument, as owner (in the
// owner's share of the sandbox), from the sources stored under
// sourceHash. A callable that fails or passes a script limit is a
// *declFailed, which calling again cannot change.
func (b *flowBook) declCall(ctx context.Context, owner, sourceHash string, ref flows.CallableRef, arg any) (any, error) {
	src := b.sources(sourceHash, func(err error) error { return fmt.Errorf("%s: source: %w", ref.Decl, err) })
	out, err := b.scripts.Call(ownerctx.WithOwner(ctx, owner), src, flows.Context{}, []flows.Call{{Ref: ref, Args: []any{arg}}})
	if err == nil && len(out) != 1 {
		err = fmt.Errorf("%s: %d results for one call", ref.Decl, len(out))
	}
	if err == nil {
		err = out[0].Err
	}
	var limit *flows.LimitError
	var call *flows.CallError
	switch {
	case errors.As(err, &limit), errors.As(err, &call):
		return nil, &declFailed{err}
	case err != nil:
		return nil, err
	}
	return out[0].Value, nil
}

// declFailed is a declaration's callable that failed.
type declFailed struct{ err error }

func (d *declFailed) Error() string { return d.err.Error() }
func (d *declFailed) Unwrap() error { return d.err }

func (h scheduleHost) Interval() time.Duration { return ScheduleInterval }
func (h scheduleHost) Grace() time.Duration    { return ScheduleGrace }

func (h scheduleHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }

// putDecls stores the schedules and triggers m declares as owner's, in
// one transaction after its flows: a schedule registered again keeps its
// firings, its pause and, when its ticks are the same, its next tick (so
// registering a file again neither fires nor skips a tick); otherwise its
// next tick is the first after now. A crash between the flows and the
// declarations leaves the flows registered: registering the file again
// stores the declarations.
func (r *registrar) putDecls(ctx context.Context, owner string, m *flows.Module) ([]RegisteredSchedule, []RegisteredTrigger, error) {
	if len(m.Schedules) == 0 && len(m.Triggers) == 0 {
		return nil, nil, nil
	}
	now := r.clock.Now()
	var scheduled []RegisteredSchedule
	var triggers []RegisteredTrigger
	err := r.st.Update(ctx, func(tx store.Tx) error {
		scheduled = scheduled[:0]
		for _, s := range m.Schedules {
			w, err := putSchedule(tx, owner, s, m.DeclSources(s.Decl()), now)
			if err != nil {
				return fmt.Errorf("storing schedule %s: %w", s.Name, err)
			}
			scheduled = append(scheduled, RegisteredSchedule{Name: w.Name, Flow: w.Flow, Next: w.Next, Paused: w.Paused})
		}
		var err error
		triggers, err = putTriggersTx(tx, owner, m, now)
		return err
	})
	if err != nil {
		return nil, nil, r.admission.storageFailed(err)
	}
	return scheduled, triggers, nil
}

func putSchedule(tx store.Tx, owner string, s *flows.Schedule, files []flows.File, now time.Time) (*store.Schedule, error) {
	spec, err := s.Spec()
	if err != nil {
		return nil, err // registration checked it
	}
	w := &store.Schedule{Owner: owner, Name: s.Name, Flow: s.Flow, Cron: s.Cron, Every: s.Every, Zone: s.Zone,
		Input: s.Input, Overlap: s.Overlap, CatchUp: s.CatchUp, MaxCatchUp: s.MaxCatchUp,
		Next: spec.Next(now), Source: s.Pos.String(), CreatedAt: now, UpdatedAt: now}
	if s.InputFn == nil && len(s.Input) == 0 {
		w.Input = json.RawMessage(`{}`)
	}
	if s.InputFn != nil {
		w.InputFn, w.SourceHash = s.InputFn.Param, s.SourceHash
		if err := putSource(tx, s.SourceHash, files); err != nil {
			return nil, err
		}
	}
	old, err := tx.ScheduleGet(owner, s.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		w.Firings, w.Paused, w.PausedBy, w.PauseReason = old.Firings, old.Paused, old.PausedBy, old.PauseReason
		w.Revision, w.CreatedAt = old.Revision+1, old.CreatedAt
		if old.Cron == w.Cron && old.Every == w.Every && old.Zone == w.Zone {
			w.Next = old.Next
		}
	}
	return w, tx.SchedulePut(w)
}

// ScheduleView is a schedule as its owner reads it: the record, the
// phases of its firings' runs (by run id; a run retention removed is
// absent) and, read one by one, its next ticks in its zone.
type ScheduleView struct {
	*store.Schedule
	Phases   map[string]store.Phase
	Upcoming []time.Time
}

// MaxUpcoming bounds the ticks a schedule's view lists.
const MaxUpcoming = 5

// Schedules lists owner's schedules, at most limit (0: all), each with
// the phase of its latest firing's run.
func (o *Ops) Schedules(ctx context.Context, owner string, limit int) ([]*ScheduleView, error) {
	var out []*ScheduleView
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		ss, err := tx.ScheduleList(store.ScheduleListParams{Owner: owner, Limit: limit})
		if err != nil {
			return err
		}
		for _, s := range ss {
			v := &ScheduleView{Schedule: s}
			if last := schedules.LastRun(s.Firings); last != "" {
				if v.Phases, err = runPhases(tx, owner, []string{last}); err != nil {
					return err
				}
			}
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	return out, nil
}

// runPhases reads the phases of owner's runs ids; a run not kept (or not
// owner's) is left out.
func runPhases(tx store.Tx, owner string, ids []string) (map[string]store.Phase, error) {
	out := map[string]store.Phase{}
	for _, id := range ids {
		run, err := tx.RunGet(id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		if run.Owner == owner {
			out[id] = run.Phase
		}
	}
	return out, nil
}

// Schedule reads owner's schedule name and its next MaxUpcoming ticks.
func (o *Ops) Schedule(ctx context.Context, owner, name string) (*ScheduleView, error) {
	s, err := o.schedule(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	v := &ScheduleView{Schedule: s}
	var ids []string
	for _, f := range s.Firings {
		if f.RunID != "" {
			ids = append(ids, f.RunID)
		}
	}
	if err := o.e.st.View(ctx, func(tx store.Tx) error {
		v.Phases, err = runPhases(tx, owner, ids)
		return err
	}); err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	if spec, err := tick.Parse(s.Cron, s.Every, s.Zone); err == nil {
		for t := s.Next; len(v.Upcoming) < MaxUpcoming && !t.IsZero(); t = spec.Next(t) {
			v.Upcoming = append(v.Upcoming, t.In(spec.Location()))
		}
	}
	return v, nil
}

func (o *Ops) schedule(ctx context.Context, owner, name string) (*store.Schedule, error) {
	if err := checkScheduleName(owner, name); err != nil {
		return nil, err
	}
	var s *store.Schedule
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		s, err = tx.ScheduleGet(owner, name)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, scheduleNotFound(name)
	case err != nil:
		return nil, o.e.admission.readFailed(err)
	}
	return s, nil
}

func checkScheduleName(owner, name string) error {
	if err := store.CheckSchedule(&store.Schedule{Owner: owner, Name: name}); err != nil {
		return protocolErr(CodeBadRequest, "%v", err)
	}
	return nil
}

func scheduleNotFound(name string) *Error {
	return protocolErr(CodeNotFound, "no schedule %q (weir schedule ls lists yours)", name)
}

// SchedulePauseParams pause or resume one of owner's schedules.
type SchedulePauseParams struct {
	Owner, Name string
	// Pause stops the schedule's firing; false resumes it (the ticks
	// missed meanwhile are its catch-up policy's).
	Pause  bool
	Reason string
}

// SchedulePause pauses or resumes a schedule; doing what is already done
// changes nothing. Pausing is stored, so it survives restarts.
func (o *Ops) SchedulePause(ctx context.Context, p SchedulePauseParams) (*store.Schedule, error) {
	if err := checkScheduleName(p.Owner, p.Name); err != nil {
		return nil, err
	}
	if err := CheckPrintable("reason", p.Reason, MaxReasonBytes); err != nil {
		return nil, err
	}
	var out *store.Schedule
	err := o.e.st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.ScheduleGet(p.Owner, p.Name)
		if err != nil {
			return err
		}
		out = s
		if s.Paused == p.Pause {
			return nil
		}
		now := o.e.clock.Now()
		w := *s
		w.Paused, w.PausedBy, w.PauseReason = p.Pause, "", ""
		if p.Pause {
			w.PausedBy, w.PauseReason = p.Owner, p.Reason
		} else {
			resumeNext(&w, now)
		}
		w.Revision++
		w.UpdatedAt = now
		out = &w
		return tx.SchedulePut(&w)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, scheduleNotFound(p.Name)
	case err != nil:
		return nil, storageErr(err)
	}
	return out, nil
}

// resumeNext moves a resumed schedule's next tick past the ticks its
// pause held back when its catch-up policy fires none of them: a pause
// is a deliberate stop, and without this the ticks of its last minute
// (within ScheduleGrace) would all fire at once on resume.
func resumeNext(s *store.Schedule, now time.Time) {
	if s.CatchUp != "" && s.CatchUp != string(tick.CatchUpNone) || s.Next.After(now) {
		return
	}
	spec, err := tick.Parse(s.Cron, s.Every, s.Zone)
	if err != nil {
		return // the service logs a record that no longer parses
	}
	s.Firings = schedules.AppendFiring(s.Firings, store.ScheduleFiring{Tick: s.Next, Skipped: schedules.SkippedPaused + " (the ticks from here until the resume)", At: now})
	s.Next = spec.Next(now)
}

// ScheduleRemove removes one of owner's schedules; runs it started are
// not touched.
func (o *Ops) ScheduleRemove(ctx context.Context, owner, name string) error {
	if err := checkScheduleName(owner, name); err != nil {
		return err
	}
	err := o.e.st.Update(ctx, func(tx store.Tx) error { return tx.ScheduleDelete(owner, name) })
	switch {
	case errors.Is(err, store.ErrNotFound):
		return scheduleNotFound(name)
	case err != nil:
		return storageErr(err)
	}
	return nil
}

// ScheduleTrigger fires owner's schedule now, outside its ticks and
// whether or not it is paused, with the schedule's input (an input
// function's for the time now). A request id
// makes it once per id (a client's retry finds the run it started);
// without one, every call starts a run.
func (o *Ops) ScheduleTrigger(ctx context.Context, owner, name, requestID string) (*StartResult, error) {
	if err := CheckRequestID(requestID); err != nil {
		return nil, err
	}
	s, err := o.schedule(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	if requestID == "" {
		requestID = newID("trigger")
	}
	requestID = requestid.Derive("schedule:", name, "trigger", requestID)
	if s.InputFn != "" {
		// The function's answer changes with the time: a retry is
		// answered by the run its request id started, not compared.
		if res, err := startedBefore(ctx, o.e, owner, requestID); res != nil || err != nil {
			return res, err
		}
	}
	// An input function is called as at a tick, with the trigger's time.
	input, err := newScheduleHost(o.e).input(ctx, s, o.e.clock.Now())
	var skip *schedules.Skip
	if errors.As(err, &skip) {
		return nil, protocolErr(CodeBadInput, "schedule %s: %s", name, skip.Reason)
	}
	if err != nil {
		return nil, err
	}
	return o.e.Submit(ctx, StartRequest{Owner: owner, Flow: s.Flow, Input: input,
		RequestID: requestID, startedBy: "schedule:" + name})
}

// startedBefore is the run a derived request id of owner's started, or
// nil when it started none yet: a schedule's tick or trigger sent again is
// answered by its run, never compared with what its input function
// answers now.
func startedBefore(ctx context.Context, e *Engine, owner, requestID string) (*StartResult, error) {
	var d *store.Dedup
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		d, err = tx.DedupGet(owner, requestID)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, e.admission.readFailed(err)
	}
	return &StartResult{RunID: d.RunID, Existing: true}, nil
}
