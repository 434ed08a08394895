package main

import (
	"encoding/json"
	"fmt"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// forkState is a soak with n completed echo runs, each forked once from
// c@1 with its output copied, each fork answered to the client.
func forkState(n int) *state {
	s := newState()
	s.w.forks = map[string]*forkSent{}
	echo := kindByFlow("soak_echo")
	for i := range n {
		src := &submission{reqID: fmt.Sprintf("req-%d", i), kind: echo, runID: fmt.Sprintf("run-%d", i),
			input: map[string]any{"id": fmt.Sprintf("req-%d", i), "n": float64(i)}}
		s.w.subs = append(s.w.subs, src)
		out, _ := json.Marshal(map[string]any{"id": src.reqID, "n2": 2 * i})
		fork := apitypes.Run{ID: fmt.Sprintf("fork-run-%d", i), Flow: echo.flow, Phase: apitypes.PhaseCompleted, Output: out,
			ForkedFrom: &apitypes.ForkRef{RunID: src.runID, Node: forkFrom, Visit: 1}, StartedBy: "fork:" + src.runID + ":c@1"}
		s.f.forked = append(s.f.forked, fork)
		s.w.forks[fmt.Sprintf("fork-%d", i)] = &forkSent{src: src, runID: fork.ID}
	}
	return s
}

func forkViolationCases() []violationCase {
	check := func(s *state) func() (*world, *final) { return func() (*world, *final) { return s.w, s.f } }
	rerun := forkState(3)
	rerun.f.forked[1].Output = json.RawMessage(`{"id":"req-1","n2":1002}`) // b ran again on the new input
	lost := forkState(3)
	lost.f.forked = lost.f.forked[:2]
	stranger := forkState(3)
	stranger.f.forked[0].ForkedFrom = &apitypes.ForkRef{RunID: "run-x", Node: forkFrom, Visit: 1}
	return []violationCase{
		{"forks: each copied its source's results", check(forkState(3)), checkForks, ""},
		{"forks: a copied node run again", check(rerun), checkForks, "want the source's output"},
		{"forks: an answered fork not in the store", check(lost), checkForks, "was answered and is not in the store"},
		{"forks: a fork of an unknown run", check(stranger), checkForks, "is not a fork of an echo run"},
	}
}

func resolveViolationCases() []violationCase {
	check := func(s *state) func() (*world, *final) { return func() (*world, *final) { return s.w, s.f } }
	resolved := func(waits ...string) *state {
		s := newState()
		s.w.subs = append(s.w.subs, &submission{reqID: "req-1", kind: askKind, runID: "run-1", input: map[string]any{"id": "req-1"}})
		for _, w := range waits {
			s.f.events["run-1"] = append(s.f.events["run-1"], apitypes.Event{Type: "resolved", Detail: map[string]any{"wait": w}})
		}
		return s
	}
	return []violationCase{
		{"resolves: each unknown wait resolved once", check(resolved("send@1.unknown.1", "send@1.unknown.2")), checkResolves, ""},
		{"resolves: a wait resolved twice", check(resolved("send@1.unknown.1", "send@1.unknown.1")), checkResolves, "resolved twice"},
	}
}
