package main

import (
	"strings"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// wasteState is a soak_agent run created at t0 whose turns were journaled
// at t0+1s and t0+3s, the second reporting cut asks cut off at its
// reservation of 5 each, with the daemon killed at each of kills.
func wasteState(cut int, kills ...time.Time) *state {
	s := newState()
	turn2 := map[string]any{"turn": 2.0, "reserved": 5.0}
	if cut > 0 {
		turn2["cut"], turn2["cut_reserved"] = float64(cut), float64(5*cut)
	}
	v := s.run("r1", agentKind.flow, map[string]any{"id": "req-1"}, apitypes.PhaseCompleted,
		at(ev("agent_turn", "a", map[string]any{"turn": 1.0, "reserved": 5.0}), t0.Add(time.Second)),
		at(ev("agent_turn", "a", turn2), t0.Add(3*time.Second)))
	v.CreatedAt = t0.Format(time.RFC3339Nano)
	v.Progress = &apitypes.Progress{Agents: []apitypes.Agent{{Node: "a", Visit: 1, Turns: 2, CutTurns: cut, CutReserved: int64(5 * cut)}}}
	for _, k := range kills {
		s.w.kills = append(s.w.kills, killAt{at: k})
	}
	s.f.records.hostOf = map[string]int{}
	return s
}

func wasteViolationCases() []violationCase {
	return []violationCase{
		{"agent waste within the kills since the previous turn", func() (*world, *final) {
			s := wasteState(2, t0.Add(1500*time.Millisecond), t0.Add(2*time.Second))
			return s.w, s.f
		}, checkWaste, ""},
		{"agent waste reported with no kill since the previous turn", func() (*world, *final) {
			s := wasteState(1, t0.Add(500*time.Millisecond), t0.Add(4*time.Second))
			return s.w, s.f
		}, checkWaste, "lost its lease 0 times since its previous turn"},
		{"agent waste of more asks than kills", func() (*world, *final) {
			s := wasteState(2, t0.Add(2*time.Second))
			return s.w, s.f
		}, checkWaste, "reports 2 asks cut off (10 reserved), and its daemons lost its lease 1 times"},
		{"agent waste not at the turn's reservation", func() (*world, *final) {
			s := wasteState(1, t0.Add(2*time.Second))
			s.f.events["r1"][1].Detail["cut_reserved"] = 7.0
			s.f.runs[0].Progress.Agents[0].CutReserved = 7
			return s.w, s.f
		}, checkWaste, "reports 1 asks cut off at 7 reserved, not 1 at its reservation of 5"},
		{"agent waste the API reports otherwise", func() (*world, *final) {
			s := wasteState(1, t0.Add(2*time.Second))
			s.f.runs[0].Progress.Agents[0].CutTurns = 3
			return s.w, s.f
		}, checkWaste, "the API reports agent a's waste as 3 asks"},
		{"agent turn asked again within the tokens it reports", func() (*world, *final) {
			s := wasteState(1, t0.Add(2*time.Second))
			s.askTwice(100)
			return s.w, s.f
		}, checkWaste, ""},
		{"agent turn asked again past the tokens it reports", func() (*world, *final) {
			s := wasteState(1, t0.Add(2*time.Second))
			s.askTwice(2000)
			return s.w, s.f
		}, checkWaste, "billed 500 tokens for turn 2's asks beyond the journaled one, past the 250"},
		{"fleet agent waste within the leases it lost", func() (*world, *final) {
			s := wasteState(1)
			s.f.records.hostOf = map[string]int{"h1": 0}
			s.f.events["r1"] = append(s.f.events["r1"][:1], at(ev("expired", "a", nil), t0.Add(2*time.Second)), s.f.events["r1"][1])
			return s.w, s.f
		}, checkWaste, ""},
		{"fleet agent waste past the leases it lost", func() (*world, *final) {
			s := wasteState(1, t0.Add(2*time.Second))
			s.f.records.hostOf = map[string]int{"h1": 0}
			return s.w, s.f
		}, checkWaste, "lost its lease 0 times"},
	}
}

// askTwice has the model server read wasteState's second turn twice, in
// requests of size bytes, and the turn journal the tokens of one.
func (s *state) askTwice(size int) {
	head := `{"messages":[{"role":"user","content":"` + agentPrompt + `req-1"},{"role":"assistant"}],"pad":"`
	body := []byte(head + strings.Repeat("x", size-len(head)-2) + `"}`)
	s.f.modelRequests = append(s.f.modelRequests, llmtest.Request{Body: body}, llmtest.Request{Body: body})
	d := s.f.events["r1"][1].Detail
	d["input_tokens"], d["output_tokens"] = float64((size+3)/4), 0.0
}
