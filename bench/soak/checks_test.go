package main

import (
	"encoding/json"
	"fmt"
	"os/user"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

type violationCase struct {
	name  string
	build func() (*world, *final)
	check func(*world, *final) []string
	want  string // "" means the state is clean
}

// state is a client world and an end-of-soak state built by hand.
type state struct {
	w *world
	f *final
}

func newState() *state {
	return &state{
		w: &world{byReq: map[string]*submission{}, inline: map[string][]string{}, counts: map[string]int{}, skips: map[skipKey]bool{}},
		f: &final{events: map[string][]apitypes.Event{}, children: map[string][]apitypes.Run{}, kills: map[string]int{},
			records: &records{mails: map[string]int{}, mailRuns: map[string]int{}, notes: map[string]string{}, applied: map[string]int{}, once: map[string]int{}}},
	}
}

func owner() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.Username
}

// run adds a run of flow id with input in, accepted by the client, in phase
// p with the timeline evs.
func (s *state) run(id, flow string, in map[string]any, p apitypes.Phase, evs ...apitypes.Event) *apitypes.Run {
	req := "req-" + id
	sub := &submission{reqID: req, kind: kindByFlow(flow), input: in, runID: id}
	s.w.subs = append(s.w.subs, sub)
	s.w.byReq[req] = sub
	b, _ := json.Marshal(in)
	s.f.runs = append(s.f.runs, apitypes.Run{ID: id, Flow: flow, Owner: owner(), RequestID: req, Phase: p, Input: b})
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
		evs[i].RunID = id
	}
	s.f.events[id] = evs
	return &s.f.runs[len(s.f.runs)-1]
}

func ev(typ, node string, detail map[string]any) apitypes.Event {
	return apitypes.Event{Type: typ, Node: node, Detail: detail}
}

func violationCases() []violationCase {
	leased := func(holder string) apitypes.Event { return ev("leased", "a", map[string]any{"holder": holder}) }
	return []violationCase{
		{"lease held twice", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted,
				leased("h1"), leased("h2"), ev("completed", "", nil))
			return s.w, s.f
		}, checkLeases, "leased again"},
		{"lease renewed unheld", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted,
				leased("h1"), ev("retry_scheduled", "a", nil), ev("renewed", "a", nil), leased("h1"), ev("completed", "", nil))
			return s.w, s.f
		}, checkLeases, "renewed"},
		{"leases released in turn", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted,
				leased("h1"), ev("renewed", "a", nil), ev("expired", "a", nil), leased("h2"), ev("retry_scheduled", "a", nil), leased("h2"), ev("completed", "", nil))
			return s.w, s.f
		}, checkLeases, ""},
		{"mail twice", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_mail", map[string]any{"id": "req-r1"}, apitypes.PhaseCompleted)
			s.f.records.mailRuns["r1"] = 2
			return s.w, s.f
		}, checkMailOnce, "sent 2 mails"},
		{"mail of no run", func() (*world, *final) {
			s := newState()
			s.f.records.mailRuns["ghost"] = 1
			return s.w, s.f
		}, checkMailOnce, "not in the store"},
		{"send lost in flight ends silent", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_mail", map[string]any{"id": "req-r1"}, apitypes.PhaseCancelled,
				ev("tool_started", "send", nil), ev("expired", "send", nil), ev("cancel_requested", "", nil), ev("cancelled", "", nil))
			return s.w, s.f
		}, checkUnknown, "without saying E_OUTCOME_UNKNOWN"},
		{"send cancelled in its lease", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_mail", map[string]any{"id": "req-r1"}, apitypes.PhaseCancelled,
				ev("tool_started", "send", nil), ev("cancel_requested", "", nil), ev("cancelled", "", nil))
			return s.w, s.f
		}, checkUnknown, ""},
		{"sent mail hidden by an error", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_mail", map[string]any{"id": "req-r1"}, apitypes.PhaseCompleted,
				ev("tool_started", "send", nil), ev("node_failed", "send", map[string]any{"code": "E_TOOL"}))
			s.f.records.mailRuns["r1"] = 1
			return s.w, s.f
		}, checkUnknown, "the mail was sent"},
		{"completed send without mail", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_mail", map[string]any{"id": "req-r1"}, apitypes.PhaseCompleted,
				ev("tool_started", "send", nil), ev("node_completed", "send", nil))
			return s.w, s.f
		}, checkUnknown, "no mail of it"},
		{"unknown without a start", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_mail", map[string]any{"id": "req-r1"}, apitypes.PhaseCompleted,
				ev("node_failed", "send", map[string]any{"code": engine.CodeOutcomeUnknown}))
			return s.w, s.f
		}, checkUnknown, "without a durable start"},
		{"unknown said properly", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_mail", map[string]any{"id": "req-r1"}, apitypes.PhaseCompleted,
				ev("tool_started", "send", nil), ev("expired", "send", nil), ev("node_failed", "send", map[string]any{"code": engine.CodeOutcomeUnknown}))
			s.f.records.mailRuns["r1"] = 1
			return s.w, s.f
		}, checkUnknown, ""},
		{"budget overspent", func() (*world, *final) {
			s := newState()
			v := s.run("r1", "soak_budget", map[string]any{"id": "req-r1"}, apitypes.PhaseCompleted,
				ev("node_completed", "c0", map[string]any{"cost": 20.0}), ev("node_completed", "c1", map[string]any{"cost": 5.0}))
			v.Budget, v.Spent = 20, 25
			return s.w, s.f
		}, checkBudget, "spent 25 of a budget of 20"},
		{"budget timeline disagrees", func() (*world, *final) {
			s := newState()
			v := s.run("r1", "soak_budget", map[string]any{"id": "req-r1"}, apitypes.PhaseCompleted,
				ev("node_completed", "c0", map[string]any{"cost": 3.0}))
			v.Budget, v.Spent = 20, 8
			return s.w, s.f
		}, checkBudget, "timeline charges"},
		{"cancelled run resumed", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted,
				leased("h1"), ev("cancel_requested", "", nil), ev("expired", "a", nil), leased("h2"), ev("node_completed", "a", nil), ev("completed", "", nil))
			s.w.subs[0].cancel = []apitypes.CancelAnswer{apitypes.CancelRequested}
			return s.w, s.f
		}, checkCancels, "resumed its work"},
		{"cancelled unasked", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCancelled, leased("h1"), ev("cancelled", "", nil))
			return s.w, s.f
		}, checkCancels, "nobody cancelled it"},
		{"cancel finished in its lease", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCancelled,
				leased("h1"), ev("cancel_requested", "", nil), ev("node_completed", "a", nil), ev("cancelled", "", nil))
			s.w.subs[0].cancel = []apitypes.CancelAnswer{apitypes.CancelRequested}
			return s.w, s.f
		}, checkCancels, ""},
		{"accepted run missing", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted)
			s.f.runs = nil
			return s.w, s.f
		}, checkLost, "not in the store"},
		{"run never ends", func() (*world, *final) {
			s := newState()
			s.f.drain = drainReport{Began: t0, Took: time.Minute, Quiet: 20 * time.Second, Quiescent: true}
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseRunning)
			return s.w, s.f
		}, checkLost, "still running"},
		{"run stuck when nothing moved", func() (*world, *final) {
			s := newState()
			s.f.drain = drainReport{Began: t0, Took: time.Minute, Quiet: 20 * time.Second, Quiescent: true}
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseQueued, at(ev("queued", "a", nil), t0.Add(time.Second)))
			return s.w, s.f
		}, checkLost, "stuck: still queued"},
		{"leased run made no progress during the drain", func() (*world, *final) {
			s := newState()
			s.f.drain = drainReport{Began: t0, Took: time.Minute, Quiet: 20 * time.Second, OutOfTime: true}
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseRunning, at(ev("leased", "a", nil), t0.Add(-time.Second)))
			return s.w, s.f
		}, checkLost, "no progress at all during"},
		{"run requeued before the drain waits its turn", func() (*world, *final) {
			s := newState()
			s.f.drain = drainReport{Began: t0, Took: time.Minute, Quiet: 20 * time.Second, OutOfTime: true}
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseRunning,
				at(ev("leased", "a", nil), t0.Add(-2*time.Second)), at(ev("expired", "a", nil), t0.Add(-time.Second)))
			return s.w, s.f
		}, checkLost, ""},
		{"queued run behind a backlog still moving is unfinished, not lost", func() (*world, *final) {
			s := newState()
			s.f.drain = drainReport{Began: t0, Took: time.Minute, Quiet: 20 * time.Second, OutOfTime: true}
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseQueued, at(ev("queued", "a", nil), t0.Add(-time.Second)))
			s.run("r2", "soak_echo", map[string]any{"id": "req-r2", "n": 1}, apitypes.PhaseRunning, at(ev("leased", "a", nil), t0.Add(time.Second)))
			if u := unfinished(s.w, s.f); len(u) != 2 {
				panic(fmt.Sprintf("unfinished = %q, want both runs", u))
			}
			return s.w, s.f
		}, checkLost, ""},
		{"parent never woken by its ended child", func() (*world, *final) {
			s := newState()
			s.f.drain = drainReport{Began: t0, Took: time.Minute, Quiet: 20 * time.Second}
			s.run("r1", "soak_sub", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseWaiting,
				at(ev("waiting", "call", map[string]any{"for": "child", "child": "c1"}), t0.Add(time.Second)))
			s.f.children["r1"] = []apitypes.Run{{ID: "c1", Parent: "r1", Phase: apitypes.PhaseCompleted}}
			s.f.events["c1"] = []apitypes.Event{at(ev("completed", "", nil), t0.Add(2*time.Second))}
			return s.w, s.f
		}, checkLost, "never woke it"},
		{"approval run parked on its human wait", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_wait", map[string]any{"id": "req-r1"}, apitypes.PhaseWaiting,
				at(ev("waiting", "w", map[string]any{"for": "human"}), t0.Add(-time.Hour)))
			return s.w, s.f
		}, checkLost, ""},
		{"approval run parked on something else", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_wait", map[string]any{"id": "req-r1"}, apitypes.PhaseWaiting,
				at(ev("waiting", "w", map[string]any{"for": "child", "child": "c9"}), t0.Add(-time.Hour)))
			return s.w, s.f
		}, checkLost, `parked for "child"`},
		{"input changed", func() (*world, *final) {
			s := newState()
			v := s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted)
			v.Input = json.RawMessage(`{"id":"req-r1","n":2}`)
			return s.w, s.f
		}, checkIdentity, "has input"},
		{"id changed", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted)
			s.w.subs[0].runID = "r0"
			return s.w, s.f
		}, checkIdentity, "client was told is run r0"},
		{"owner changed", func() (*world, *final) {
			s := newState()
			v := s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted)
			v.Owner = "mallory"
			return s.w, s.f
		}, checkIdentity, "owned by"},
		{"two runs one request id", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted)
			v := s.run("r2", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted)
			v.RequestID = "req-r1"
			return s.w, s.f
		}, checkDedup, "holds two runs"},
		{"note applied twice", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_note", map[string]any{"id": "req-r1", "text": "t"}, apitypes.PhaseCompleted, ev("node_completed", "put", nil))
			s.f.records.notes["soak/req-r1"] = "t"
			s.f.records.applied["soak/req-r1"] = 2
			return s.w, s.f
		}, checkIdempotent, "applied under 2 idempotency keys"},
		{"note lost", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_note", map[string]any{"id": "req-r1", "text": "t"}, apitypes.PhaseCompleted, ev("node_completed", "put", nil))
			return s.w, s.f
		}, checkIdempotent, "holds"},
		{"wrong result", func() (*world, *final) {
			s := newState()
			v := s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 2.0}, apitypes.PhaseCompleted)
			v.Output = json.RawMessage(`{"id":"req-r1","n2":5}`)
			return s.w, s.f
		}, checkOutputs, "completed with output"},
		{"right result", func() (*world, *final) {
			s := newState()
			v := s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 2.0}, apitypes.PhaseCompleted)
			v.Output = json.RawMessage(`{"id":"req-r1","n2":4}`)
			return s.w, s.f
		}, checkOutputs, ""},
		{"failpoint never fired", func() (*world, *final) {
			s := newState()
			s.run("r1", "soak_echo", map[string]any{"id": "req-r1", "n": 1}, apitypes.PhaseCompleted)
			for _, fp := range failpoints[1:] {
				s.f.kills[fp] = 1
			}
			return s.w, s.f
		}, checkCoverage, "after-accept never fired"},
		{"late result in the batch", func() (*world, *final) {
			s := fanState(`{"results":[{"slept_ms":1},{"slept_ms":9}],"late":[],"sufficient":true,"cutoff":"2026-01-01T00:00:01Z"}`, true)
			return s.w, s.f
		}, checkCohorts, "2 results in the batch, 1 children completed by the cutoff"},
		{"closed cohort without its marker", func() (*world, *final) {
			s := fanState(`{"results":[{"slept_ms":1}],"late":[{"item":9,"result":{"slept_ms":9}}],"sufficient":true,"cutoff":"2026-01-01T00:00:01Z"}`, false)
			return s.w, s.f
		}, checkCohorts, "marker false"},
		{"tool child published after the cutoff", func() (*world, *final) {
			s := toolFanState(`{"results":[{"slept_ms":1},{"slept_ms":9}],"late":[],"sufficient":false,"cutoff":"2026-01-01T00:00:01Z"}`, "published", "published")
			return s.w, s.f
		}, checkCohorts, "after the cutoff"},
		{"late tool child counted in the batch", func() (*world, *final) {
			s := toolFanState(`{"results":[{"slept_ms":1},{"slept_ms":9}],"late":[],"sufficient":false,"cutoff":"2026-01-01T00:00:01Z"}`, "published", "late")
			return s.w, s.f
		}, checkCohorts, "2 results in the batch, 1 children published"},
		{"fuse closed with a late tool child kept out", func() (*world, *final) {
			s := toolFanState(`{"results":[{"slept_ms":1}],"late":[],"sufficient":false,"cutoff":"2026-01-01T00:00:01Z"}`, "published", "late")
			return s.w, s.f
		}, checkCohorts, ""},
		{"cohort closed by its cutoff", func() (*world, *final) {
			s := fanState(`{"results":[{"slept_ms":1}],"late":[{"item":9,"result":{"slept_ms":9}}],"sufficient":true,"cutoff":"2026-01-01T00:00:01Z"}`, true)
			return s.w, s.f
		}, checkCohorts, ""},
		{"agent turn asked again after it was journaled", func() (*world, *final) {
			s := agentState(t0.Add(2*time.Second), 1)
			s.f.kills["random"] = 1
			return s.w, s.f
		}, checkAgentTurns, "asked again at"},
		{"agent turn asked twice without a kill", func() (*world, *final) {
			s := agentState(t0.Add(-time.Second), 0)
			return s.w, s.f
		}, checkAgentTurns, "asked 2 times with 0 kills"},
		{"agent turn re-asked after a kill, before its journal", func() (*world, *final) {
			s := agentState(t0.Add(-time.Second), 1)
			s.f.kills["after-tool"] = 1
			return s.w, s.f
		}, checkAgentTurns, ""},
		{"agent turn re-asked after a kill that its record does not count", func() (*world, *final) {
			s := agentState(t0.Add(-time.Second), 0)
			s.f.kills["after-tool"] = 1
			return s.w, s.f
		}, checkAgentTurns, "its record reports 0 asks cut off"},
		{"agent run failed with no lease lost", func() (*world, *final) {
			s := failedAgentState("E_ATTEMPTS_EXCEEDED")
			return s.w, s.f
		}, checkOutputs, "agent run r1 failed: E_ATTEMPTS_EXCEEDED"},
		{"agent run failed by an error kills cannot cause", func() (*world, *final) {
			s := failedAgentState("E_TOOL", ev("expired", "a", nil))
			return s.w, s.f
		}, checkOutputs, "agent run r1 failed: E_TOOL"},
		{"agent run cut off by kills: lease lost too often", func() (*world, *final) {
			s := failedAgentState("E_ATTEMPTS_EXCEEDED", ev("expired", "a", nil))
			return s.w, s.f
		}, checkOutputs, ""},
		{"agent run cut off by a kill after its send started", func() (*world, *final) {
			s := failedAgentState("E_OUTCOME_UNKNOWN", ev("tool_started", "a", nil), ev("expired", "a", nil))
			return s.w, s.f
		}, checkOutputs, ""},
	}
}

// failedAgentState is a soak_agent run that failed with code after the
// timeline evs.
func failedAgentState(code string, evs ...apitypes.Event) *state {
	s := newState()
	v := s.run("r1", "soak_agent", map[string]any{"id": "req-1"}, apitypes.PhaseFailed, evs...)
	v.Error = &apitypes.RunError{Code: code}
	return s
}

// agentState is a completed soak_agent run whose two turns were journaled
// at t0 and t0+3s, its first turn asked at t0-2s and again at again (and
// reporting cut asks cut off), its second at t0+2s.
func agentState(again time.Time, cut float64) *state {
	s := newState()
	turn1 := map[string]any{"turn": 1.0}
	if cut > 0 {
		turn1["cut"] = cut
	}
	v := s.run("r1", "soak_agent", map[string]any{"id": "req-1"}, apitypes.PhaseCompleted,
		at(ev("agent_turn", "a", turn1), t0),
		at(ev("agent_turn", "a", map[string]any{"turn": 2.0}), t0.Add(3*time.Second)))
	v.Output = json.RawMessage(`{"id":"req-1","answer":"done req-1"}`)
	first := json.RawMessage(`{"messages":[{"role":"user","content":"Agent task req-1"}]}`)
	second := json.RawMessage(`{"messages":[{"role":"user","content":"Agent task req-1"},{"role":"assistant"},{"role":"tool"}]}`)
	s.f.modelRequests = []llmtest.Request{{Body: first, At: t0.Add(-2 * time.Second)}, {Body: first, At: again}, {Body: second, At: t0.Add(2 * time.Second)}}
	return s
}

// fanState is a completed fan-out run with output out, its cohort closed
// at 00:00:01 (with the marker or not), and two children: one completed
// before the cutoff, one after it.
func fanState(out string, marker bool) *state {
	s := newState()
	cutoff := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	v := s.run("r1", "soak_fan", map[string]any{"id": "req-r1", "ms": []any{1, 9}}, apitypes.PhaseCompleted)
	v.Output = json.RawMessage(out)
	v.Progress = &apitypes.Progress{Cohorts: []apitypes.Cohort{{Node: "fan", State: "closed", Items: 2, Cutoff: cutoff, Marker: marker}}}
	for i, at := range []time.Time{cutoff.Add(-time.Second), cutoff.Add(time.Second)} {
		id := fmt.Sprintf("c%d", i)
		s.f.children["r1"] = append(s.f.children["r1"], apitypes.Run{ID: id, Parent: "r1", Phase: apitypes.PhaseCompleted})
		s.f.events[id] = []apitypes.Event{{Type: "completed", At: at}}
	}
	return s
}

// t0 is when the drain of the hand-built states began.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at sets an event's time.
func at(e apitypes.Event, t time.Time) apitypes.Event {
	e.At = t
	return e
}

// toolFanState is a completed soak_fuse run with output out, its cohort
// closed at 00:00:01 with the marker, and two tool children whose ends are
// on its timeline: one a second before the cutoff in state first, one a
// second after it in state second.
func toolFanState(out, first, second string) *state {
	s := newState()
	cutoff := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	v := s.run("r1", "soak_fuse", map[string]any{"id": "req-r1", "ms": []any{1, 9}}, apitypes.PhaseCompleted,
		at(ev("item_done", "fan", map[string]any{"item": 0.0, "state": first, "task": "task_a"}), cutoff.Add(-time.Second)),
		at(ev("item_done", "fan", map[string]any{"item": 1.0, "state": second, "task": "task_b"}), cutoff.Add(time.Second)))
	v.Output = json.RawMessage(out)
	v.Progress = &apitypes.Progress{Cohorts: []apitypes.Cohort{{Node: "fan", State: "closed", Items: 2, Cutoff: cutoff, Marker: true}}}
	return s
}
