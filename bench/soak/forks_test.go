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
		s.w.forks[fmt.Sprintf("fork-%d", i)] = &forkSent{src: src, from: forkFrom, runID: fork.ID}
	}
	return s
}

// mailForkState is a soak with one completed mail run forked from after
// its send, and once (with leave) from the send: the latter sent its own
// mail.
func mailForkState() *state {
	s := newState()
	s.w.forks = map[string]*forkSent{}
	src := &submission{reqID: "req-1", kind: kindByFlow("soak_mail"), runID: "run-1", input: map[string]any{"id": "req-1"}}
	s.w.subs = append(s.w.subs, src)
	for _, p := range []struct {
		id, from string
		effects  bool
	}{{"fork-1", "sent", false}, {"fork-2", "send", true}} {
		run := "run-" + p.id
		s.f.forked = append(s.f.forked, apitypes.Run{ID: run, Flow: "soak_mail", Phase: apitypes.PhaseCompleted,
			Input: json.RawMessage(fmt.Sprintf(`{"id":%q}`, p.id)), Output: json.RawMessage(fmt.Sprintf(`{"id":%q,"sent":true}`, p.id)),
			ForkedFrom: &apitypes.ForkRef{RunID: src.runID, Node: p.from, Visit: 1}, StartedBy: "fork:" + src.runID + ":" + p.from + "@1"})
		s.w.forks[p.id] = &forkSent{src: src, from: p.from, effects: p.effects, runID: run}
	}
	s.f.records.mailRuns["run-fork-2"] = 1
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
	resent := mailForkState()
	resent.f.records.mailRuns["run-fork-1"] = 1
	elsewhere := mailForkState()
	elsewhere.f.forked[0].ForkedFrom.Node = "prep"
	// Kills failed a fork as they may any run: its task lost its lease
	// too often. A fork that failed otherwise is a violation.
	killed, failed := forkState(3), forkState(3)
	for _, s := range []*state{killed, failed} {
		s.f.forked[0].Phase, s.f.forked[0].Output = apitypes.PhaseFailed, nil
		s.f.forked[0].Error = &apitypes.RunError{Code: "E_ATTEMPTS_EXCEEDED", Message: "the task lost its lease 5 times"}
	}
	killed.f.events[killed.f.forked[0].ID] = []apitypes.Event{{Type: "leased"}, {Type: "expired"}, {Type: "failed"}}
	return []violationCase{
		{"forks: a fork kills failed by design", check(killed), checkForks, ""},
		{"forks: a fork failed without a lost lease", check(failed), checkForks, "want the source's output"},
		{"forks: each copied its source's results", check(forkState(3)), checkForks, ""},
		{"forks: mail forks sent only where they had leave", check(mailForkState()), checkForks, ""},
		{"forks: a copied send ran again", check(resent), checkForks, "a copied send ran again"},
		{"forks: a fork from a node not asked", check(elsewhere), checkForks, "is not a fork the soak asked for"},
		{"forks: a copied node run again", check(rerun), checkForks, "want the source's output"},
		{"forks: an answered fork not in the store", check(lost), checkForks, "was answered and is not in the store"},
		{"forks: a fork of an unknown run", check(stranger), checkForks, "is not a fork the soak asked for"},
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
	twice := resolved("send@1.unknown.1")
	twice.f.records.once["req-1"] = 2
	return []violationCase{
		{"resolves: each unknown wait resolved once", check(resolved("send@1.unknown.1", "send@1.unknown.2")), checkResolves, ""},
		{"resolves: a call's effect twice", check(twice), checkResolves, "had the effect of the call for req-1 2 times"},
		{"resolves: a wait resolved twice", check(resolved("send@1.unknown.1", "send@1.unknown.1")), checkResolves, "resolved twice"},
	}
}

// redriveState is a completed run of the redrive kind whose timeline is
// evs.
func redriveState(evs ...apitypes.Event) *state {
	s := newState()
	s.f.runs = append(s.f.runs, apitypes.Run{ID: "run-1", Flow: "soak_redrive", Phase: apitypes.PhaseCompleted})
	s.f.events["run-1"] = evs
	return s
}

func redriveViolationCases() []violationCase {
	check := func(s *state) func() (*world, *final) { return func() (*world, *final) { return s.w, s.f } }
	ev := func(typ string, detail map[string]any) apitypes.Event {
		return apitypes.Event{Type: typ, Node: "try", Detail: detail}
	}
	park := ev("waiting", map[string]any{"for": "exhausted", "wait": "try@1.exhausted.1"})
	redrove := ev("redriven", map[string]any{"wait": "try@1.exhausted.1"})
	retry, expired := ev("retry_scheduled", nil), ev("expired", nil)
	return []violationCase{
		{"redrives: parked and redriven once", check(redriveState(retry, park, redrove)), checkRedrives, ""},
		{"redrives: kills spent the planned failures unseen", check(redriveState(expired, expired, expired, retry)), checkRedrives, ""},
		{"redrives: completed alone with failures to spare", check(redriveState(expired, retry)), checkRedrives, "completed without a redrive"},
		{"redrives: redriven twice", check(redriveState(retry, park, redrove, redrove)), checkRedrives, "redriven 2 times"},
	}
}
