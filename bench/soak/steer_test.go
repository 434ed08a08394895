package main

import (
	"encoding/json"
	"fmt"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// steerState is a completed steer run r1 whose two calls were decided as
// plan says, journaled, run (or not) in testkit.once's log and told to the
// model in its second turn as the engine does.
func steerState(plan ...string) *state {
	s := newState()
	s.f.records.onceKeys = map[string][]string{}
	s.addSteer(1, plan...)
	return s
}

// addSteer adds a completed steer run rN (request id req-N) decided as
// plan says, as steerState does.
func (s *state) addSteer(n int, plan ...string) {
	id, runID := fmt.Sprintf("req-%d", n), fmt.Sprintf("r%d", n)
	var evs []apitypes.Event
	msgs := []map[string]any{{"role": "user", "content": agentPrompt + id + " " + steerMark}, {"role": "assistant"}}
	for i, d := range plan {
		value, key := steerValue(id, i), fmt.Sprintf("%s/a/1/1/%d", runID, i)
		proposed := engine.ProposalDigest(steerArgs(value))
		var told string
		switch d {
		case decideApprove:
			evs = append(evs, ev("approved", "a", map[string]any{"wait": steerWait(i), "kind": "approval"}))
			s.f.records.onceKeys[value] = []string{key}
			told = fmt.Sprintf(`{"key":%q,"value":%q}`, key, value)
		case decideEdit:
			evs = append(evs, ev("approved", "a", map[string]any{"wait": steerWait(i), "edited": true,
				"proposed_digest": proposed, "edited_digest": engine.ProposalDigest(steerEdit(id, i))}))
			s.f.records.onceKeys[value+"/edited"] = []string{key}
			told = fmt.Sprintf(`{"edited_arguments":%s,"note":"edited","result":{"key":%q,"value":%q}}`, steerEdit(id, i), key, value+"/edited")
		case decideRespond:
			evs = append(evs, ev("responded", "a", map[string]any{"wait": steerWait(i),
				"proposed_digest": proposed, "result_digest": engine.ProposalDigest(steerResponse(id, i))}))
			told = string(steerResponse(id, i))
		case decideReject:
			evs = append(evs, ev("rejected", "a", map[string]any{"wait": steerWait(i), "reason": steerReason}))
			told = `ERROR: {"error":{"code":"E_REJECTED","message":"a person (root) rejected this call of testkit.once: ` + steerReason + `"}}`
		}
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%d", i), "content": told})
	}
	planIn := make([]any, len(plan))
	for i, d := range plan {
		planIn[i] = d
	}
	v := s.run(runID, steerKind.flow, map[string]any{"id": id, "plan": planIn, "reverse": false}, apitypes.PhaseCompleted, evs...)
	v.Output = json.RawMessage(fmt.Sprintf(`{"id":%q,"answer":"steered %s"}`, id, id))
	body, _ := json.Marshal(map[string]any{"messages": msgs})
	s.f.modelRequests = append(s.f.modelRequests, llmtest.Request{Body: body})
}

// toldAs replaces what the model's request told it of call.
func (s *state) toldAs(call int, content string) {
	r := &s.f.modelRequests[0]
	var req map[string][]map[string]any
	_ = json.Unmarshal(r.Body, &req)
	for _, m := range req["messages"] {
		if m["tool_call_id"] == fmt.Sprintf("call_%d", call) {
			m["content"] = content
		}
	}
	r.Body, _ = json.Marshal(req)
}

func steerViolationCases() []violationCase {
	return []violationCase{
		{"steer calls approved and edited, each run once with its arguments", func() (*world, *final) {
			s := steerState(decideApprove, decideEdit)
			return s.w, s.f
		}, checkSteer, ""},
		{"steer calls responded and rejected, neither run", func() (*world, *final) {
			s := steerState(decideRespond, decideReject)
			return s.w, s.f
		}, checkSteer, ""},
		{"steer call rejected and run", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.records.onceKeys[steerValue("req-1", 1)] = []string{"r1/a/1/1/1"}
			return s.w, s.f
		}, checkSteer, `call 1 decided "reject" ran`},
		{"steer call responded and run", func() (*world, *final) {
			s := steerState(decideRespond, decideReject)
			s.f.records.onceKeys[steerValue("req-1", 0)+"/responded"] = []string{"r1/a/1/1/0"}
			return s.w, s.f
		}, checkSteer, `call 0 decided "respond" ran`},
		{"steer call approved and run twice", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.records.onceKeys[steerValue("req-1", 0)] = []string{"r1/a/1/1/0", "r1/a/1/1/0"}
			return s.w, s.f
		}, checkSteer, "ran 2 times"},
		{"steer call edited and run with the proposed arguments", func() (*world, *final) {
			s := steerState(decideEdit, decideReject)
			s.f.records.onceKeys[steerValue("req-1", 0)] = s.f.records.onceKeys[steerValue("req-1", 0)+"/edited"]
			delete(s.f.records.onceKeys, steerValue("req-1", 0)+"/edited")
			return s.w, s.f
		}, checkSteer, `ran with {"value":"req-1/steer/0"}`},
		{"steer call approved in a completed run and never run", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			delete(s.f.records.onceKeys, steerValue("req-1", 0))
			return s.w, s.f
		}, checkSteer, "ran 0 times"},
		{"steer call approved in a cancelled run and never run", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			delete(s.f.records.onceKeys, steerValue("req-1", 0))
			s.f.runs[0].Phase = apitypes.PhaseCancelled
			s.addSteer(2, decideEdit, decideRespond)
			return s.w, s.f
		}, checkSteer, ""},
		{"steer call run under another call's key", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.records.onceKeys[steerValue("req-1", 0)] = []string{"r1/a/1/1/1"}
			return s.w, s.f
		}, checkSteer, "idempotency key"},
		{"steer response not what the model saw", func() (*world, *final) {
			s := steerState(decideRespond, decideReject)
			s.toldAs(0, `{"value":"something else"}`)
			return s.w, s.f
		}, checkSteer, `call 0 decided "respond" was told to the model`},
		{"steer edit not told to the model", func() (*world, *final) {
			s := steerState(decideEdit, decideReject)
			s.toldAs(0, `{"key":"r1/a/1/1/0","value":"req-1/steer/0/edited"}`)
			return s.w, s.f
		}, checkSteer, `call 0 decided "edit" was told to the model`},
		{"steer edit journaled without its edited digest", func() (*world, *final) {
			s := steerState(decideEdit, decideReject)
			s.f.events["r1"][0].Detail["edited_digest"] = "0000"
			return s.w, s.f
		}, checkSteer, "journaled approved with other digests"},
		{"steer decision taken on a stale digest", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.events["r1"][0].Detail["digest"] = staleDigest
			return s.w, s.f
		}, checkSteer, "journaled approved bound to another digest"},
		{"steer wait decided twice", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.events["r1"] = append(s.f.events["r1"], ev("approved", "a", map[string]any{"wait": steerWait(0)}))
			return s.w, s.f
		}, checkSteer, "decided twice"},
		{"steer run completed with a call undecided", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.events["r1"] = s.f.events["r1"][:1]
			s.toldAs(1, `{"value":"x"}`)
			return s.w, s.f
		}, checkSteer, "completed with call 1 undecided"},
		{"steer run failed by an error kills cannot cause", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.runs[0].Phase, s.f.runs[0].Error = apitypes.PhaseFailed, &apitypes.RunError{Code: "E_TOOL"}
			return s.w, s.f
		}, checkSteer, "steer run r1 failed: E_TOOL"},
		{"steer run failed by kills after a call started", func() (*world, *final) {
			s := steerState(decideApprove, decideReject)
			s.f.runs[0].Phase = apitypes.PhaseFailed
			s.f.runs[0].Error = &apitypes.RunError{Code: "E_OUTCOME_UNKNOWN", Message: "the task lost its lease 5 times (last: x); testkit.once at node a (not idempotent) was started"}
			s.f.events["r1"] = append(s.f.events["r1"], ev("expired", "a", nil))
			s.addSteer(2, decideEdit, decideRespond)
			return s.w, s.f
		}, checkSteer, ""},
	}
}
