package main

import (
	"encoding/json"
	"fmt"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// pingState is a soak whose pings 1..sent were sent, those in accepted
// answered accepted, and whose trigger started a run, completed with its
// ping echoed, for each of started.
func pingState(sent int, accepted, started []int) *state {
	s := newState()
	ev := s.w.sent()
	ev.nextPing = sent
	for _, n := range accepted {
		ev.pings[n] = true
	}
	for _, n := range started {
		s.f.triggered = append(s.f.triggered, pingRun(fmt.Sprintf("p%d", n), n))
	}
	return s
}

func pingRun(id string, n int) apitypes.Run {
	out, _ := json.Marshal(map[string]any{"ping": n})
	return apitypes.Run{ID: id, Flow: pingFlow, RequestID: "event:" + pingID(n) + ":" + pingTrigger, StartedBy: "trigger:" + pingTrigger,
		Phase: apitypes.PhaseCompleted, Output: out}
}

func eventViolationCases() []violationCase {
	check := func(s *state) func() (*world, *final) { return func() (*world, *final) { return s.w, s.f } }
	twice := pingState(3, []int{1, 2, 3}, []int{1, 2, 3})
	twice.f.triggered = append(twice.f.triggered, pingRun("again", 2))
	wrong := pingState(3, []int{1, 2, 3}, []int{1, 2, 3})
	wrong.f.triggered[1].Output = json.RawMessage(`{"ping":7}`)
	stranger := pingState(3, []int{1, 2, 3}, []int{1, 2, 3})
	stranger.f.triggered[0].StartedBy = "trigger:other"
	// Kills may take a task's lease more often than it may lose it: its
	// run fails E_ATTEMPTS_EXCEEDED, as any kind's may; without a lease
	// lost in its timeline, the same end is a violation.
	killed := pingState(3, []int{1, 2, 3}, []int{1, 2, 3})
	killed.f.triggered[2].Phase, killed.f.triggered[2].Output = apitypes.PhaseFailed, nil
	killed.f.triggered[2].Error = &apitypes.RunError{Code: "E_ATTEMPTS_EXCEEDED", Message: "the task lost its lease 5 times"}
	unkilled := pingState(3, []int{1, 2, 3}, []int{1, 2, 3})
	unkilled.f.triggered[2] = killed.f.triggered[2]
	killed.f.events = map[string][]apitypes.Event{"p3": {{Type: "leased"}, {Type: "expired"}}}
	return []violationCase{
		{"events: each accepted ping started one run", check(pingState(3, []int{1, 2, 3}, []int{1, 2, 3})), checkEvents, ""},
		// A ping whose answer a kill took may have started its run or not.
		{"events: an unanswered ping with or without its run", check(pingState(4, []int{1, 3}, []int{1, 2, 3})), checkEvents, ""},
		{"events: a ping with two runs", check(twice), checkEvents, "ping 2 started two runs"},
		{"events: an accepted ping without its run", check(pingState(3, []int{1, 2, 3}, []int{1, 3})), checkEvents, "ping 2 was accepted and started no run"},
		{"events: a run for a ping never sent", check(pingState(2, []int{1, 2}, []int{1, 2, 5})), checkEvents, "for a ping sent"},
		{"events: a run with another ping's output", check(wrong), checkEvents, "want the ping echoed"},
		{"events: a run of another trigger", check(stranger), checkEvents, "is not a run of trigger soak_ping"},
		{"events: none accepted", check(pingState(0, nil, nil)), checkEvents, "held over nothing"},
		{"events: a ping's run failed by kills taking its lease", check(killed), checkEvents, ""},
		{"events: a ping's run failed so without a lease lost", check(unkilled), checkEvents, "want the ping echoed"},
	}
}
