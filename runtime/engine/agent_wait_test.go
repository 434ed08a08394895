package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/sdk/chat"
)

// openDecisionsOf waits until the run has n open decisions and returns
// them.
func (b *agentBundle) openDecisionsOf(t *testing.T, id string, n int) []HumanWait {
	t.Helper()
	var ws []HumanWait
	testutil.Eventually(t, 30*time.Second, func() error {
		var err error
		if ws, err = b.eng.HumanWaits(context.Background(), "alice", id); err != nil {
			return err
		}
		if len(ws) != n {
			return fmt.Errorf("%d open decisions, want %d", len(ws), n)
		}
		return nil
	})
	return ws
}

func (b *agentBundle) decide(id, wait string, approve bool, reason string) error {
	return b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: wait, Approve: approve, Reason: reason})
}

func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return fmt.Sprint(err)
}

// TestAgentApproveAndReject: a turn proposes two calls of an approve
// tool beside a read. The read runs at once; each proposal is a wait of
// kind approval with its own id showing the tool and its arguments, and
// nothing is sent before a person decides. A decision by node is refused
// while two are open there, naming both; the approved call runs once, the
// rejected one's reason is the model's tool result, and a second decision
// on either is E_ALREADY_DECIDED.
func TestAgentApproveAndReject(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "kv.get", `{"key":"x"}`), tc("c2", "mail.send", `{"to":"ann"}`), tc("c3", "mail.send", `{"to":"bob"}`)),
		answer("sent to ann", use(10, 1)),
	)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "approving", `{}`)
	ws := b.openDecisionsOf(t, id, 2)
	if ws[0].ID != "a@1.1.1" || ws[1].ID != "a@1.1.2" || ws[0].Kind != WaitApproval || ws[0].Node != "a" ||
		string(ws[1].Shown) != `{"arguments":{"to":"bob"},"call":2,"digest":"`+ProposalDigest(json.RawMessage(`{"to":"bob"}`))+`","tool":"mail.send","turn":1}` || ws[0].Since.IsZero() {
		t.Fatalf("open decisions %+v", ws)
	}
	if n := m.called("mail.send"); n != 0 {
		t.Fatalf("mail.send called %d times before any approval", n)
	}
	if err := b.decide(id, "a", true, ""); codeOf(err) != CodeAmbiguousWait || !strings.Contains(err.Error(), "a@1.1.1, a@1.1.2") {
		t.Fatalf("deciding by node with two open: %v, want %s naming both waits", err, CodeAmbiguousWait)
	}
	// A decision that names the proposal it saw: another digest is
	// refused and leaves the wait open; a digest on a wait that has none
	// is refused; the digest the wait shows is taken.
	stale := DecideParams{Owner: "alice", RunID: id, Node: "a@1.1.1", Approve: true, Digest: ProposalDigest(json.RawMessage(`{"to":"bob"}`))}
	if err := b.eng.Decide(context.Background(), stale); codeOf(err) != CodeStaleDecision || !strings.Contains(err.Error(), "not the") {
		t.Fatalf("a decision naming another proposal: %v, want %s", err, CodeStaleDecision)
	}
	b.openDecisionsOf(t, id, 2)
	seen := stale
	seen.Digest = ProposalDigest(json.RawMessage(` { "to" : "ann" } `)) // the same arguments, spelt otherwise
	if err := b.eng.Decide(context.Background(), seen); err != nil {
		t.Fatalf("a decision naming the proposal shown: %v", err)
	}
	if err := b.decide(id, "a@1.1.1", false, "again"); codeOf(err) != CodeAlreadyDecided {
		t.Fatalf("second decision: %v, want %s", err, CodeAlreadyDecided)
	}
	// One left open at the node: deciding by node finds it.
	b.openDecisionsOf(t, id, 1)
	if err := b.decide(id, "a", false, "not bob"); err != nil {
		t.Fatal(err)
	}
	r := resultOf(t, b.terminal(t, id))
	if r.Answer != "sent to ann" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	if n := m.called("mail.send"); n != 1 {
		t.Errorf("mail.send called %d times, want 1 (the approved call)", n)
	}
	msgs := m.asked()[1].Messages
	told := map[string]chat.Message{}
	for _, msg := range msgs {
		told[msg.ToolCallID] = msg
	}
	if told["c2"].Content != `{"sent":true}` || !told["c3"].IsError || !strings.Contains(told["c3"].Content, CodeRejected) || !strings.Contains(told["c3"].Content, "not bob") {
		t.Errorf("the model was told %+v", msgs)
	}
	for _, w := range []string{"a@1.1.2", "a"} {
		if err := b.decide(id, w, true, ""); codeOf(err) != CodeAlreadyDecided {
			t.Errorf("deciding %s after the run ended: %v, want %s", w, err, CodeAlreadyDecided)
		}
	}
	if err := b.decide(id, "a@1.9.9", true, ""); codeOf(err) != CodeNotWaiting {
		t.Errorf("deciding a wait that never was: %v, want %s", err, CodeNotWaiting)
	}
	if evs := b.events(t, id, evApprovalAsked); len(evs) != 2 || evs[0].Detail["wait"] != "a@1.1.1" {
		t.Errorf("approval_asked events %+v", evs)
	}
}

// TestAgentApprovalSurvivesCrash: a kill -9 while the agent waits for a
// person loses neither the proposal nor, after it, the decision; a kill
// while the approved (non-idempotent) call runs never runs it again: the
// model is told its outcome is unknown.
func TestAgentApprovalSurvivesCrash(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "mail.send", `{"to":"ann"}`)), answer("done", use(10, 1)))
	m.blockSend = true
	st, fk := memstore.New(), clock.NewFake(time.Now())
	b := setupAgent(t, st, fk, m)
	id := b.submit(t, "approving", `{}`)
	b.openDecisionsOf(t, id, 1)
	b.crash(t)

	b2 := b.reopen(t)
	if ws := b2.openDecisionsOf(t, id, 1); ws[0].ID != "a@1.1.0" {
		t.Fatalf("after the restart: %+v", ws)
	}
	if err := b2.decide(id, "a", true, ""); err != nil {
		t.Fatal(err)
	}
	<-m.sendStarted
	b2.crash(t)

	m.mu.Lock()
	m.blockSend = false
	m.mu.Unlock()
	b3 := b2.reopen(t)
	r := resultOf(t, b3.terminal(t, id))
	if r.Answer != "done" {
		t.Errorf("result %+v", r)
	}
	if n := m.called("mail.send"); n != 1 {
		t.Errorf("mail.send called %d times, want 1", n)
	}
	if reqs := m.asked(); len(reqs) != 2 || !strings.Contains(reqs[1].Messages[2].Content, CodeOutcomeUnknown) {
		t.Errorf("the model was asked %d turns; the second told %+v, want %s", len(reqs), reqs[len(reqs)-1].Messages, CodeOutcomeUnknown)
	}
	if err := b3.decide(id, "a", true, ""); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("deciding again: %v, want %s", err, CodeAlreadyDecided)
	}
}

// TestAgentFlowToolWithOneWorker: a flow offered to the model is a tool
// whose schema is the flow's input; its call is a child run that needs a
// slot of its own. With one worker, the agent gives its slot back while
// the child runs (as a fan-out parent does), so the run completes, and
// the child's output is the call's result.
func TestAgentFlowToolWithOneWorker(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "helper", `{"key":"k"}`), tc("c2", "helper", `{"nokey":1}`)),
		answer("found", use(10, 1)),
	)
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: clock.NewFake(time.Now()), Workers: 1}, m)
	run := b.run(t, "delegating", `{}`)
	r := resultOf(t, run)
	if r.Answer != "found" {
		t.Errorf("result %+v", r)
	}
	reqs := m.asked()
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "helper" || reqs[0].Tools[0].Description != "Looks a key up." ||
		!strings.Contains(string(reqs[0].Tools[0].InputSchema), `"required":["key"]`) {
		t.Errorf("tools offered %+v: want the flow with its doc and input schema", reqs[0].Tools)
	}
	told := map[string]chat.Message{}
	for _, msg := range reqs[1].Messages {
		told[msg.ToolCallID] = msg
	}
	if told["c1"].Content != `{"value":"v-k"}` || !told["c2"].IsError || !strings.Contains(told["c2"].Content, CodeBadInput) {
		t.Errorf("the model was told %+v", reqs[1].Messages)
	}
	kids, err := b.eng.List(context.Background(), "alice", store.RunListParams{ParentRunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || kids[0].Flow != "helper" || kids[0].Phase != store.PhaseCompleted || kids[0].ParentNode != "a" {
		t.Fatalf("children %+v: want one completed run of helper", kids)
	}
	turns := b.turns(t, run.ID)
	if turns[0].Calls[0].Child != kids[0].ID {
		t.Errorf("turn records call 0's child %q, want %s", turns[0].Calls[0].Child, kids[0].ID)
	}
}

// TestAgentApprovalTimesOut: nobody decides a proposed call before the
// agent's timeout; the node takes its error wire with E_AGENT_TIMEOUT,
// the call never runs, the wait is no longer open, and a late decision
// is told the run does not wait for it.
func TestAgentApprovalTimesOut(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "mail.send", `{"to":"ann"}`)))
	fk := clock.NewFake(time.Now())
	b := setupAgent(t, memstore.New(), fk, m)
	runID := b.submit(t, "approving_timed", `{}`)
	ws := b.openDecisionsOf(t, runID, 1)
	if !ws[0].Until.Equal(ws[0].Since.Add(time.Minute)) {
		t.Errorf("the approval waits until %v, want its agent's timeout, a minute after %v", ws[0].Until, ws[0].Since)
	}
	fk.Advance(2 * time.Minute)
	run := b.terminal(t, runID)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("run %s %+v", run.Phase, run.Error)
	}
	if evs := b.events(t, runID, evNodeFailed); len(evs) != 1 || evs[0].Detail["code"] != CodeAgentTimeout {
		t.Errorf("node_failed events %+v, want one with %s", evs, CodeAgentTimeout)
	}
	if n := m.called("mail.send"); n != 0 {
		t.Errorf("mail.send called %d times", n)
	}
	if err := b.decide(runID, ws[0].ID, true, ""); codeOf(err) != CodeNotWaiting {
		t.Errorf("a late decision: %v, want %s", err, CodeNotWaiting)
	}
}

// TestAgentFlowToolChildWaits: while the child run of a flow call waits
// for a person, the agent shows a child wait whose id places the call,
// and the child's decision is among the run's open decisions; deciding
// it ends the child, which wakes the agent.
func TestAgentFlowToolChildWaits(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "gated", `{}`)), answer("gated done", use(10, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	ctx := context.Background()
	res, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "delegating_gate", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ds := b.openDecisionsOf(t, res.RunID, 1)
	if ds[0].RunID == res.RunID || ds[0].ID != "ok@1" || ds[0].Flow != "gated" {
		t.Fatalf("open decisions %+v: want the child's wait", ds)
	}
	var own []HumanWait
	testutil.Eventually(t, 30*time.Second, func() error {
		run, err := b.eng.Get(ctx, "alice", res.RunID)
		if err != nil {
			return err
		}
		if own, err = b.eng.Waits(ctx, run); err != nil {
			return err
		}
		if len(own) != 1 {
			return fmt.Errorf("the agent's own waits %+v", own)
		}
		return nil
	})
	if w := own[0]; w.ID != "a@1.1.0" || w.Kind != WaitChild || string(w.Shown) != `{"child":"`+ds[0].RunID+`"}` {
		t.Errorf("the agent's wait %+v: want a@1.1.0, kind child, showing the child", w)
	}
	if err := b.decide(ds[0].RunID, "ok", true, ""); err != nil {
		t.Fatal(err)
	}
	r := resultOf(t, b.terminal(t, res.RunID))
	if r.Answer != "gated done" {
		t.Errorf("result %+v", r)
	}
	if msgs := m.asked()[1].Messages; msgs[len(msgs)-1].Content != `{"value":"v-g"}` {
		t.Errorf("the model was told %+v", msgs)
	}
}

// TestAgentCallsTakeSlotsOfTheirOwn: with one worker slot, an agent whose
// turn asks for tool calls gives its slot back while they run: each call
// is a task the dispatcher admits on its own (a "leased" event per call),
// and the run completes instead of waiting on itself.
func TestAgentCallsTakeSlotsOfTheirOwn(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "kv.get", `{"key":"x"}`), tc("c2", "kv.get", `{"key":"y"}`), tc("c3", "mail.send", `{"to":"ann"}`)),
		answer("read both, sent one", use(10, 1)),
	)
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: clock.NewFake(time.Now()), Workers: 1}, m)
	run := b.run(t, "research", `{"topic":"x"}`)
	if r := resultOf(t, run); r.Answer != "read both, sent one" {
		t.Errorf("result %+v", r)
	}
	leased := map[string]int{}
	for _, ev := range b.events(t, run.ID, evLeased) {
		if tool, _ := ev.Detail["tool"].(string); tool != "" {
			leased[tool]++
		}
	}
	if leased["kv.get"] != 2 || leased["mail.send"] != 1 {
		t.Errorf("calls leased as tasks: %v, want kv.get twice and mail.send once", leased)
	}
	if m.called("kv.get") != 2 || m.called("mail.send") != 1 {
		t.Errorf("calls %v", m.calls)
	}
}

// A decision's reason is bounded (MaxDecisionReasonBytes) and printable
// but for line breaks: past the bound, or with another control character,
// it is refused E_BAD_REQUEST and the wait stays open; a reason of lines
// within it reaches the model whole.
func TestAgentRejectReasonBounded(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "mail.send", `{"to":"ann"}`)),
		answer("not sent", use(10, 1)),
	)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "approving", `{}`)
	b.openDecisionsOf(t, id, 1)
	for _, bad := range []string{strings.Repeat("r", MaxDecisionReasonBytes+1), "no \x1b[2J thanks"} {
		if err := b.decide(id, "a@1.1.0", false, bad); codeOf(err) != CodeBadRequest {
			t.Fatalf("a reason of %d bytes: %v, want %s", len(bad), err, CodeBadRequest)
		}
		b.openDecisionsOf(t, id, 1)
	}
	reason := "not ann:\n\tshe left" + strings.Repeat(".", MaxDecisionReasonBytes-len("not ann:\n\tshe left"))
	if err := b.decide(id, "a@1.1.0", false, reason); err != nil {
		t.Fatalf("a reason of lines within the bound: %v", err)
	}
	b.terminal(t, id)
	if n := m.called("mail.send"); n != 0 {
		t.Errorf("mail.send called %d times after its rejection", n)
	}
	var told chat.Message
	for _, msg := range m.asked()[1].Messages {
		if msg.ToolCallID == "c1" {
			told = msg
		}
	}
	var res struct{ Error struct{ Message string } }
	if err := json.Unmarshal([]byte(told.Content), &res); err != nil || !strings.HasSuffix(res.Error.Message, ": "+reason) {
		t.Errorf("the model was told %.200q (%v), want the whole reason", told.Content, err)
	}
}
