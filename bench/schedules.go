package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/bench/internal/daemon"
	"github.com/weirhq/weir/bench/internal/ticks"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// tickFlow is what every schedule of scenario 14 starts: one echo, so the
// figures are the schedule service's and the start's, not the work's.
const tickFlow = `
flow(name = "tick", nodes = [
    task("t", tool = "testkit.echo", args = {"tick": True}),
])
`

// The sizes of scenario 14: firing schedules and the window they fire in;
// idle schedules and how many one registered file declares. A file of
// 500 is about 30 KB and evaluates in milliseconds, far inside every
// registration limit (8 MiB a request, 4 MiB a file, 10,000,000 steps and
// 10 s of the sandbox an evaluation); files of a few hundred are what an
// operator with that many schedules would keep.
const (
	firingSchedules = 100
	idleSchedules   = 10000
	schedulesPerReg = 500
	scheduleWindow  = 30 * time.Second
)

// schedules is scenario 14: the schedule service with 100 schedules firing
// every second (how late each tick's run is created, and what the firing
// costs beside the same daemon idle), then with 10,000 schedules due in
// an hour (what holding them costs a daemon that has nothing to do).
func schedules(b *bench) ([]row, error) {
	fire, err := schedulesFiring(b)
	if err != nil {
		return nil, err
	}
	idle, err := schedulesIdle(b, fire.idleCPU)
	return append(fire.rows, idle...), err
}

// firingResult is scenario 14's first part: its rows, and the idle CPU of
// a daemon with no schedule, the second part's limit.
type firingResult struct {
	rows    []row
	idleCPU float64 // share of one core
}

func schedulesFiring(b *bench) (firingResult, error) {
	d, err := b.startDaemon("schedules-firing")
	if err != nil {
		return firingResult{}, err
	}
	defer d.Kill()
	if err := b.register(d, "tick", tickFlow); err != nil {
		return firingResult{}, err
	}
	c := d.Client()
	if err := runToEnd(b.ctx, c, "tick", json.RawMessage(`{}`)); err != nil { // launches testkit
		return firingResult{}, err
	}
	idle, err := daemonCPU(b, d, scheduleWindow)
	if err != nil {
		return firingResult{}, err
	}
	if err := b.register(d, "every-second", ticks.Every("s", "tick", "1s", 0, firingSchedules)); err != nil {
		return firingResult{}, err
	}
	// The first pass after registration fires the first ticks; the
	// window begins on the next whole second after it.
	if err := pause(b.ctx, 2*time.Second); err != nil {
		return firingResult{}, err
	}
	from := time.Now().Truncate(time.Second).Add(time.Second)
	if err := pause(b.ctx, time.Until(from)); err != nil {
		return firingResult{}, err
	}
	busy, err := daemonCPU(b, d, scheduleWindow)
	if err != nil {
		return firingResult{}, err
	}
	to := from.Add(scheduleWindow)
	// The window's last ticks are fired at the pass after them.
	if err := pause(b.ctx, 3*time.Second); err != nil {
		return firingResult{}, err
	}
	late, err := lateness(b, c, from, to)
	if err != nil {
		return firingResult{}, err
	}
	fmt.Fprintf(b.log, "  %d ticks due, %d runs, %d ticks with two runs; lateness min %v, median %v, p99 %v, max %v; a second's ticks fired over %v (median); CPU %.1f%% firing, %.1f%% idle\n",
		late.due, late.runs, late.twice, late.at(0), late.at(0.5), late.at(0.99), late.at(1), late.spread, 100*busy, 100*idle)
	if late.runs == 0 {
		return firingResult{}, fmt.Errorf("no tick between %s and %s started a run", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	p99 := late.at(0.99)
	return firingResult{idleCPU: idle, rows: []row{
		{figure: fmt.Sprintf("p99 lateness of a tick (its run's created_at − the tick), %d schedules every 1s for %v", firingSchedules, scheduleWindow),
			value: dur(p99),
			limit: fmt.Sprintf("the pass interval 1 s (min %s, median %s, max %s; one pass fires a second's %d ticks over %s; %d runs for %d ticks due, %d ticks with two runs)",
				dur(late.at(0)), dur(late.at(0.5)), dur(late.at(1)), firingSchedules, dur(late.spread), late.runs, late.due, late.twice),
			ratio:  ratio(p99.Seconds()),
			target: verdict("< 1 s", p99 < time.Second && late.runs == late.due && late.twice == 0)},
		{figure: fmt.Sprintf("daemon CPU (weir serve and plugins) with them firing, %.0f runs/s", float64(firingSchedules)),
			value: pctCore(busy), limit: "same daemon idle for " + scheduleWindow.String() + " " + pctCore(idle), ratio: ratio(busy / idle)},
	}}, nil
}

func schedulesIdle(b *bench, noSchedulesCPU float64) ([]row, error) {
	d, err := b.startDaemon("schedules-idle")
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "tick", tickFlow); err != nil {
		return nil, err
	}
	before, err := rss(d.Pid())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for from := 0; from < idleSchedules; from += schedulesPerReg {
		src := ticks.Every("h", "tick", "1h", from, min(schedulesPerReg, idleSchedules-from))
		if err := b.register(d, fmt.Sprintf("hourly-%d", from/schedulesPerReg), src); err != nil {
			return nil, err
		}
	}
	registered := time.Since(start)
	if err := checkRegistered(b, d.Client(), idleSchedules); err != nil {
		return nil, err
	}
	// An hour's ticks fire on the hour: a window across one measures
	// 10,000 firings, not a daemon holding them.
	if next := time.Now().Truncate(time.Hour).Add(time.Hour); time.Until(next) < scheduleWindow+5*time.Second {
		fmt.Fprintf(b.log, "  waiting for the hour's ticks at %s to be fired first\n", next.Format(time.TimeOnly))
		if err := pause(b.ctx, time.Until(next)+30*time.Second); err != nil {
			return nil, err
		}
	}
	cpu, err := daemonCPU(b, d, scheduleWindow)
	if err != nil {
		return nil, err
	}
	after, err := rss(d.Pid())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "  %d schedules registered in %d files in %v; idle CPU %.2f%%, RSS %s (before %s)\n",
		idleSchedules, (idleSchedules+schedulesPerReg-1)/schedulesPerReg, registered.Round(time.Millisecond), 100*cpu, mib(after), mib(before))
	scope := fmt.Sprintf("%s schedules every 1h (registered in %d files of %d in %s)", thousands(idleSchedules), idleSchedules/schedulesPerReg, schedulesPerReg, dur(registered))
	return []row{
		{figure: "daemon CPU idle over " + scheduleWindow.String() + " with " + scope, value: pctCore(cpu),
			limit: "a daemon with no schedule, idle " + pctCore(noSchedulesCPU), ratio: ratio(cpu / noSchedulesCPU), target: verdict("< 5% of a core", cpu < 0.05)},
		{figure: "daemon RSS (VmRSS) with them", value: mib(after),
			limit: "same daemon before registering them " + mib(before), ratio: ratio(float64(after) / float64(before))},
	}, nil
}

// checkRegistered checks that the n hourly schedules are stored: a full
// first page of the listing (GET /v1/schedules has no next page: it lists
// at most apitypes.MaxListLimit) and the last one declared.
func checkRegistered(b *bench, c *client.Client, n int) error {
	listed, err := c.Schedules(b.ctx, apitypes.MaxListLimit)
	if err != nil {
		return err
	}
	if want := min(n, apitypes.MaxListLimit); len(listed) != want {
		return fmt.Errorf("%d schedules listed after registering %d, want %d", len(listed), n, want)
	}
	last := fmt.Sprintf("h%d", n-1)
	if _, err := c.Schedule(b.ctx, last); err != nil {
		return fmt.Errorf("schedule %s after registering %d: %w", last, n, err)
	}
	return nil
}

// daemonCPU is the CPU d (weir serve and its plugins) used over window, as
// a share of one core.
func daemonCPU(b *bench, d *daemon.Daemon, window time.Duration) (float64, error) {
	parts := daemonParts([]*daemon.Daemon{d})
	before, err := readCPU(parts)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := pause(b.ctx, window); err != nil {
		return 0, err
	}
	after, err := readCPU(parts)
	if err != nil {
		return 0, err
	}
	var used time.Duration
	for i := range parts {
		used += after[i] - before[i]
	}
	return used.Seconds() / time.Since(start).Seconds(), nil
}

// ticksLate is how late the ticks of a window were fired.
type ticksLate struct {
	late  []time.Duration // sorted
	due   int             // ticks of every schedule in the window
	runs  int             // runs started for them
	twice int             // ticks that started a second run
	// spread is the median, over the window's seconds, of the time
	// between the first and the last run created for that second's
	// ticks: how long a pass takes to fire them all.
	spread time.Duration
}

// at is the q-quantile of the lateness (1: the latest).
func (l ticksLate) at(q float64) time.Duration {
	if len(l.late) == 0 {
		return 0
	}
	return l.late[min(len(l.late)-1, int(q*float64(len(l.late))))]
}

// lateness reads the runs of flow "tick" that schedules started for ticks
// in [from, to) and how long after its tick each was created.
func lateness(b *bench, c *client.Client, from, to time.Time) (ticksLate, error) {
	runs, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{Flow: "tick"}))
	if err != nil {
		return ticksLate{}, err
	}
	out := ticksLate{due: firingSchedules * int(to.Sub(from)/time.Second)}
	seen := map[string]bool{}
	first, last := map[time.Time]time.Duration{}, map[time.Time]time.Duration{}
	for _, v := range runs {
		_, tick, ok := ticks.Parse(v.RequestID)
		if !ok || tick.Before(from) || !tick.Before(to) {
			continue
		}
		if seen[v.RequestID] {
			out.twice++
			continue
		}
		seen[v.RequestID] = true
		created, err := time.Parse(time.RFC3339Nano, v.CreatedAt)
		if err != nil {
			return ticksLate{}, fmt.Errorf("run %s: created_at: %w", v.ID, err)
		}
		l := created.Sub(tick)
		out.late = append(out.late, l)
		out.runs++
		if f, ok := first[tick]; !ok || l < f {
			first[tick] = l
		}
		last[tick] = max(last[tick], l)
	}
	slices.Sort(out.late)
	var spreads []time.Duration
	for t, f := range first {
		spreads = append(spreads, last[t]-f)
	}
	slices.Sort(spreads)
	if len(spreads) > 0 {
		out.spread = spreads[len(spreads)/2]
	}
	return out, nil
}

// pctCore formats a share of one core.
func pctCore(v float64) string { return fmt.Sprintf("%.2f%% of a core", 100*v) }
