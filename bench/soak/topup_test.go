package main

import (
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// topupState is a completed topup run r1 that asked twice for budget, was
// raised by 3 and 4, and spent 3 and 4 on its turns of reservations 5 and
// 6: within its budget of 3 + 3 + 4 at each point.
func topupState() *state {
	s := newState()
	v := s.run("r1", topupKind.flow, map[string]any{"id": "req-1"}, apitypes.PhaseCompleted,
		ev("budget_asked", "a", map[string]any{"wait": "a@1.budget.1"}),
		ev("budget_added", "", map[string]any{"add": 3.0, "before": 3.0, "budget": 6.0}),
		ev("agent_turn", "a", map[string]any{"turn": 1.0, "reserved": 5.0, "cost": 3.0}),
		ev("budget_asked", "a", map[string]any{"wait": "a@1.budget.2"}),
		ev("budget_added", "", map[string]any{"add": 4.0, "before": 6.0, "budget": 10.0}),
		ev("agent_turn", "a", map[string]any{"turn": 2.0, "reserved": 6.0, "cost": 4.0}))
	v.Budget, v.Spent = 10, 7
	return s
}

func topupViolationCases() []violationCase {
	detail := func(s *state, i int) map[string]any { return s.f.events["r1"][i].Detail }
	return []violationCase{
		{"topup run within its budget and raises", func() (*world, *final) {
			s := topupState()
			return s.w, s.f
		}, checkTopups, ""},
		{"topup turn reserved past its budget", func() (*world, *final) {
			s := topupState()
			detail(s, 2)["reserved"] = 7.0
			return s.w, s.f
		}, checkTopups, "reserved 7 with 0 spent of a budget of 6"},
		{"topup turn spent past its budget", func() (*world, *final) {
			s := topupState()
			detail(s, 2)["cost"], detail(s, 5)["cost"] = 7.0, 0.0
			return s.w, s.f
		}, checkTopups, "took its spend to 7, past its budget of 6"},
		{"topup raise its timeline does not add up to", func() (*world, *final) {
			s := topupState()
			detail(s, 4)["before"] = 5.0
			return s.w, s.f
		}, checkTopups, "its timeline had it at 6"},
		{"topup run's budget not its raises", func() (*world, *final) {
			s := topupState()
			s.f.runs[0].Budget = 12
			return s.w, s.f
		}, checkTopups, "its timeline gives it 10"},
		{"topup run completed without asking", func() (*world, *final) {
			s := topupState()
			evs := s.f.events["r1"]
			s.f.events["r1"] = []apitypes.Event{evs[1], evs[2], evs[4], evs[5]}
			return s.w, s.f
		}, checkTopups, "without asking for budget"},
		{"topup run failed by an error kills cannot cause", func() (*world, *final) {
			s := topupState()
			s.f.runs[0].Phase, s.f.runs[0].Error = apitypes.PhaseFailed, &apitypes.RunError{Code: "E_BUDGET_EXHAUSTED"}
			return s.w, s.f
		}, checkTopups, "topup run r1 failed: E_BUDGET_EXHAUSTED"},
		{"cancelled agent run's turns charged", func() (*world, *final) {
			s := topupState()
			s.f.runs[0].Phase = apitypes.PhaseCancelled
			return s.w, s.f
		}, checkBudget, ""},
		{"cancelled agent run spent more than its turns charged", func() (*world, *final) {
			s := topupState()
			s.f.runs[0].Phase, s.f.runs[0].Spent = apitypes.PhaseCancelled, 8
			return s.w, s.f
		}, checkBudget, "records 8 spent, its timeline charges 7"},
		{"completed agent's turns charged once, by its node's end", func() (*world, *final) {
			s := topupState()
			s.f.events["r1"] = append(s.f.events["r1"], ev("node_completed", "a", map[string]any{"cost": 7.0}))
			return s.w, s.f
		}, checkBudget, ""},
	}
}
