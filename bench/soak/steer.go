package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The steer kind's agent proposes two testkit.once calls in its first
// turn, each of which waits for a person's approval; the soak's decider
// answers each as the run's plan says (approve as proposed, approve with
// edited arguments, respond in the tool's place, or reject), in the order
// asked or in reverse, while daemons are being killed; before some it
// sends one that must be refused and change nothing (bound to a stale
// digest, or an edit the tool's schema refuses). The model answers
// once it has seen every call's end. The promises, checked from
// testkit.once's own log, the journal and the model server's record of
// what it was asked: every approved call ran once, with the arguments of
// its decision (the edited ones for an edit); no rejected or responded
// call ran; the model was told each decision's result next.

const invSteer = "every approved agent call ran once with its decision's arguments, no rejected or responded call ran, the model saw each decision"

// steerMark ends the steer kind's prompt, so the model knows the kind.
const steerMark = "[steer]"

// steerCalls is how many calls the steer kind's first turn proposes.
const steerCalls = 2

// The decisions a person gives a proposed call.
const (
	decideApprove = "approve"
	decideEdit    = "edit"
	decideRespond = "respond"
	decideReject  = "reject"
)

var steerDecisions = []string{decideApprove, decideEdit, decideRespond, decideReject}

// steerReason is what a rejection tells the model.
const steerReason = "the soak rejects this call"

var steerKind = &kind{
	name: "steer", flow: "soak_steer", weight: 1,
	src: `
flow(
    name = "soak_steer",
    nodes = [
        agent("a", model = "small", prompt = lambda ctx: "` + agentPrompt + `" + ctx.input["id"] + " ` + steerMark + `",
              tools = ["testkit.once"], approve = ["testkit.once"], max_turns = 3, next = "done"),
        task("done", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "answer": ctx.results["a"]["answer"]}),
    ],
)
`,
	// The plan is part of the input, so the checks read it from the run:
	// two different decisions, and whether they are given in reverse.
	input: func(r *rand.Rand, id string) map[string]any {
		perm := r.Perm(len(steerDecisions))
		plan := make([]any, steerCalls)
		for i := range plan {
			plan[i] = steerDecisions[perm[i]]
		}
		return map[string]any{"id": id, "plan": plan, "reverse": r.IntN(2) == 0}
	},
	check: completedWith(func(in map[string]any) map[string]any {
		return map[string]any{"id": in["id"], "answer": "steered " + in["id"].(string)}
	}),
}

// steerPlan is a steer run's plan, read from its input.
type steerPlan struct {
	ID      string   `json:"id"`
	Plan    []string `json:"plan"`
	Reverse bool     `json:"reverse"`
}

func steerPlanOf(input json.RawMessage) (steerPlan, bool) {
	var p steerPlan
	if json.Unmarshal(input, &p) != nil || len(p.Plan) != steerCalls {
		return p, false
	}
	for _, d := range p.Plan {
		if !slices.Contains(steerDecisions, d) {
			return p, false
		}
	}
	return p, true
}

// steerValue is the value call of run id's proposal carries; an edit
// and a response carry values of their own, so the log tells them apart.
func steerValue(id string, call int) string { return fmt.Sprintf("%s/steer/%d", id, call) }

func steerArgs(value string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"value": value})
	return b
}

func steerEdit(id string, call int) json.RawMessage {
	return steerArgs(steerValue(id, call) + "/edited")
}

func steerResponse(id string, call int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"value": steerValue(id, call) + "/responded", "by": "soak"})
	return b
}

// steerWait is the approval wait of call of the steer agent's first turn.
func steerWait(call int) string { return engine.WaitID("a", 1, 1, call) }

// respondSteer is the steer kind's model: a first turn proposes the once
// calls, a turn that sees their ends answers.
func respondSteer(id string, msgs []chatMessage) llmtest.Step {
	for _, m := range msgs {
		if m.Role == "tool" {
			return llmtest.Step{Text: "steered " + id}
		}
	}
	calls := make([]llmtest.ToolCall, steerCalls)
	for i := range calls {
		calls[i] = llmtest.ToolCall{ID: "call_" + strconv.Itoa(i), Name: "testkit__once", Arguments: steerArgs(steerValue(id, i))}
	}
	return llmtest.Step{ToolCalls: calls}
}

// decideSteer decides the open approval waits of the steer runs the
// daemon lists as waiting, each as its run's plan says.
func decideSteer(ctx context.Context, w *world, c *client.Client) {
	runs, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Flow: steerKind.flow, Phase: apitypes.PhaseWaiting}))
	if err != nil {
		return // the daemon is down: a later pass
	}
	for _, r := range runs {
		if ctx.Err() != nil {
			return
		}
		v, err := c.RunGet(ctx, r.ID)
		if err != nil {
			return
		}
		plan, ok := steerPlanOf(v.Input)
		if !ok {
			w.violate(invSteer, "steer run %s has no plan in its input %s", v.ID, v.Input)
			continue
		}
		var waits []apitypes.HumanWait
		for _, wt := range v.Waits {
			if wt.Kind == apitypes.WaitApproval {
				waits = append(waits, wt)
			}
		}
		slices.SortFunc(waits, func(a, b apitypes.HumanWait) int { return strings.Compare(a.ID, b.ID) })
		if plan.Reverse {
			slices.Reverse(waits)
		}
		for _, wt := range waits {
			if !decideCall(ctx, w, c, v, plan, wt) {
				return
			}
		}
	}
}

// steerShown is what an agent's approval wait shows.
type steerShown struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Digest    string          `json:"digest"`
	Turn      int             `json:"turn"`
	Call      int             `json:"call"`
}

// decideCall gives one proposed call its planned decision, bound to the
// digest the wait shows; false when the daemon is down.
func decideCall(ctx context.Context, w *world, c *client.Client, v *apitypes.Run, plan steerPlan, wt apitypes.HumanWait) bool {
	var sh steerShown
	if err := json.Unmarshal(wt.Shown, &sh); err != nil || sh.Turn != 1 || sh.Call < 0 || sh.Call >= steerCalls || wt.ID != steerWait(sh.Call) {
		w.violate(invSteer, "approval wait %s of run %s shows %s", wt.ID, v.ID, wt.Shown)
		return true
	}
	if sh.Tool != "testkit.once" || !jsonEqual(sh.Arguments, steerArgs(steerValue(plan.ID, sh.Call))) ||
		sh.Digest != wt.Digest || wt.Digest != engine.ProposalDigest(sh.Arguments) {
		w.violate(invSteer, "approval wait %s of run %s shows another proposal than the model's: %s (digest %s)", wt.ID, v.ID, wt.Shown, wt.Digest)
		return true
	}
	if w.intn(3) == 0 && !refuseBadDecision(ctx, w, c, v, wt) {
		return false
	}
	d := plan.Plan[sh.Call]
	var res *apitypes.DecideResponse
	var err error
	want := apitypes.DecisionApproved
	switch d {
	case decideApprove:
		res, err = c.RunDecide(ctx, v.ID, wt.ID, true, apitypes.DecideRequest{Digest: wt.Digest})
	case decideEdit:
		res, err = c.RunEdit(ctx, v.ID, wt.ID, steerEdit(plan.ID, sh.Call), wt.Digest)
		want = apitypes.DecisionEdited
	case decideRespond:
		res, err = c.RunRespond(ctx, v.ID, wt.ID, steerResponse(plan.ID, sh.Call), wt.Digest)
		want = apitypes.DecisionResponded
	case decideReject:
		res, err = c.RunDecide(ctx, v.ID, wt.ID, false, apitypes.DecideRequest{Reason: steerReason, Digest: wt.Digest})
		want = apitypes.DecisionRejected
	}
	switch code := client.ErrorCode(err); {
	case err == nil && res.Decision != want:
		w.violate(invSteer, "%s of %s (run %s) answered decision %q, want %q", d, wt.ID, v.ID, res.Decision, want)
	case err == nil:
		w.count("steer " + d)
	case code == engine.CodeAlreadyDecided || code == engine.CodeNotWaiting || code == engine.CodeNotFound:
		// Decided in an answer a kill took, or the run moved on.
		w.count("steer refused " + code)
	case code == engine.CodeDraining || code == "":
		return false
	default:
		w.violate(invSteer, "%s of %s (run %s): %v", d, wt.ID, v.ID, err)
	}
	return true
}

// staleDigest is a digest no proposal shows.
const staleDigest = "0000000000000000000000000000000000000000000000000000000000000000"

// refuseBadDecision sends a decision the wait must refuse and that must
// change nothing (the journal shows only the planned decision): an
// approval bound to a digest the wait does not show, or an edit the
// tool's input schema refuses. False when the daemon is down.
func refuseBadDecision(ctx context.Context, w *world, c *client.Client, v *apitypes.Run, wt apitypes.HumanWait) bool {
	var err error
	want := engine.CodeStaleDecision
	if w.intn(2) == 0 {
		_, err = c.RunDecide(ctx, v.ID, wt.ID, true, apitypes.DecideRequest{Digest: staleDigest})
	} else {
		_, err = c.RunEdit(ctx, v.ID, wt.ID, json.RawMessage(`{"value":"bad","crash":"not a boolean"}`), wt.Digest)
		want = engine.CodeBadInput
	}
	switch code := client.ErrorCode(err); {
	case err == nil:
		w.violate(invSteer, "a decision on %s of run %s that must be refused (%s) was taken", wt.ID, v.ID, want)
	case code == want:
		w.count("steer refused " + code)
	case code == engine.CodeAlreadyDecided || code == engine.CodeNotWaiting || code == engine.CodeNotFound:
	case code == engine.CodeDraining || code == "":
		return false
	default:
		w.violate(invSteer, "a decision on %s of run %s answered %v, want %s", wt.ID, v.ID, err, want)
	}
	return true
}

// steerDecided is the decision the journal holds for each call of a steer
// run, by call, and what is wrong with them.
func steerDecided(v apitypes.Run, p steerPlan, evs []apitypes.Event) (map[int]string, []string) {
	var bad []string
	decided := map[int]string{}
	for _, e := range evs {
		if e.Type != "approved" && e.Type != "rejected" && e.Type != "responded" {
			continue
		}
		wait, _ := e.Detail["wait"].(string)
		call := -1
		for i := range steerCalls {
			if wait == steerWait(i) {
				call = i
			}
		}
		if call < 0 {
			bad = append(bad, fmt.Sprintf("steer run %s journaled a decision on wait %q, which its agent never proposed", v.ID, wait))
			continue
		}
		if _, dup := decided[call]; dup {
			bad = append(bad, fmt.Sprintf("steer run %s: wait %s decided twice", v.ID, wait))
		}
		got := journaledDecision(e, p.ID, call)
		decided[call] = got
		if want := p.Plan[call]; got != want {
			bad = append(bad, fmt.Sprintf("steer run %s: wait %s journaled %s (%v), the decider gave %s", v.ID, wait, got, e.Detail, want))
		}
	}
	return decided, bad
}

// journaledDecision reads which decision an event journals on call of
// run id's agent, with the digests it must carry: both an edit's, and a
// response's result; "" when they are not the decider's.
func journaledDecision(e apitypes.Event, id string, call int) string {
	proposed := engine.ProposalDigest(steerArgs(steerValue(id, call)))
	edited, _ := e.Detail["edited"].(bool)
	if saw, ok := e.Detail["digest"]; ok && saw != proposed {
		return e.Type + " bound to another digest"
	}
	switch {
	case e.Type == "rejected":
		return decideReject
	case e.Type == "responded" && e.Detail["proposed_digest"] == proposed &&
		e.Detail["result_digest"] == engine.ProposalDigest(steerResponse(id, call)):
		return decideRespond
	case e.Type == "approved" && edited && e.Detail["proposed_digest"] == proposed &&
		e.Detail["edited_digest"] == engine.ProposalDigest(steerEdit(id, call)):
		return decideEdit
	case e.Type == "approved" && !edited:
		return decideApprove
	}
	return e.Type + " with other digests"
}

// steerTally is what the steer invariant found, for its summary.
type steerTally struct {
	runs, completed, reversed, saw int
	decided                        map[string]int
	// crossed counts the decisions a lost lease (a kill) came between
	// and the model's next turn.
	crossed int
}

func checkSteer(w *world, f *final) []string {
	_, bad := tallySteer(f)
	return bad
}

func tallySteer(f *final) (steerTally, []string) {
	t := steerTally{decided: map[string]int{}}
	var bad []string
	saw := steerRequests(f)
	for _, v := range f.runs {
		if v.Flow != steerKind.flow {
			continue
		}
		t.runs++
		p, ok := steerPlanOf(v.Input)
		if !ok {
			bad = append(bad, fmt.Sprintf("steer run %s has no plan in its input %s", v.ID, v.Input))
			continue
		}
		evs := f.events[v.ID]
		decided, b := steerDecided(v, p, evs)
		bad = append(bad, b...)
		t.crossed += crossedByKills(evs)
		done := v.Phase == apitypes.PhaseCompleted
		if done {
			t.completed++
			if p.Reverse {
				t.reversed++
			}
		}
		if v.Phase == apitypes.PhaseFailed && !lostTooManyLeases(&v, evs) {
			bad = append(bad, fmt.Sprintf("steer run %s failed: %s; its timeline:\n%s", v.ID, errorOf(&v), timeline(evs, 30)))
		}
		for i := range steerCalls {
			d := decided[i]
			t.decided[d]++
			if done && d == "" {
				bad = append(bad, fmt.Sprintf("steer run %s completed with call %d undecided", v.ID, i))
			}
			bad = append(bad, steerEffects(f.records, v, p.ID, i, d, done)...)
		}
		if done && len(saw[p.ID]) == 0 {
			bad = append(bad, fmt.Sprintf("steer run %s completed, and the model was never asked its second turn", v.ID))
		}
		for _, msgs := range saw[p.ID] {
			t.saw++
			bad = append(bad, steerSaw(v.ID, p.ID, decided, msgs)...)
		}
	}
	if t.runs > 0 && t.completed == 0 {
		bad = append(bad, fmt.Sprintf("none of the %d steer runs completed: the kind was not exercised", t.runs))
	}
	if t.completed >= 12 {
		// Each run plans two different decisions: a dozen runs hold all
		// four but once in a thousand soaks.
		for _, d := range steerDecisions {
			if t.decided[d] == 0 {
				bad = append(bad, fmt.Sprintf("no call of the %d completed steer runs was decided %s: the kind was not exercised", t.completed, d))
			}
		}
	}
	return t, bad
}

// crossedByKills counts the decisions of a timeline that a lost lease
// came between and the next model turn: decisions a kill found durable
// and not yet acted on, or acted on and not yet told to the model.
func crossedByKills(evs []apitypes.Event) int {
	n, open := 0, 0
	for _, e := range evs {
		switch e.Type {
		case "approved", "rejected", "responded":
			open++
		case "expired":
			n, open = n+open, 0
		case "agent_turn":
			open = 0
		}
	}
	return n
}

// steerEffects holds call's effects in testkit.once's log against its
// journaled decision d: an approved call ran once (at most once if its
// run did not complete) under its own idempotency key, with the proposed
// arguments, or the edited ones for an edit; a call responded, rejected
// or never decided did not run.
func steerEffects(o *records, v apitypes.Run, id string, call int, d string, done bool) []string {
	proposed := steerValue(id, call)
	edited := proposed + "/edited"
	key := fmt.Sprintf("%s/a/1/1/%d", v.ID, call)
	ran := map[string][]string{proposed: o.onceKeys[proposed], edited: o.onceKeys[edited], proposed + "/responded": o.onceKeys[proposed+"/responded"]}
	want := ""
	switch d {
	case decideApprove:
		want = proposed
	case decideEdit:
		want = edited
	}
	var bad []string
	for value, keys := range ran {
		switch {
		case value != want && len(keys) > 0:
			bad = append(bad, fmt.Sprintf("steer run %s: call %d decided %q ran with {\"value\":%q} %d time(s)", v.ID, call, d, value, len(keys)))
		case value != want:
		case len(keys) > 1 || done && len(keys) == 0:
			bad = append(bad, fmt.Sprintf("steer run %s: call %d decided %s ran %d times with its decision's arguments, want once", v.ID, call, d, len(keys)))
		case len(keys) == 1 && keys[0] != key:
			bad = append(bad, fmt.Sprintf("steer run %s: call %d ran under the idempotency key %s, want %s", v.ID, call, keys[0], key))
		}
	}
	return bad
}

// steerRequests are the model requests of the steer runs' later turns (the
// ones that carry the calls' ends), by request id.
func steerRequests(f *final) map[string][][]chatMessage {
	out := map[string][][]chatMessage{}
	for _, r := range f.modelRequests {
		k, ok := requestTurn(r.Body)
		if !ok || k.turn < 2 || !strings.Contains(string(r.Body), steerMark) {
			continue
		}
		if _, msgs, err := readRequest(r.Body); err == nil {
			out[k.reqID] = append(out[k.reqID], msgs)
		}
	}
	return out
}

// steerSaw checks what a later turn's request told the model of each
// call: its result as it ran, with its edit, the person's response as its
// result, or E_REJECTED.
func steerSaw(runID, id string, decided map[int]string, msgs []chatMessage) []string {
	told := map[string]any{}
	for _, m := range msgs {
		if m.Role != "tool" {
			continue
		}
		s, ok := m.Content.(string)
		// The llm plugin tells OpenAI's models a failed call's end as
		// its error's JSON after "ERROR: ".
		s = strings.TrimPrefix(s, "ERROR: ")
		var v any
		if !ok || json.Unmarshal([]byte(s), &v) != nil {
			return []string{fmt.Sprintf("steer run %s: the model was told %v of %s, not JSON text", runID, m.Content, m.ToolCallID)}
		}
		told[m.ToolCallID] = v
	}
	var bad []string
	for i := range steerCalls {
		got, ok := told["call_"+strconv.Itoa(i)]
		if !ok {
			bad = append(bad, fmt.Sprintf("steer run %s: the model's next turn was not told call %d's end", runID, i))
			continue
		}
		if want := steerTold(decided[i], id, i); !want(got) {
			j, _ := json.Marshal(got)
			bad = append(bad, fmt.Sprintf("steer run %s: call %d decided %q was told to the model as %s", runID, i, decided[i], j))
		}
	}
	return bad
}

// steerTold says what the model must be told of call after decision d.
func steerTold(d, id string, call int) func(any) bool {
	value := func(v any) any {
		m, _ := v.(map[string]any)
		return m["value"]
	}
	switch d {
	case decideApprove:
		return func(v any) bool { return value(v) == steerValue(id, call) }
	case decideEdit:
		return func(v any) bool {
			m, _ := v.(map[string]any)
			return m != nil && reflect.DeepEqual(m["edited_arguments"], normalize(steerEdit(id, call))) &&
				value(m["result"]) == steerValue(id, call)+"/edited"
		}
	case decideRespond:
		return func(v any) bool { return reflect.DeepEqual(v, normalize(steerResponse(id, call))) }
	case decideReject:
		return func(v any) bool {
			m, _ := v.(map[string]any)
			e, _ := m["error"].(map[string]any)
			return e["code"] == engine.CodeRejected && strings.Contains(fmt.Sprint(e["message"]), steerReason)
		}
	}
	return func(any) bool { return false } // a later turn before every call was decided
}

// errorOf is a run's error, code and message.
func errorOf(v *apitypes.Run) string {
	if v.Error == nil {
		return "no error"
	}
	return v.Error.Code + ": " + v.Error.Message
}

// timeline is the last n events of a timeline, one a line, indented
// under a violation.
func timeline(evs []apitypes.Event, n int) string {
	var b strings.Builder
	for _, e := range evs[max(len(evs)-n, 0):] {
		d, _ := json.Marshal(e.Detail)
		fmt.Fprintf(&b, "        %d %s %s attempt %d node %q %.300s\n", e.Seq, e.At.Format(time.RFC3339Nano), e.Type, e.Attempt, e.Node, d)
	}
	return strings.TrimRight(b.String(), "\n")
}

func jsonEqual(a, b json.RawMessage) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

func steerSummary(w *world, f *final) string {
	t, _ := tallySteer(f)
	ran := t.decided[decideApprove] + t.decided[decideEdit]
	return fmt.Sprintf("%d steer runs, %d completed (%d decided in reverse order); calls approved %d, edited %d, responded %d, rejected %d, undecided %d (cancelled), %d decisions with a kill between them and the next turn: the %d approved ran once each with their decision's arguments in testkit.once's log, none responded or rejected ran; %d later-turn requests told the model each decision; the decider gave %d decisions, %d refused as already decided; %d bound to a stale digest and %d edits the schema refuses were refused and changed nothing",
		t.runs, t.completed, t.reversed, t.decided[decideApprove], t.decided[decideEdit], t.decided[decideRespond], t.decided[decideReject], t.decided[""], t.crossed,
		ran, t.saw, w.counts["steer approve"]+w.counts["steer edit"]+w.counts["steer respond"]+w.counts["steer reject"], w.counts["steer refused "+engine.CodeAlreadyDecided],
		w.counts["steer refused "+engine.CodeStaleDecision], w.counts["steer refused "+engine.CodeBadInput])
}
