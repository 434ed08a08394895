package main

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// crashScheduleFlow has one schedule, so that the first tick a failpoint
// kills the daemon at is beat's.
const crashScheduleFlow = `
flow(name = "beat_flow", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"]})])
schedule("beat", flow = "beat_flow", every = "1s", input = {"n": 1}, overlap = "allow")
`

// TestScheduleCrashEachTickOnce kills the daemon with SIGKILL at the
// first tick of an every="1s" schedule, once between the pass's decision
// and its run's acceptance (schedule-decided) and once between the
// acceptance and the stored next tick (schedule-fired). The stored next
// tick is still the one it died at, so the restarted daemon's first pass
// fires it (well within the grace): after schedule-decided it starts that
// tick's run then, after schedule-fired its request id finds the run
// accepted before the kill. Either way every tick from the first on has
// exactly one run, and the schedule's firings name each tick once.
func TestScheduleCrashEachTickOnce(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	for _, fp := range []string{"schedule-decided", "schedule-fired"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			d := newDaemon(t)
			d.start(fp)
			// The daemon may die at the first tick before it answers
			// the registration: the tick's pass is there only once the
			// schedule is stored, so the kill says it was.
			_, regErr := d.api.FlowRegister(context.Background(), apitypes.SourceFile{Path: "sched.star", Src: crashScheduleFlow})
			d.waitKilled()
			killed := time.Now()
			if regErr != nil {
				t.Logf("registration unanswered: %v", regErr)
			}
			d.start("")
			runs := d.waitTicks("beat", 4, 30*time.Second)
			eachTickOnce(t, runs)
			first := runs[0]
			s := d.schedule("beat")
			if len(s.Firings) == 0 || !s.Firings[0].Tick.Equal(first.tick) || s.Firings[0].RunID != first.run.ID {
				t.Fatalf("beat's firings %+v, want the first at %s with run %s", s.Firings, first.tick, first.run.ID)
			}
			// Registration stored the first tick after its time; it is
			// the one the daemon died at, and it was not lost.
			if want := s.CreatedAt.Truncate(time.Second).Add(time.Second); !first.tick.Equal(want) {
				t.Errorf("the first tick with a run is %s, want %s, the first after the registration at %s", first.tick, want, s.CreatedAt)
			}
			seen := map[time.Time]bool{}
			for _, f := range s.Firings {
				if f.Skipped != "" || seen[f.Tick] {
					t.Errorf("beat's firing %+v: a skip, or a tick named twice", f)
				}
				seen[f.Tick] = true
			}
			if fp == "schedule-fired" && !first.created.Before(killed) {
				t.Errorf("the tick the daemon died at (%s) has run %s created %s, after the kill at %s: want the run accepted before it",
					first.tick, first.run.ID, first.created, killed)
			}
			if fp == "schedule-decided" && !first.created.After(killed) {
				t.Errorf("the tick the daemon died at (%s) has run %s created %s, before the kill at %s: want it accepted after the restart",
					first.tick, first.run.ID, first.created, killed)
			}
			for _, r := range runs {
				if v := d.waitTerminal(r.run.ID); v.Phase != apitypes.PhaseCompleted {
					t.Errorf("tick %s's run ended %s %+v", r.tick, v.Phase, v.Error)
				}
			}
			d.stop()
		})
	}
}
