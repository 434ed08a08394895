package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/sdk/chat"
)

// toldAbout is what the model was told about each call in its request n
// (0-based), by call id.
func (b *agentBundle) toldAbout(t *testing.T, n int) map[string]chat.Message {
	t.Helper()
	reqs := b.model.asked()
	if len(reqs) <= n {
		t.Fatalf("the model was asked %d turns, want at least %d", len(reqs), n+1)
	}
	told := map[string]chat.Message{}
	for _, msg := range reqs[n].Messages {
		if msg.Role == chat.RoleTool {
			told[msg.ToolCallID] = msg
		}
	}
	return told
}

func (m *fakeModel) postedInputs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.posted...)
}

// TestAgentEditRunsTheEditOnce: an approval with a payload is an edit.
// Edited arguments the tool's input schema refuses are E_BAD_INPUT naming
// the field, and an edit naming another proposal's digest is
// E_STALE_DECISION; neither changes anything and the wait stays open.
// The edit taken runs the tool once, with the edited arguments; the
// model's next request tells it the call ran with edits and shows them;
// the approved event carries both digests; a second decision is
// E_ALREADY_DECIDED.
func TestAgentEditRunsTheEditOnce(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "mail.post", `{"to":"ann","body":"hi"}`)), answer("posted", use(10, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "posting", `{}`)
	ws := b.openDecisionsOf(t, id, 1)
	proposed := ProposalDigest(json.RawMessage(`{"to":"ann","body":"hi"}`))
	if ws[0].ID != "a@1.1.0" || !strings.Contains(string(ws[0].Shown), `"digest":"`+proposed+`"`) {
		t.Fatalf("open decision %+v", ws[0])
	}
	edit := func(payload, digest string) error {
		return b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: "a@1.1.0", Approve: true,
			Payload: json.RawMessage(payload), Digest: digest})
	}
	if err := edit(`{"to":5}`, proposed); codeOf(err) != CodeBadInput || !strings.Contains(err.Error(), "'/to'") || !strings.Contains(err.Error(), "input schema of mail.post") {
		t.Fatalf("an edit the input schema refuses: %v, want %s naming the field", err, CodeBadInput)
	}
	if err := edit(`{"to":"eve","cc":"x"}`, proposed); codeOf(err) != CodeBadInput || !strings.Contains(err.Error(), "'cc'") {
		t.Fatalf("an edit with a field the schema does not allow: %v, want %s naming it", err, CodeBadInput)
	}
	if err := edit(`{"to":"`+strings.Repeat("e", MaxResultBytes)+`"}`, proposed); codeOf(err) != CodeBadInput || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("edited arguments over the bound: %v, want %s", err, CodeBadInput)
	}
	if err := edit(`{"to":"eve"}`, ProposalDigest(json.RawMessage(`{"to":"bob"}`))); codeOf(err) != CodeStaleDecision {
		t.Fatalf("an edit naming another proposal: %v, want %s", err, CodeStaleDecision)
	}
	if ws := b.openDecisionsOf(t, id, 1); ws[0].ID != "a@1.1.0" {
		t.Fatalf("the refused decisions did not leave the wait open: %+v", ws)
	}
	if evs := b.events(t, id, "approved"); len(evs) != 0 {
		t.Fatalf("refused decisions were journaled: %+v", evs)
	}
	if err := edit(`{"body":"hello","to":"eve"}`, proposed); err != nil {
		t.Fatalf("the edit: %v", err)
	}
	r := resultOf(t, b.terminal(t, id))
	if r.Answer != "posted" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	if got := m.postedInputs(); len(got) != 1 || got[0] != `{"body":"hello","to":"eve"}` {
		t.Errorf("mail.post ran with %q, want once with the edited arguments", got)
	}
	told := b.toldAbout(t, 1)["c1"]
	var content struct {
		Edited json.RawMessage `json:"edited_arguments"`
		Note   string          `json:"note"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(told.Content), &content); err != nil || string(content.Edited) != `{"body":"hello","to":"eve"}` ||
		!strings.Contains(content.Note, "edited") || string(content.Result) != `{"sent":true}` || told.IsError {
		t.Errorf("the model was told %+v, want the edit and the result", told)
	}
	turns := b.turns(t, id)
	if c := turns[0].Calls[0]; string(c.Edited) != `{"body":"hello","to":"eve"}` || c.Responded || !c.Done {
		t.Errorf("the journaled call %+v, want its edit", c)
	}
	evs := b.events(t, id, "approved")
	if len(evs) != 1 || evs[0].Detail["edited"] != true || evs[0].Detail["proposed_digest"] != proposed ||
		evs[0].Detail["edited_digest"] != ProposalDigest(json.RawMessage(`{"to":"eve","body":"hello"}`)) {
		t.Errorf("approved events %+v, want one with both digests", evs)
	}
	if err := edit(`{"to":"mallory"}`, ""); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("a second decision: %v, want %s", err, CodeAlreadyDecided)
	}
}

// TestAgentRespondNeverRunsTheTool: a response answers the call in the
// tool's place. One its output schema refuses is E_BAD_RESULT and leaves
// the wait open, as does a response on a rejection; the response taken
// is the call's result, the model is told it, and the tool never runs.
func TestAgentRespondNeverRunsTheTool(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "mail.post", `{"to":"ann"}`)), answer("answered", use(10, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "posting", `{}`)
	b.openDecisionsOf(t, id, 1)
	respond := func(approve bool, result string) error {
		return b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: "a", Approve: approve, Respond: true, Result: json.RawMessage(result)})
	}
	if err := respond(true, `{"sent":"yes"}`); codeOf(err) != CodeBadResult || !strings.Contains(err.Error(), "'/sent'") || !strings.Contains(err.Error(), "output schema of mail.post") {
		t.Fatalf("a response the output schema refuses: %v, want %s naming the field", err, CodeBadResult)
	}
	if err := respond(true, `{"sent":`); codeOf(err) != CodeBadResult {
		t.Fatalf("a response that is not JSON: %v, want %s", err, CodeBadResult)
	}
	if err := respond(false, `{"sent":false}`); codeOf(err) != CodeBadRequest {
		t.Fatalf("a response on a rejection: %v, want %s", err, CodeBadRequest)
	}
	b.openDecisionsOf(t, id, 1)
	if err := respond(true, ` {"sent": false, "by": "hand"} `); err != nil {
		t.Fatalf("the response: %v", err)
	}
	r := resultOf(t, b.terminal(t, id))
	if r.Answer != "answered" {
		t.Errorf("result %+v", r)
	}
	if n := m.called("mail.post"); n != 0 {
		t.Errorf("mail.post ran %d times, want never", n)
	}
	if told := b.toldAbout(t, 1)["c1"]; told.Content != `{"by":"hand","sent":false}` || told.IsError {
		t.Errorf("the model was told %+v, want the response as the call's result", told)
	}
	if c := b.turns(t, id)[0].Calls[0]; !c.Responded || string(c.Result) != `{"by":"hand","sent":false}` || c.Task != "" {
		t.Errorf("the journaled call %+v, want the response and no task", c)
	}
	if evs := b.events(t, id, "responded"); len(evs) != 1 || evs[0].Detail["result_digest"] != hashHex([]byte(`{"by":"hand","sent":false}`)) {
		t.Errorf("responded events %+v", evs)
	}
	if err := respond(true, `{"sent":true}`); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("a second decision: %v, want %s", err, CodeAlreadyDecided)
	}
}

// TestAgentParallelApprovalsInReverseOrder: three calls proposed in one
// turn are decided independently, last first: the last is approved (it
// runs at once, while the others still wait), the second is answered in
// the tool's place, the first is edited. The model is not asked again
// until all three are decided, and then it is told each call's own end.
func TestAgentParallelApprovalsInReverseOrder(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "mail.post", `{"to":"ann"}`), tc("c2", "mail.post", `{"to":"bob"}`), tc("c3", "mail.post", `{"to":"cy"}`)),
		answer("all three", use(10, 1)),
	)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	id := b.submit(t, "posting", `{}`)
	ws := b.openDecisionsOf(t, id, 3)
	decide := func(wait string, p DecideParams) {
		t.Helper()
		p.Owner, p.RunID, p.Node, p.Approve = "alice", id, wait, true
		p.Digest = ""
		for _, w := range ws {
			if w.ID == wait {
				var shown struct {
					Digest string `json:"digest"`
				}
				_ = json.Unmarshal(w.Shown, &shown)
				p.Digest = shown.Digest
			}
		}
		if err := b.eng.Decide(context.Background(), p); err != nil {
			t.Fatalf("deciding %s: %v", wait, err)
		}
	}
	decide("a@1.1.2", DecideParams{})
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := m.called("mail.post"); n != 1 {
			return fmt.Errorf("mail.post ran %d times, want the approved call's", n)
		}
		return nil
	})
	if n := len(m.asked()); n != 1 {
		t.Fatalf("the model was asked %d turns with two decisions open, want 1", n)
	}
	decide("a@1.1.1", DecideParams{Respond: true, Result: json.RawMessage(`{"sent":false}`)})
	if ws := b.openDecisionsOf(t, id, 1); ws[0].ID != "a@1.1.0" {
		t.Fatalf("open after two decisions: %+v", ws)
	}
	if n := len(m.asked()); n != 1 {
		t.Fatalf("the model was asked %d turns with a decision open, want 1", n)
	}
	decide("a@1.1.0", DecideParams{Payload: json.RawMessage(`{"to":"dee"}`)})
	r := resultOf(t, b.terminal(t, id))
	if r.Answer != "all three" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	if got := m.postedInputs(); len(got) != 2 || got[0] != `{"to":"cy"}` || got[1] != `{"to":"dee"}` {
		t.Errorf("mail.post ran with %q, want the approved call, then the edited one", got)
	}
	told := b.toldAbout(t, 1)
	if told["c3"].Content != `{"sent":true}` || told["c2"].Content != `{"sent":false}` ||
		!strings.Contains(told["c1"].Content, `"edited_arguments":{"to":"dee"}`) {
		t.Errorf("the model was told %+v", told)
	}
}

// TestAgentApprovalTTLExpires: on an agent with approval_ttl, each
// approval wait waits that long from its proposal. One call decided in
// time runs; past the TTL (on the fake clock) the other is rejected with
// E_APPROVAL_EXPIRED, which the model is told, it never runs, the loop
// goes on, and a late decision on it is refused with that code.
func TestAgentApprovalTTLExpires(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "mail.post", `{"to":"ann"}`), tc("c2", "mail.post", `{"to":"bob"}`)), answer("one went", use(10, 1)))
	fk := clock.NewFake(time.Now())
	b := setupAgent(t, memstore.New(), fk, m)
	id := b.submit(t, "posting_ttl", `{}`)
	ws := b.openDecisionsOf(t, id, 2)
	for _, w := range ws {
		if !w.Until.Equal(w.Since.Add(10 * time.Minute)) {
			t.Errorf("wait %s waits until %v, want its approval_ttl after %v", w.ID, w.Until, w.Since)
		}
	}
	if err := b.decide(id, "a@1.1.1", true, ""); err != nil {
		t.Fatal(err)
	}
	// The approved call ends and the agent parks again on the other
	// proposal, until its TTL: only then does the clock move, so that no
	// task is left queued past its queue deadline by the jump.
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := m.called("mail.post"); n != 1 {
			return fmt.Errorf("mail.post ran %d times, want the approved call's", n)
		}
		if c := b.turns(t, id)[0].Calls[1]; !c.Done {
			return fmt.Errorf("the approved call has not ended: %+v", c)
		}
		return b.parkedOnApproval(id, ws[0].Until)
	})
	fk.Advance(10 * time.Minute)
	if err := b.decide(id, "a@1.1.0", true, ""); codeOf(err) != CodeApprovalExpired {
		t.Errorf("a decision past the TTL: %v, want %s", err, CodeApprovalExpired)
	}
	r := resultOf(t, b.terminal(t, id))
	if r.Answer != "one went" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	if got := m.postedInputs(); len(got) != 1 || got[0] != `{"to":"bob"}` {
		t.Errorf("mail.post ran with %q, want only the approved call", got)
	}
	told := b.toldAbout(t, 1)
	if c1 := told["c1"]; !c1.IsError || !strings.Contains(c1.Content, CodeApprovalExpired) || !strings.Contains(c1.Content, "10m") || told["c2"].Content != `{"sent":true}` {
		t.Errorf("the model was told %+v", told)
	}
	if evs := b.events(t, id, evApprovalExpired); len(evs) != 1 || evs[0].Detail["wait"] != "a@1.1.0" || evs[0].Detail["approval_ttl"] != "10m0s" {
		t.Errorf("approval_expired events %+v, want one for a@1.1.0", evs)
	}
	if err := b.decide(id, "a@1.1.0", false, "late"); codeOf(err) != CodeApprovalExpired {
		t.Errorf("a decision after the run went on: %v, want %s", err, CodeApprovalExpired)
	}
}

// parkedOnApproval says whether run id's one task is its step, parked on
// an approval until until.
func (b *agentBundle) parkedOnApproval(id string, until time.Time) error {
	return b.st.View(context.Background(), func(tx store.Tx) error {
		tasks, err := tx.TaskListByRun(id)
		if err != nil {
			return err
		}
		if len(tasks) != 1 || tasks[0].Kind != store.TaskStep || tasks[0].Leased || tasks[0].WaitKind != WaitApproval || !tasks[0].ReadyAt.Equal(until) {
			return fmt.Errorf("run %s's tasks %+v, want its step parked on an approval until %v", id, tasks, until)
		}
		return nil
	})
}

// hookedStore is a memstore that runs afterList once, after the first
// read of an agent's turns (the agent's step loading its loop) once it
// is armed: a seam to act between a step's reads and its writes.
type hookedStore struct {
	*memstore.Store
	mu        sync.Mutex
	afterList func()
}

func (h *hookedStore) View(ctx context.Context, fn func(tx store.Tx) error) error {
	listed := false
	err := h.Store.View(ctx, func(tx store.Tx) error { return fn(listingTx{Tx: tx, listed: &listed}) })
	if listed {
		h.mu.Lock()
		after := h.afterList
		h.afterList = nil
		h.mu.Unlock()
		if after != nil {
			after()
		}
	}
	return err
}

// listingTx notes that its turns were read: listed (a visit's first
// step) or read one by one (the steps after, from its memo).
type listingTx struct {
	store.Tx
	listed *bool
}

func (t listingTx) AgentTurnList(p store.AgentTurnListParams) ([]*store.AgentTurn, error) {
	*t.listed = true
	return t.Tx.AgentTurnList(p)
}

func (t listingTx) AgentTurnGet(runID, node string, visit, turn int) (*store.AgentTurn, error) {
	*t.listed = true
	return t.Tx.AgentTurnGet(runID, node, visit, turn)
}

// TestAgentApprovalInTimeBeatsItsExpiry: a person approves a proposal
// before its approval_ttl while the agent's step that finds it due is
// already running (woken by the turn's other call), and the clock passes
// the TTL before that step sorts the calls. The approval given in time
// stands: the call runs, and nothing expires.
func TestAgentApprovalInTimeBeatsItsExpiry(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "mail.post", `{"to":"ann"}`), tc("c2", "kv.get", `{"key":"k"}`)), answer("both", use(10, 1)))
	m.gate, m.openAt = make(chan struct{}), 99 // kv.get waits until the test lets it go
	fk := clock.NewFake(time.Now())
	hs := &hookedStore{Store: memstore.New()}
	b := setupAgentConfig(t, Config{Store: hs, Tools: m, Clock: fk}, m)
	id := b.submit(t, "posting_ttl_read", `{}`)
	ws := b.openDecisionsOf(t, id, 1)
	decided := make(chan error, 1)
	hs.mu.Lock()
	hs.afterList = func() {
		decided <- b.decide(id, ws[0].ID, true, "") // before the TTL
		fk.Advance(10 * time.Minute)                // and the step goes on past it
	}
	hs.mu.Unlock()
	m.mu.Lock()
	close(m.gate)
	m.gate = nil
	m.mu.Unlock()
	if err := <-decided; err != nil {
		t.Fatalf("the approval in time: %v", err)
	}
	r := resultOf(t, b.terminal(t, id))
	if r.Answer != "both" {
		t.Errorf("result %+v", r)
	}
	if got := m.postedInputs(); len(got) != 1 || got[0] != `{"to":"ann"}` {
		t.Errorf("mail.post ran with %q, want the approved call once", got)
	}
	if evs := b.events(t, id, evApprovalExpired); len(evs) != 0 {
		t.Errorf("approval_expired events %+v, want none: the approval came in time", evs)
	}
	if told := b.toldAbout(t, 1)["c1"]; told.Content != `{"sent":true}` {
		t.Errorf("the model was told %+v, want the call's result", told)
	}
}
