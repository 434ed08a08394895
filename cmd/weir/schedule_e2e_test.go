package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// scheduleFlows declares three schedules of one flow: beat, whose ticks
// the tests count; pulse, a witness that fires on the same passes as
// beat, so that its firings prove the service made passes while beat
// fired nothing; and digest, a cron in a zone (DIGEST, digestCron's) that
// fires on weekdays at an hour half a day away, never during a test, as
// does stamp, whose input is a function of the tick. beat
// and pulse allow overlap: a tick never waits for or skips over a slow
// earlier run, so every tick has its run however loaded the machine is.
const scheduleFlows = `
flow(name = "beat_flow", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"]})])
schedule("beat", flow = "beat_flow", every = "1s", input = {"n": 1}, overlap = "allow")
schedule("pulse", flow = "beat_flow", every = "1s", input = {"n": 2}, overlap = "allow")
schedule("digest", flow = "beat_flow", cron = "DIGEST", timezone = "Europe/Paris", input = {"n": 3})
schedule("stamp", flow = "beat_flow", cron = "DIGEST", timezone = "Europe/Paris", input = lambda tick: {"n": len(tick["time"])})
`

// digestCron is digest's cron: weekdays at the hour half a day from now
// in Paris, or an hour earlier for 02:00, which a spring-forward day has
// not.
func digestCron(paris *time.Location) (cron string, hour int) {
	hour = (time.Now().In(paris).Hour() + 12) % 24
	if hour == 2 {
		hour = 1
	}
	return fmt.Sprintf("0 %d * * MON-FRI", hour), hour
}

// tickRun is a run a schedule's tick started.
type tickRun struct {
	tick    time.Time
	run     apitypes.Run
	created time.Time
}

// tickRuns lists the runs schedule name's ticks started, oldest tick
// first, read through d; a trigger's runs (request id
// schedule:NAME:trigger:ID) are not ticks and are left out.
func (d *daemon) tickRuns(name string) []tickRun {
	d.t.Helper()
	runs, err := client.Collect(d.api.RunListAll(context.Background(), client.RunListParams{Flow: "beat_flow"}))
	if err != nil {
		d.t.Fatal(err)
	}
	prefix := "schedule:" + name + ":"
	var out []tickRun
	for _, r := range runs {
		rest, ok := strings.CutPrefix(r.RequestID, prefix)
		if !ok || strings.HasPrefix(rest, "trigger:") {
			continue
		}
		tk, err := time.Parse(time.RFC3339, rest)
		if err != nil {
			d.t.Fatalf("run %s has request id %q: not a tick of %s", r.ID, r.RequestID, name)
		}
		if r.StartedBy != "schedule:"+name {
			d.t.Errorf("run %s of tick %s started by %q, want schedule:%s", r.ID, rest, r.StartedBy, name)
		}
		created, err := time.Parse(time.RFC3339Nano, r.CreatedAt)
		if err != nil {
			d.t.Fatalf("run %s created_at %q: %v", r.ID, r.CreatedAt, err)
		}
		out = append(out, tickRun{tick: tk, run: r, created: created})
	}
	slices.SortFunc(out, func(a, b tickRun) int { return a.tick.Compare(b.tick) })
	return out
}

// eachTickOnce fails unless runs (oldest tick first) have one run per
// tick, the ticks on whole seconds and consecutive: no tick fired twice,
// none lost.
func eachTickOnce(t *testing.T, runs []tickRun) {
	t.Helper()
	for i, r := range runs {
		if !r.tick.Equal(r.tick.Truncate(time.Second)) {
			t.Errorf("tick %s is not on a whole second", r.tick)
		}
		if i == 0 {
			continue
		}
		switch gap := r.tick.Sub(runs[i-1].tick); {
		case gap == 0:
			t.Errorf("tick %s fired twice: runs %s and %s", r.tick, runs[i-1].run.ID, r.run.ID)
		case gap != time.Second:
			t.Errorf("ticks lost between %s and %s", runs[i-1].tick, r.tick)
		}
	}
}

// waitTicks waits until schedule name's ticks have started at least n
// runs, and returns them.
func (d *daemon) waitTicks(name string, n int, within time.Duration) []tickRun {
	d.t.Helper()
	var runs []tickRun
	testutil.Eventually(d.t, within, func() error {
		if runs = d.tickRuns(name); len(runs) < n {
			return fmt.Errorf("%d runs of %s's ticks, want %d\n%s", len(runs), name, n, d.log())
		}
		return nil
	})
	return runs
}

// schedule reads one schedule through the client.
func (d *daemon) schedule(name string) *apitypes.Schedule {
	d.t.Helper()
	s, err := d.api.Schedule(context.Background(), name)
	if err != nil {
		d.t.Fatalf("schedule %s: %v", name, err)
	}
	return s
}

// waitPulse waits until the witness schedule pulse has fired a tick after
// since, which only a pass that began after since can do.
func (d *daemon) waitPulse(since time.Time) {
	d.t.Helper()
	testutil.Eventually(d.t, 30*time.Second, func() error {
		if runs := d.tickRuns("pulse"); len(runs) > 0 && runs[len(runs)-1].tick.After(since) {
			return nil
		}
		return fmt.Errorf("pulse fired no tick after %s\n%s", since, d.log())
	})
}

// writeFlowFile writes src into a file of the test's and returns its path.
func writeFlowFile(t *testing.T, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScheduleOperatedThroughTheCLI drives schedules through weir's
// commands against a real daemon: registration stores them, ls and show
// print the next ticks and the firings with their runs' phases, a paused
// schedule fires nothing while the service's passes go on (a restart
// keeps it paused), trigger with a request id starts one run however
// often it is sent, resume fires none of the ticks the pause held back, rm
// removes it; an unknown schedule and a bad cron are refused clearly.
func TestScheduleOperatedThroughTheCLI(t *testing.T) {
	d := servingDaemon(t)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	cron, hour := digestCron(paris)
	path := writeFlowFile(t, "sched.star", strings.ReplaceAll(scheduleFlows, "DIGEST", cron))
	code, out, errb := d.cli("flow", "register", path)
	if code != 0 || !regexp.MustCompile(`(?m)^scheduled beat \(flow beat_flow, next tick \S+\)$`).MatchString(out) ||
		!strings.Contains(out, "scheduled digest (flow beat_flow, next tick ") {
		t.Fatalf("register: %d\n%s%s", code, out, errb)
	}
	first := d.waitTicks("beat", 3, 30*time.Second)[0]
	code, out, errb = d.cli("run", "get", first.run.ID)
	if want := "request id: " + first.run.RequestID + "\n"; code != 0 || !strings.Contains(out, "started by: schedule:beat\n") ||
		!strings.HasPrefix(first.run.RequestID, "schedule:beat:") || !strings.Contains(out, want) {
		t.Errorf("run get of a tick's run: %d\n%s%s", code, out, errb)
	}
	scheduleListed(t, d, paris, cron, hour)
	pausedNext, before := schedulePausedFiresNothing(t, d)
	scheduleTriggeredOnce(t, d)
	scheduleTriggeredWithItsInputFunction(t, d)
	scheduleStaysPausedAcrossRestart(t, d, pausedNext, before)
	scheduleResumed(t, d, pausedNext)
	scheduleRemoved(t, d)
	scheduleBadInput(t, d)
	d.stop()
}

// scheduleListed checks ls and show: the next ticks in each schedule's
// zone and beat's firings with their runs' phases.
func scheduleListed(t *testing.T, d *daemon, paris *time.Location, cron string, hour int) {
	t.Helper()
	code, out, errb := d.cli("schedule", "ls")
	if code != 0 {
		t.Fatalf("schedule ls: %d %s", code, errb)
	}
	digest := d.schedule("digest")
	for _, re := range []string{
		`(?m)^NAME\s+FLOW\s+WHEN\s+NEXT\s+LAST FIRING$`,
		`(?m)^beat\s+beat_flow\s+every 1s\s+\S+Z\s+\S+Z \S+ \((queued|running|completed)\)$`,
		`(?m)^digest\s+beat_flow\s+` + regexp.QuoteMeta(cron) + ` Europe/Paris\s+` + regexp.QuoteMeta(digest.Next.In(paris).Format(time.RFC3339)) + `\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("schedule ls does not match %s:\n%s", re, out)
		}
	}
	code, out, _ = d.cli("schedule", "show", "digest")
	if code != 0 || !strings.Contains(out, "schedule digest: flow beat_flow, "+cron+" Europe/Paris\n") || !strings.Contains(out, "no firings yet") {
		t.Errorf("schedule show digest: %d\n%s", code, out)
	}
	upcoming := regexp.MustCompile(`(?m)^  (\S+)$`).FindAllStringSubmatch(out, -1)
	if len(upcoming) != engine.MaxUpcoming {
		t.Fatalf("show digest lists %d next ticks, want %d:\n%s", len(upcoming), engine.MaxUpcoming, out)
	}
	prev := time.Now()
	for _, m := range upcoming {
		tk, err := time.Parse(time.RFC3339, m[1])
		if err != nil {
			t.Fatalf("next tick %q: %v", m[1], err)
		}
		local := tk.In(paris)
		if !tk.After(prev) || local.Hour() != hour || local.Minute() != 0 || local.Weekday() == time.Saturday || local.Weekday() == time.Sunday ||
			m[1] != local.Format(time.RFC3339) {
			t.Errorf("next tick %s after %s: want the next weekday's %02d:00 in Paris, printed in its zone", m[1], prev, hour)
		}
		prev = tk
	}
	scheduleShowsPhases(t, d)
}

// scheduleShowsPhases checks that show prints each of beat's firings with
// its run and the phase that run has, read again after the listing.
func scheduleShowsPhases(t *testing.T, d *daemon) {
	t.Helper()
	code, out, _ := d.cli("schedule", "show", "beat", "--json")
	var s apitypes.Schedule
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || len(s.Firings) == 0 {
		t.Fatalf("schedule show beat --json: %d %s", code, out)
	}
	for _, f := range s.Firings {
		if f.RunID == "" || f.Skipped != "" {
			t.Errorf("beat's firing %+v: want a run, never a skip", f)
			continue
		}
		r := d.waitTerminal(f.RunID)
		if p := apitypes.Phase(f.Phase); p.Terminal() && p != r.Phase {
			t.Errorf("firing of %s shows phase %s, its run is %s", f.Tick, f.Phase, r.Phase)
		}
	}
	code, out, _ = d.cli("schedule", "show", "beat")
	f := s.Firings[0]
	if code != 0 || !strings.Contains(out, "latest firings:\n") ||
		!regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(f.Tick.Format(time.RFC3339)+" "+f.RunID)+` \(completed\)$`).MatchString(out) {
		t.Errorf("schedule show beat: want %s's run %s completed:\n%s", f.Tick, f.RunID, out)
	}
}

// schedulePausedFiresNothing pauses beat and checks that it fires nothing
// while pulse's firings show the service passing; it returns beat's next
// tick as the pause left it and the ticks it had fired.
func schedulePausedFiresNothing(t *testing.T, d *daemon) (time.Time, []tickRun) {
	t.Helper()
	code, out, errb := d.cli("schedule", "pause", "beat", "--reason", "maintenance")
	if code != 0 || out != "schedule beat is paused\n" {
		t.Fatalf("pause: %d %q %s", code, out, errb)
	}
	pausedAt := time.Now()
	// A pass that read beat before the pause may still start the tick it
	// decided (its save is refused: the tick stays beat's next). A pulse
	// tick after the pause comes from a pass that began after it.
	d.waitPulse(pausedAt.Add(time.Second))
	s := d.schedule("beat")
	before := d.tickRuns("beat")
	if !s.Paused || s.PausedBy == "" || s.PauseReason != "maintenance" {
		t.Fatalf("after pause: %+v", s)
	}
	if last := before[len(before)-1].tick; last.After(s.Next) {
		t.Fatalf("beat fired %s, past its stored next tick %s", last, s.Next)
	}
	d.waitPulse(time.Now().Add(2 * time.Second))
	scheduleUnchanged(t, d, s, before)
	return s.Next, before
}

// scheduleUnchanged fails if beat's next tick, firings or tick runs moved
// since was and runs were read.
func scheduleUnchanged(t *testing.T, d *daemon, was *apitypes.Schedule, runs []tickRun) {
	t.Helper()
	now := d.schedule("beat")
	if !now.Paused || !now.Next.Equal(was.Next) || len(now.Firings) != len(was.Firings) {
		t.Errorf("paused beat moved: next %s→%s, %d→%d firings", was.Next, now.Next, len(was.Firings), len(now.Firings))
	}
	if got := d.tickRuns("beat"); len(got) != len(runs) {
		t.Errorf("paused beat started %d runs while paused, last tick %s", len(got)-len(runs), got[len(got)-1].tick)
	}
}

// scheduleTriggeredOnce fires paused beat twice with one request id: one
// run, answered twice; its request id is the trigger's, not a tick's.
func scheduleTriggeredOnce(t *testing.T, d *daemon) {
	t.Helper()
	code, first, errb := d.cli("schedule", "trigger", "beat", "--request-id", "deploy-42")
	if code != 0 || strings.TrimSpace(first) == "" {
		t.Fatalf("trigger: %d %q %s", code, first, errb)
	}
	code, again, errb := d.cli("schedule", "trigger", "beat", "--request-id", "deploy-42")
	if code != 0 || again != first {
		t.Fatalf("trigger again: %d %q %s, want the same run %q", code, again, errb, first)
	}
	r := d.waitTerminal(strings.TrimSpace(first))
	if r.Phase != apitypes.PhaseCompleted || string(r.Output) != `{"n":1}` || r.StartedBy != "schedule:beat" ||
		r.RequestID != "schedule:beat:trigger:deploy-42" {
		t.Fatalf("triggered run: %+v", r)
	}
	runs, err := client.Collect(d.api.RunListAll(context.Background(), client.RunListParams{Flow: "beat_flow"}))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range runs {
		if x.RequestID == r.RequestID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d runs of the trigger's request id, want 1", n)
	}
}

// scheduleTriggeredWithItsInputFunction triggers stamp, whose input is a
// function of the tick: the run's input is what it answers for the
// trigger's time in Paris (RFC 3339 with a +01:00 or +02:00 offset, 25
// bytes), and the request id sent again answers the same run.
func scheduleTriggeredWithItsInputFunction(t *testing.T, d *daemon) {
	t.Helper()
	code, first, errb := d.cli("schedule", "trigger", "stamp", "--request-id", "stamp-1")
	if code != 0 {
		t.Fatalf("trigger stamp: %d %s", code, errb)
	}
	if r := d.waitTerminal(strings.TrimSpace(first)); r.Phase != apitypes.PhaseCompleted || string(r.Input) != `{"n":25}` {
		t.Fatalf("stamp's triggered run: %s input %s %+v", r.Phase, r.Input, r.Error)
	}
	if code, again, errb := d.cli("schedule", "trigger", "stamp", "--request-id", "stamp-1"); code != 0 || again != first {
		t.Errorf("trigger stamp again: %d %q %s, want %q", code, again, errb, first)
	}
}

// scheduleStaysPausedAcrossRestart restarts the daemon: beat is still
// paused, listed so, and fires nothing at the restarted daemon's passes.
func scheduleStaysPausedAcrossRestart(t *testing.T, d *daemon, pausedNext time.Time, before []tickRun) {
	t.Helper()
	d.stop()
	d.start("")
	restarted := time.Now()
	code, out, _ := d.cli("schedule", "ls")
	if code != 0 || !regexp.MustCompile(`(?m)^beat\s+beat_flow\s+every 1s\s+paused\s`).MatchString(out) {
		t.Errorf("schedule ls after the restart: want beat paused\n%s", out)
	}
	s := d.schedule("beat")
	if !s.Paused || !s.Next.Equal(pausedNext) {
		t.Fatalf("after the restart beat is %+v, want paused at next tick %s", s, pausedNext)
	}
	d.waitPulse(restarted.Add(2 * time.Second))
	scheduleUnchanged(t, d, s, before)
}

// scheduleResumed resumes beat: with catch_up none the ticks its pause
// held back fire none (no burst on resume), the resume records them
// skipped, and beat goes on from the first tick after the resume, every
// tick once.
func scheduleResumed(t *testing.T, d *daemon, pausedNext time.Time) {
	t.Helper()
	before := time.Now()
	code, out, errb := d.cli("schedule", "resume", "beat")
	m := regexp.MustCompile(`^schedule beat is running; next tick (\S+)\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("resume: %d %q %s", code, out, errb)
	}
	next, err := time.Parse(time.RFC3339, m[1])
	if err != nil || next.Before(before.Truncate(time.Second)) {
		t.Fatalf("resumed with next tick %q (%v), want one after the resume at %s", m[1], err, before)
	}
	var runs []tickRun
	testutil.Eventually(t, 30*time.Second, func() error {
		runs = d.tickRuns("beat")
		if last := runs[len(runs)-1].tick; last.Before(next.Add(2 * time.Second)) {
			return fmt.Errorf("beat's last tick %s, want one past %s", last, next.Add(2*time.Second))
		}
		return nil
	})
	var held, after []tickRun
	for _, r := range runs {
		switch {
		case r.tick.Before(pausedNext):
		case r.tick.Before(next):
			held = append(held, r)
		default:
			after = append(after, r)
		}
	}
	if len(held) > 0 {
		t.Errorf("%d ticks the pause held back fired on resume (the first %s)", len(held), held[0].tick)
	}
	eachTickOnce(t, after)
	if len(after) == 0 || !after[0].tick.Equal(next) {
		t.Errorf("after the resume the first tick fired is not %s: %+v", next, after)
	}
	if !slices.ContainsFunc(d.schedule("beat").Firings, func(f apitypes.ScheduleFiring) bool { return strings.HasPrefix(f.Skipped, "paused") }) {
		t.Errorf("the resume skipped the paused ticks without a firing saying so: %+v", d.schedule("beat").Firings)
	}
}

// scheduleRemoved removes beat: it is gone from ls and show, and the runs
// it started stay.
func scheduleRemoved(t *testing.T, d *daemon) {
	t.Helper()
	runs := d.tickRuns("beat")
	code, out, errb := d.cli("schedule", "rm", "beat")
	if code != 0 || out != "schedule beat removed\n" {
		t.Fatalf("rm: %d %q %s", code, out, errb)
	}
	if code, _, errb := d.cli("schedule", "show", "beat"); code != 1 || !strings.Contains(errb, `no schedule "beat"`) {
		t.Errorf("show after rm: %d %s, want exit 1 and no schedule", code, errb)
	}
	if _, out, _ := d.cli("schedule", "ls"); strings.Contains(out, "\nbeat ") || !strings.Contains(out, "\npulse ") {
		t.Errorf("ls after rm lists:\n%s", out)
	}
	if got := d.tickRuns("beat"); len(got) < len(runs) {
		t.Errorf("rm took runs away: %d, were %d", len(got), len(runs))
	}
}

// scheduleBadInput: a schedule no one has, and a file with a bad cron,
// are refused with what is wrong, and change nothing.
func scheduleBadInput(t *testing.T, d *daemon) {
	t.Helper()
	for _, args := range [][]string{
		{"schedule", "show", "nosuch"}, {"schedule", "pause", "nosuch"}, {"schedule", "resume", "nosuch"},
		{"schedule", "trigger", "nosuch", "--request-id", "x"}, {"schedule", "rm", "nosuch"},
	} {
		code, out, errb := d.cli(args...)
		if code != 1 || out != "" || !strings.Contains(errb, `no schedule "nosuch" (weir schedule ls lists yours)`) || !strings.Contains(errb, "E_NOT_FOUND") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: want exit 1 and the schedule named", args, code, out, errb)
		}
	}
	if code, _, errb := d.cli("schedule", "pause"); code != 2 || errb == "" {
		t.Errorf("pause without a name: exit %d %q, want the usage error (2)", code, errb)
	}
	bad := writeFlowFile(t, "bad.star", `flow(name = "other", nodes = [task("t", tool = "testkit.echo", args = {})])

schedule("late", flow = "other", cron = "0 25 * * *")
`)
	code, out, errb := d.cli("flow", "register", bad)
	want := bad + `:3:34: E_INVALID: schedule "late": cron "0 25 * * *": end of range (25) above maximum (23)`
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(errb, "1 problem; nothing registered") {
		t.Errorf("register a bad cron: exit %d\n%s%s\nwant exit 1 and %s", code, out, errb, want)
	}
	ss, err := d.api.Schedules(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ss {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"digest", "pulse", "stamp"}) {
		t.Errorf("schedules after the refused file: %v, want digest, pulse and stamp only", names)
	}
	if _, err := d.api.FlowSource(context.Background(), "other"); client.ErrorCode(err) != engine.CodeUnknownFlow {
		t.Errorf("the refused file's flow: %v, want %s", err, engine.CodeUnknownFlow)
	}
}
