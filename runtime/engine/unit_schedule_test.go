package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine/internal/schedules"
	"github.com/weirhq/weir/runtime/store"
)

// putSchedule stores a schedule of alice's the way registration does.
func (b *testBundle) putSchedule(t *testing.T, s store.Schedule) {
	t.Helper()
	if s.Owner == "" {
		s.Owner = "alice"
	}
	if s.Overlap == "" {
		s.Overlap, s.CatchUp = schedules.OverlapAllow, "none"
	}
	s.CreatedAt, s.UpdatedAt = b.clock.Now(), b.clock.Now()
	if err := b.st.Update(context.Background(), func(tx store.Tx) error { return tx.SchedulePut(&s) }); err != nil {
		t.Fatal(err)
	}
}

// scheduler stops the engine's own schedules loop and returns a service
// whose passes the test drives: the loop, on the same fake clock, would
// otherwise fire the ticks a test's Advance makes due before its pass.
func (b *testBundle) scheduler(t testing.TB) *schedules.Service {
	t.Helper()
	if !b.eng.services.StopNamed("schedules") {
		t.Fatal("the engine runs no schedules service")
	}
	return schedules.New(newScheduleHost(b.eng), b.clock)
}

func (b *testBundle) scheduleRecord(t testing.TB, owner, name string) *store.Schedule {
	t.Helper()
	var s *store.Schedule
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		s, err = tx.ScheduleGet(owner, name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// A schedule's ticks each start one run, owned by the schedule's owner,
// with the tick's derived request id and the schedule as what started it.
func TestUnitScheduleFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	first := unitEpoch.Add(time.Second)
	b.putSchedule(t, store.Schedule{Name: "tick", Flow: "chain", Every: time.Second, Input: json.RawMessage(`{"n":1}`), Next: first})
	testutil.Eventually(t, waitTimeout, func() error {
		if n := len(b.scheduleRecord(t, "alice", "tick").Firings); n < 3 {
			b.clock.Advance(time.Second)
			return fmt.Errorf("%d firings", n)
		}
		return nil
	})
	s := b.scheduleRecord(t, "alice", "tick")
	runs := map[string]bool{}
	for i, f := range s.Firings {
		if want := first.Add(time.Duration(i) * time.Second); !f.Tick.Equal(want) || f.RunID == "" || runs[f.RunID] {
			t.Fatalf("firing %d: %+v (want tick %s, a run of its own)", i, f, want)
		}
		runs[f.RunID] = true
		run := b.runRecord(t, f.RunID)
		if run.Owner != "alice" || run.StartedBy != "schedule:tick" || run.RequestID != schedules.RequestID("tick", f.Tick, time.UTC) {
			t.Errorf("run %s: owner %q started by %q request id %q", run.ID, run.Owner, run.StartedBy, run.RequestID)
		}
	}
	if !s.Next.After(s.Firings[len(s.Firings)-1].Tick) {
		t.Errorf("next %s is not after the last firing", s.Next)
	}
}

// A tick fired again (a pass that died before it stored the next tick)
// finds the run it started: the request id is the tick's.
func TestUnitScheduleTickFiredAgainStartsNothing(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	s := &store.Schedule{Owner: "alice", Name: "again", Flow: "chain", Input: json.RawMessage(`{"n":2}`)}
	tick := unitEpoch.Add(time.Hour)
	h := newScheduleHost(b.eng)
	id := schedules.RequestID(s.Name, tick, time.UTC)
	first, err := h.Fire(context.Background(), s, tick, id)
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.Fire(context.Background(), s, tick, id)
	if err != nil || again != first {
		t.Fatalf("fired again: %q %v, want %q", again, err, first)
	}
	// A client may not send a schedule's request id itself.
	if _, err := b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "chain", Input: json.RawMessage(`{"n":2}`), RequestID: id}); codeOf(err) != CodeBadRequestID {
		t.Errorf("a client sending %q: %v, want %s", id, err, CodeBadRequestID)
	}
}

// Pausing stops firing and is kept on the record; resuming gives the
// missed ticks to the catch-up policy; trigger fires now, once per
// request id; another owner's schedule is not found; remove removes.
func TestUnitScheduleOperations(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	ctx := context.Background()
	ops := b.eng.Ops()
	b.putSchedule(t, store.Schedule{Name: "ops", Flow: "chain", Every: time.Hour, Input: json.RawMessage(`{"n":3}`), Next: unitEpoch.Add(time.Hour)})

	s, err := ops.SchedulePause(ctx, SchedulePauseParams{Owner: "alice", Name: "ops", Pause: true, Reason: "maintenance"})
	if err != nil || !s.Paused || s.PausedBy != "alice" || s.PauseReason != "maintenance" {
		t.Fatalf("pause: %+v %v", s, err)
	}
	svc := b.scheduler(t)
	b.clock.Advance(2 * time.Hour)
	if res := svc.RunOnce(ctx); res.Due != 0 || len(res.Fired) != 0 {
		t.Fatalf("a paused schedule was due: %+v", res)
	}
	if _, err := ops.SchedulePause(ctx, SchedulePauseParams{Owner: "alice", Name: "ops"}); err != nil {
		t.Fatal(err)
	}
	// catch_up none: the ticks the pause held back fire none, not a
	// burst at once; the resume records them skipped.
	if res := svc.RunOnce(ctx); res.Due != 0 || len(res.Fired) != 0 {
		t.Fatalf("the resumed schedule fired what its pause held back: %+v", res)
	}
	rec := b.scheduleRecord(t, "alice", "ops")
	if rec.Paused || !rec.Next.After(b.clock.Now()) || len(rec.Firings) != 1 || !strings.HasPrefix(rec.Firings[0].Skipped, schedules.SkippedPaused) {
		t.Errorf("after resume: paused %v next %s (now %s) firings %+v", rec.Paused, rec.Next, b.clock.Now(), rec.Firings)
	}

	r1, err := ops.ScheduleTrigger(ctx, "alice", "ops", "deploy-1")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := ops.ScheduleTrigger(ctx, "alice", "ops", "deploy-1")
	if err != nil || r2.RunID != r1.RunID || !r2.Existing {
		t.Fatalf("trigger again with its request id: %+v %v, want %s", r2, err, r1.RunID)
	}
	if r3, err := ops.ScheduleTrigger(ctx, "alice", "ops", ""); err != nil || r3.RunID == r1.RunID {
		t.Fatalf("trigger without a request id: %+v %v", r3, err)
	}
	if run := b.runRecord(t, r1.RunID); run.StartedBy != "schedule:ops" || run.Owner != "alice" {
		t.Errorf("triggered run: started by %q owner %q", run.StartedBy, run.Owner)
	}

	for name, call := range map[string]func() error{
		"show": func() error { _, err := ops.Schedule(ctx, "bob", "ops"); return err },
		"pause": func() error {
			_, err := ops.SchedulePause(ctx, SchedulePauseParams{Owner: "bob", Name: "ops", Pause: true})
			return err
		},
		"trigger": func() error { _, err := ops.ScheduleTrigger(ctx, "bob", "ops", ""); return err },
		"remove":  func() error { return ops.ScheduleRemove(ctx, "bob", "ops") },
	} {
		if err := call(); codeOf(err) != CodeNotFound {
			t.Errorf("bob's %s of alice's schedule: %v, want %s", name, err, CodeNotFound)
		}
	}
	if rec := b.scheduleRecord(t, "alice", "ops"); rec.Paused {
		t.Error("bob's pause changed alice's schedule")
	}
	if err := ops.ScheduleRemove(ctx, "alice", "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Schedule(ctx, "alice", "ops"); codeOf(err) != CodeNotFound {
		t.Errorf("after remove: %v", err)
	}
}

// A schedule's view lists its next ticks in its zone, and the phases of
// its firings' runs.
func TestUnitScheduleViewListsUpcomingTicks(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	ctx := context.Background()
	next := time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC) // 09:00 in Paris
	b.putSchedule(t, store.Schedule{Name: "digest", Flow: "chain", Cron: "0 9 * * *", Zone: "Europe/Paris", Input: json.RawMessage(`{"n":4}`), Next: next})
	v, err := b.eng.Ops().Schedule(ctx, "alice", "digest")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Upcoming) != MaxUpcoming || !v.Upcoming[0].Equal(next) || v.Upcoming[1].Sub(v.Upcoming[0]) != 24*time.Hour ||
		v.Upcoming[0].Location().String() != "Europe/Paris" {
		t.Fatalf("upcoming %v", v.Upcoming)
	}
	list, err := b.eng.Ops().Schedules(ctx, "alice", 0)
	if err != nil || len(list) != 1 || list[0].Name != "digest" {
		t.Fatalf("list %+v %v", list, err)
	}
	if other, err := b.eng.Ops().Schedules(ctx, "bob", 0); err != nil || len(other) != 0 {
		t.Fatalf("bob's list: %+v %v", other, err)
	}
}

const scheduledSrc = forkSrc + `
schedule("fixed", flow = "chain", every = "1h", input = {"n": 7})
schedule("computed", flow = "chain", cron = "0 9 * * *", timezone = "Europe/Paris",
    input = lambda tick: {"n": int(tick["time"][11:13])})
schedule("broken", flow = "chain", every = "1h", input = lambda tick: {"n": tick["nope"]})
`

// Registration stores a file's schedules as its owner's: a constant
// input is each run's; an input function is evaluated at each tick from
// the registered sources; one that fails skips its tick with the reason
// and the schedule goes on. Registering the file again keeps the next
// tick, the firings and a pause.
func TestUnitRegisteredScheduleFires(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	ctx := context.Background()
	if res, err := b.eng.RegisterAs(ctx, "alice", []SourceFile{{Path: "s.star", Src: scheduledSrc}}); err != nil || res.Diagnostics.Err() != nil {
		t.Fatalf("register: %v %v", err, res.Diagnostics)
	}
	fixed := b.scheduleRecord(t, "alice", "fixed")
	if fixed.Next != unitEpoch.Add(time.Hour) || string(fixed.Input) != `{"n": 7}` && string(fixed.Input) != `{"n":7}` || fixed.Source == "" {
		t.Fatalf("stored %+v", fixed)
	}
	svc := b.scheduler(t)
	b.clock.Advance(8 * time.Hour) // 09:00 in Paris; the hourly ones missed 7 ticks
	res := svc.RunOnce(ctx)
	got := map[string]int{}
	for _, name := range []string{"fixed", "computed", "broken"} {
		got[name] = len(b.scheduleRecord(t, "alice", name).Firings)
	}
	if res.Due != 3 {
		t.Fatalf("pass %+v, firings %v", res, got)
	}
	computed := b.scheduleRecord(t, "alice", "computed")
	if len(computed.Firings) != 1 || computed.Firings[0].RunID == "" {
		t.Fatalf("computed firings %+v", computed.Firings)
	}
	if run := b.runRecord(t, computed.Firings[0].RunID); string(run.Input) != `{"n":9}` {
		t.Errorf("computed input %s, want the tick's hour in Paris", run.Input)
	}
	broken := b.scheduleRecord(t, "alice", "broken")
	last := broken.Firings[len(broken.Firings)-1]
	if last.RunID != "" || !strings.Contains(last.Skipped, `key "nope"`) ||
		!broken.Next.After(b.clock.Now()) {
		t.Fatalf("broken: %+v next %s", broken.Firings, broken.Next)
	}

	if _, err := b.eng.Ops().SchedulePause(ctx, SchedulePauseParams{Owner: "alice", Name: "fixed", Pause: true}); err != nil {
		t.Fatal(err)
	}
	before := b.scheduleRecord(t, "alice", "fixed")
	if _, err := b.eng.RegisterAs(ctx, "alice", []SourceFile{{Path: "s.star", Src: scheduledSrc}}); err != nil {
		t.Fatal(err)
	}
	after := b.scheduleRecord(t, "alice", "fixed")
	if !after.Paused || !after.Next.Equal(before.Next) || len(after.Firings) != len(before.Firings) || after.Revision <= before.Revision {
		t.Errorf("registered again: %+v, was %+v", after, before)
	}
	// bob's file declares a schedule of the same name: his own.
	if _, err := b.eng.RegisterAs(ctx, "bob", []SourceFile{{Path: "b.star", Src: `schedule("fixed", flow = "chain", every = "1h", input = {"n": 1})`}}); err != nil {
		t.Fatal(err)
	}
	if bob := b.scheduleRecord(t, "bob", "fixed"); bob.Paused || string(b.scheduleRecord(t, "alice", "fixed").Input) == `{"n":1}` {
		t.Errorf("bob's schedule touched alice's")
	}
}

// Triggering a schedule whose input is a function starts the run with
// what the function returns for the time of the trigger, as a tick would,
// once per request id whatever the function answers later; a function
// that fails refuses the trigger with its reason and starts nothing.
func TestUnitScheduleTriggerEvaluatesItsInputFunction(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	ctx := context.Background()
	if res, err := b.eng.RegisterAs(ctx, "alice", []SourceFile{{Path: "s.star", Src: scheduledSrc}}); err != nil || res.Diagnostics.Err() != nil {
		t.Fatalf("register: %v %v", err, res.Diagnostics)
	}
	b.clock.Advance(5 * time.Hour) // 06:00 in Paris
	res, err := b.eng.Ops().ScheduleTrigger(ctx, "alice", "computed", "now-1")
	if err != nil {
		t.Fatal(err)
	}
	if run := b.runRecord(t, res.RunID); string(run.Input) != `{"n":6}` {
		t.Errorf("triggered input %s, want the trigger's hour in Paris", run.Input)
	}
	// An hour later the function answers another input; the retry still
	// finds the run its request id started.
	b.clock.Advance(time.Hour)
	if again, err := b.eng.Ops().ScheduleTrigger(ctx, "alice", "computed", "now-1"); err != nil || again.RunID != res.RunID || !again.Existing {
		t.Errorf("trigger again an hour later: %+v %v, want the run %s", again, err, res.RunID)
	}
	if _, err := b.eng.Ops().ScheduleTrigger(ctx, "alice", "broken", "now-2"); codeOf(err) != CodeBadInput || !strings.Contains(err.Error(), `key "nope"`) {
		t.Errorf("trigger of a failing input function: %v, want %s with the reason", err, CodeBadInput)
	}
	if _, err := b.eng.GetByRequestID(ctx, "alice", "schedule:broken:trigger:now-2"); codeOf(err) != CodeNotFound {
		t.Errorf("the refused trigger's request id: %v, want no run (%s)", err, CodeNotFound)
	}
}

// A schedule whose catch-up policy is latest fires the latest tick its
// pause held back when it resumes, once.
func TestUnitScheduleResumeCatchesUpByPolicy(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	ctx := context.Background()
	b.putSchedule(t, store.Schedule{Name: "late", Flow: "chain", Every: time.Hour, Input: json.RawMessage(`{"n":5}`),
		Next: unitEpoch.Add(time.Hour), Overlap: schedules.OverlapAllow, CatchUp: "latest"})
	ops := b.eng.Ops()
	svc := b.scheduler(t)
	if _, err := ops.SchedulePause(ctx, SchedulePauseParams{Owner: "alice", Name: "late", Pause: true}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5*time.Hour + time.Minute)
	if _, err := ops.SchedulePause(ctx, SchedulePauseParams{Owner: "alice", Name: "late"}); err != nil {
		t.Fatal(err)
	}
	res := svc.RunOnce(ctx)
	if len(res.Fired) != 1 || !res.Fired[0].Tick.Equal(unitEpoch.Add(5*time.Hour)) || res.Skipped != 4 {
		t.Fatalf("resumed with catch_up latest: %+v", res)
	}
}

// A tick of a schedule with an input function fired again (a crash
// before its next tick was stored) finds its run by the request id, even
// after the file was registered again with another function: it is not
// evaluated again, so it neither conflicts nor starts a second run.
func TestUnitScheduleTickFiredAgainAfterItsFunctionChanged(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	ctx := context.Background()
	register := func(n int) {
		src := forkSrc + fmt.Sprintf("\nschedule(\"fn\", flow = \"chain\", every = \"1h\", input = lambda tick: {\"n\": %d})\n", n)
		if res, err := b.eng.RegisterAs(ctx, "alice", []SourceFile{{Path: "fn.star", Src: src}}); err != nil || res.Diagnostics.Err() != nil {
			t.Fatalf("register: %v %v", err, res.Diagnostics)
		}
	}
	register(1)
	tick := unitEpoch.Add(time.Hour)
	id := schedules.RequestID("fn", tick, time.UTC)
	h := newScheduleHost(b.eng)
	first, err := h.Fire(ctx, b.scheduleRecord(t, "alice", "fn"), tick, id)
	if err != nil {
		t.Fatal(err)
	}
	register(2)
	again, err := h.Fire(ctx, b.scheduleRecord(t, "alice", "fn"), tick, id)
	if err != nil || again != first {
		t.Fatalf("fired again after the function changed: %q %v, want %q", again, err, first)
	}
	if run := b.runRecord(t, first); string(run.Input) != `{"n":1}` {
		t.Errorf("the tick's run has input %s", run.Input)
	}
}

// The engine's own program (Register, owner "") may not declare a
// schedule: its runs would have no owner. The refusal says so, and
// nothing of the file is stored.
func TestUnitScheduleNeedsAnOwner(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, forkSrc)
	src := `flow(name = "own", nodes = [task("a", tool = "kit.echo", args = {})])
schedule("ownerless", flow = "own", every = "1h")
`
	_, err := b.eng.Register(context.Background(), []SourceFile{{Path: "o.star", Src: src}})
	if codeOf(err) != CodeBadRequest || !strings.Contains(err.Error(), "o.star:2:1") || !strings.Contains(err.Error(), "needs an owner") {
		t.Fatalf("register without an owner: %v", err)
	}
	if _, err := b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "own"}); codeOf(err) != CodeUnknownFlow {
		t.Errorf("the flow beside it was registered (%v)", err)
	}
}
