package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/bench/internal/ticks"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// The soak registers one schedule beside the workload, firing every
// second through every kill and restart; the schedule-decided and
// schedule-fired failpoints kill the daemon between a pass's decision and
// its run, and between the run and the stored next tick. Its promise: each
// tick fires exactly once or is recorded skipped. The store keeps only a
// schedule's latest firings, so the runs are the record of what fired (a
// firing's request id names its tick), and a watcher actor keeps every
// skipped firing it reads while the soak runs. Its ticks overlap: under
// the workload's backlog a tick's run may wait in the queue for seconds,
// and with the default overlap policy every tick meanwhile would be
// skipped, never reaching the failpoints; so every tick fires, and a
// skip is one missed while away (past the minute of grace) or refused
// for good.

const invTicks = "every tick fired exactly once or was recorded skipped"

// tickSchedule and tickFlow: the schedule and the flow each tick starts,
// which echoes the tick it was given.
const (
	tickSchedule = "soak_tick"
	tickFlow     = "soak_tick"
	tickPeriod   = time.Second
)

var tickSrc = fmt.Sprintf(`
flow(
    name = %[2]q,
    nodes = [
        task("echo", tool = "testkit.echo", args = lambda ctx: {"tick": ctx.input["tick"]}),
    ],
)

schedule(%[1]q, flow = %[2]q, every = "1s", overlap = "allow", input = lambda tick: {"tick": tick["time"]})
`, tickSchedule, tickFlow)

// skipKey is one skipped firing as the schedule records it: a tick and
// the reason, which for a skip of several ticks says how many.
type skipKey struct {
	tick   time.Time
	reason string
}

// watchSkips records the skipped firings of the soak's schedule.
func watchSkips(ctx context.Context, w *world, c *client.Client) {
	s, err := c.Schedule(ctx, tickSchedule)
	if err != nil {
		return // the daemon is down: the next look reads what it recorded
	}
	w.noteSkips(s.Firings)
}

func (w *world) noteSkips(fs []apitypes.ScheduleFiring) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range fs {
		if f.Skipped != "" {
			w.skips[skipKey{f.Tick.UTC(), f.Skipped}] = true
		}
	}
}

// pauseTicks stops the schedule before the drain, so the drain waits for
// runs that exist, and reads its firings one last time.
func pauseTicks(ctx context.Context, w *world, c *client.Client) error {
	s, err := c.SchedulePause(ctx, tickSchedule, true, "the soak drains")
	if err != nil {
		return fmt.Errorf("pausing schedule %s: %w", tickSchedule, err)
	}
	w.noteSkips(s.Firings)
	return nil
}

var skippedTicksRE = regexp.MustCompile(`\((\d+) ticks?\)$`)

// skippedTicks is how many ticks a skipped firing covers: "overlap (3
// ticks)" three, from its tick on; a skip of one tick says no count.
func skippedTicks(reason string) int {
	if m := skippedTicksRE.FindStringSubmatch(reason); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 1
}

// checkTicks: every run a schedule started is the soak's schedule's, says
// so, and has one tick to itself; every tick from the first fired to the
// last has a run or a recorded skip; a run that ended completed with its
// tick; and the ticks span at least half of the chaos, or the invariant
// held over nothing.
func checkTicks(w *world, f *final) []string {
	var bad []string
	byTick := map[time.Time]string{}
	for _, v := range f.scheduled {
		name, t, ok := ticks.Parse(v.RequestID)
		if !ok || name != tickSchedule || v.StartedBy != "schedule:"+tickSchedule || v.Flow != tickFlow {
			bad = append(bad, fmt.Sprintf("run %s (%s, request id %q, started by %q) is not a firing of %s", v.ID, v.Flow, v.RequestID, v.StartedBy, tickSchedule))
			continue
		}
		t = t.UTC()
		if other, dup := byTick[t]; dup {
			bad = append(bad, fmt.Sprintf("tick %s fired twice: runs %s and %s", t.Format(time.RFC3339), other, v.ID))
			continue
		}
		byTick[t] = v.ID
		_, at, _ := strings.Cut(strings.TrimPrefix(v.RequestID, "schedule:"), ":")
		if v.Phase.Terminal() && !outputEquals(&v, map[string]any{"tick": at}) {
			bad = append(bad, fmt.Sprintf("run %s of tick %s ended %s with output %s, want the tick echoed", v.ID, at, v.Phase, v.Output))
		}
	}
	first, last, ok := tickSpan(byTick)
	if !ok {
		return append(bad, "no tick of schedule "+tickSchedule+" started a run")
	}
	if span := last.Sub(first); span < f.chaos/2 {
		bad = append(bad, fmt.Sprintf("the ticks fired span %v of a %v chaos phase, want half of it at least", span, f.chaos))
	}
	skipped := w.skippedSet()
	for t := first; !t.After(last); t = t.Add(tickPeriod) {
		if byTick[t] == "" && !skipped[t] {
			bad = append(bad, fmt.Sprintf("tick %s has no run and no recorded skip", t.Format(time.RFC3339)))
		}
	}
	return bad
}

// skippedSet is every tick a recorded skip covers. A pass records its
// skips of one schedule at the same tick, each reason with its count, and
// they are consecutive: their counts add up from that tick on.
func (w *world) skippedSet() map[time.Time]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := map[time.Time]int{}
	for k := range w.skips {
		n[k.tick] += skippedTicks(k.reason)
	}
	out := map[time.Time]bool{}
	for t, c := range n {
		for i := range c {
			out[t.Add(time.Duration(i)*tickPeriod)] = true
		}
	}
	return out
}

func tickSpan(byTick map[time.Time]string) (first, last time.Time, ok bool) {
	ts := make([]time.Time, 0, len(byTick))
	for t := range byTick {
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return time.Time{}, time.Time{}, false
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts[0], ts[len(ts)-1], true
}

func ticksSummary(w *world, f *final) string {
	byTick := map[time.Time]bool{}
	for _, v := range f.scheduled {
		if _, t, ok := ticks.Parse(v.RequestID); ok {
			byTick[t.UTC()] = true
		}
	}
	w.mu.Lock()
	reasons := map[string]int{}
	for k := range w.skips {
		reason, _, _ := strings.Cut(k.reason, " (")
		reasons[reason] += skippedTicks(k.reason)
	}
	w.mu.Unlock()
	skipped := "none skipped"
	if n := sumCounts(reasons); n > 0 {
		skipped = fmt.Sprintf("%d skipped as recorded (%s)", n, countsLine(reasons))
	}
	return fmt.Sprintf("%d ticks fired once each through %d kills (schedule-decided %d, schedule-fired %d), none twice, none missing; %s",
		len(byTick), sumCounts(f.kills), f.kills["schedule-decided"], f.kills["schedule-fired"], skipped)
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
