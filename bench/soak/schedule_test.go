package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// tickEpoch is the first tick of the hand-built tick states.
var tickEpoch = time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)

// tickState is a soak of chaos seconds whose schedule fired the ticks at
// the given offsets (seconds after tickEpoch), each run completed with
// its tick echoed, and recorded the skips given.
func tickState(chaos time.Duration, fired []int, skips map[int]string) *state {
	s := newState()
	s.f.chaos = chaos
	for i, off := range fired {
		s.f.scheduled = append(s.f.scheduled, tickRun(fmt.Sprintf("t%d", i), tickEpoch.Add(time.Duration(off)*time.Second)))
	}
	for off, reason := range skips {
		s.w.skips[skipKey{tickEpoch.Add(time.Duration(off) * time.Second), reason}] = true
	}
	return s
}

func tickRun(id string, t time.Time) apitypes.Run {
	at := t.Format(time.RFC3339)
	out, _ := json.Marshal(map[string]any{"tick": at})
	return apitypes.Run{ID: id, Flow: tickFlow, RequestID: "schedule:" + tickSchedule + ":" + at, StartedBy: "schedule:" + tickSchedule,
		Phase: apitypes.PhaseCompleted, Output: out}
}

func seconds(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func tickViolationCases() []violationCase {
	check := func(s *state) func() (*world, *final) { return func() (*world, *final) { return s.w, s.f } }
	twice := tickState(10*time.Second, seconds(0, 10), nil)
	twice.f.scheduled = append(twice.f.scheduled, tickRun("again", tickEpoch.Add(4*time.Second)))
	wrong := tickState(10*time.Second, seconds(0, 10), nil)
	wrong.f.scheduled[3].Output = json.RawMessage(`{"tick":"yesterday"}`)
	stranger := tickState(10*time.Second, seconds(0, 10), nil)
	stranger.f.scheduled[5].StartedBy = "schedule:other"
	// Ticks 3 to 6 skipped in one pass: one missed while away, three
	// while the previous run still ran, both recorded at tick 3.
	skipped := tickState(10*time.Second, append(seconds(0, 2), seconds(7, 10)...), map[int]string{3: "catch_up (1 ticks)"})
	skipped.w.skips[skipKey{tickEpoch.Add(3 * time.Second), "overlap (3 ticks)"}] = true
	return []violationCase{
		{"ticks: every second fired once", check(tickState(10*time.Second, seconds(0, 10), nil)), checkTicks, ""},
		{"ticks: a skipped pass covers its ticks", check(skipped), checkTicks, ""},
		{"ticks: a tick with two runs", check(twice), checkTicks, "fired twice"},
		{"ticks: a tick missing", check(tickState(10*time.Second, append(seconds(0, 4), seconds(6, 10)...), nil)), checkTicks,
			"tick 2026-12-02T20:00:05Z has no run and no recorded skip"},
		{"ticks: a skip covers fewer ticks than are missing", check(tickState(10*time.Second, append(seconds(0, 4), seconds(7, 10)...),
			map[int]string{5: "overlap (1 ticks)"})), checkTicks, "tick 2026-12-02T20:00:06Z has no run"},
		{"ticks: a run with another tick's output", check(wrong), checkTicks, "want the tick echoed"},
		{"ticks: a run of another schedule", check(stranger), checkTicks, "is not a firing of soak_tick"},
		{"ticks: none fired", check(tickState(10*time.Second, nil, nil)), checkTicks, "no tick of schedule soak_tick"},
		{"ticks: fired over a sliver of the chaos", check(tickState(time.Minute, seconds(0, 10), nil)), checkTicks, "want half of it at least"},
	}
}

func TestSkippedTicks(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]int{"overlap (3 ticks)": 3, "catch_up (1 ticks)": 1, "E_BAD_INPUT: no": 1, "input: x (2 ticks) y": 1} {
		if got := skippedTicks(reason); got != want {
			t.Errorf("skippedTicks(%q) = %d, want %d", reason, got, want)
		}
	}
}
