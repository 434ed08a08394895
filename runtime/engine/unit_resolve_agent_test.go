package engine

import (
	"context"
	"encoding/json"
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

// askingAgent starts the asking flow, whose one turn calls mail.lose
// (losing m.loses answers) beside a read, and waits until its one open
// wait is want.
func askingAgent(t *testing.T, loses int, want string) (*agentBundle, *fakeModel, string, HumanWait) {
	t.Helper()
	m := newFakeModel(askTools(use(1, 1), tc("c1", "mail.lose", `{"to":"ann"}`), tc("c2", "kv.get", `{"key":"k"}`)), answer("sent", use(1, 1)))
	m.loses = loses
	// The tests move the clock in steps of the unknown wait's scale; a
	// task queued across such a step must not pass its queue deadline.
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: clock.NewFake(time.Now()), QueueTimeout: 1000 * time.Hour}, m)
	id := b.submit(t, "asking", `{}`)
	return b, m, id, b.unknownWaitOf(t, id, want)
}

// unknownWaitOf waits until run id's one open wait is want.
func (b *agentBundle) unknownWaitOf(t *testing.T, id, want string) HumanWait {
	t.Helper()
	return oneOpenWait(t, b.eng, id, want)
}

func (b *agentBundle) resolve(id, wait string, happened bool, result string) error {
	p := ResolveParams{Owner: "alice", RunID: id, WaitID: wait, Happened: happened}
	if result != "" {
		p.Result = json.RawMessage(result)
	}
	_, err := b.eng.Ops().Resolve(context.Background(), p)
	return err
}

// toolAnswer is what the model was told of call id in its request n
// (from 0), or "" if it was not told.
func toolAnswer(m *fakeModel, n int, id string) string {
	asked := m.asked()
	if n >= len(asked) {
		return ""
	}
	for _, msg := range asked[n].Messages {
		if msg.Role == chat.RoleTool && msg.ToolCallID == id {
			return msg.Content
		}
	}
	return ""
}

// An agent call whose outcome is unknown parks on
// NODE@VISIT.TURN.CALL.unknown.N showing the tool, the arguments the model
// gave, the key and the start, and the model is not asked again meanwhile
// (the read beside it ran). An approve there is refused (it takes
// resolve), so is a result outside the tool's output schema (E_BAD_RESULT,
// the wait stays open). Resolved happened, the model is told that result,
// the call is never made again, nothing is charged for it twice, and a
// second answer is E_ALREADY_DECIDED.
func TestUnitResolveAgentCallHappened(t *testing.T) {
	t.Parallel()
	b, m, id, hw := askingAgent(t, 1, "a@1.1.0.unknown.1")
	ctx := context.Background()
	var shown unknownShown
	if err := json.Unmarshal(hw.Shown, &shown); err != nil {
		t.Fatal(err)
	}
	if hw.Kind != WaitUnknown || hw.Node != "a" || shown.Tool != "mail.lose" || string(shown.Arguments) != `{"to":"ann"}` ||
		shown.Key != id+"/a/1/1/0" || shown.StartedAt.IsZero() || !hw.Until.Equal(hw.Since.Add(time.Hour)) {
		t.Fatalf("wait %+v shows %s", hw, hw.Shown)
	}
	// Once the read beside it ended and the agent parked again.
	testutil.Eventually(t, 30*time.Second, func() error {
		if m.called("kv.get") != 1 {
			return fmt.Errorf("kv.get called %d times", m.called("kv.get"))
		}
		run, err := b.eng.Get(ctx, "alice", id)
		if err != nil {
			return err
		}
		if all, err := b.eng.Waits(ctx, run); err != nil || len(all) != 1 || all[0].ID != hw.ID {
			return fmt.Errorf("weir run get's waits %+v (%v), want %s alone", all, err, hw.ID)
		}
		return nil
	})
	if n := len(m.asked()); n != 1 {
		t.Fatalf("model asked %d times, want 1 while the call waits", n)
	}
	if err := b.decide(id, hw.ID, true, ""); codeOf(err) != CodeNotWaiting || !strings.Contains(err.Error(), "weir run resolve") {
		t.Errorf("approve of an agent call's unknown wait: %v, want %s pointing at resolve", err, CodeNotWaiting)
	}
	if err := b.resolve(id, hw.ID, true, `{"x": 1}`); codeOf(err) != CodeBadResult {
		t.Fatalf("a result outside the output schema: %v, want %s", err, CodeBadResult)
	}
	b.unknownWaitOf(t, id, hw.ID) // still open
	if err := b.resolve(id, hw.ID, true, `{"sent": true, "by": "hand"}`); err != nil {
		t.Fatal(err)
	}
	run := b.terminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v, want completed", run.Phase, run.Error)
	}
	if got := toolAnswer(m, 1, "c1"); got != `{"by":"hand","sent":true}` {
		t.Errorf("the model was told %q of the call, want the resolved result", got)
	}
	if n := m.called("mail.lose"); n != 1 {
		t.Errorf("mail.lose called %d times, want 1", n)
	}
	// Two turns of 7; the call cost nothing known, once.
	if run.Spent != 14 {
		t.Errorf("spent %d, want 14", run.Spent)
	}
	if err := b.resolve(id, hw.ID, true, ""); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("second resolve: %v, want %s", err, CodeAlreadyDecided)
	}
}

// Resolved not happened, the call is made once more on a task of its
// own; unknown again, it parks on the call's next wait (.2), whose not
// happened makes it once more again, and the model is told the third
// call's answer.
func TestUnitResolveAgentCallNotHappened(t *testing.T) {
	t.Parallel()
	b, m, id, hw := askingAgent(t, 2, "a@1.1.0.unknown.1")
	if err := b.resolve(id, hw.ID, false, ""); err != nil {
		t.Fatal(err)
	}
	second := b.unknownWaitOf(t, id, "a@1.1.0.unknown.2")
	if n := m.called("mail.lose"); n != 2 {
		t.Fatalf("mail.lose called %d times after not happened, want 2", n)
	}
	if err := b.resolve(id, hw.ID, false, ""); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("the first wait again: %v, want %s", err, CodeAlreadyDecided)
	}
	if err := b.resolve(id, second.ID, false, ""); err != nil {
		t.Fatal(err)
	}
	run := b.terminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v", run.Phase, run.Error)
	}
	if got := toolAnswer(m, 1, "c1"); got != `{"call":3,"sent":true}` {
		t.Errorf("the model was told %q, want the third call's answer", got)
	}
	if n := m.called("mail.lose"); n != 3 || len(m.asked()) != 2 {
		t.Errorf("mail.lose called %d times over %d turns, want 3 and 2", n, len(m.asked()))
	}
}

// Nobody resolves the call's wait before unknown_timeout: the model is
// told E_OUTCOME_UNKNOWN naming the wait, as without "ask", and the call
// is not made again; an answer at the deadline is E_WAIT_EXPIRED.
func TestUnitResolveAgentCallTimeout(t *testing.T) {
	t.Parallel()
	b, m, id, hw := askingAgent(t, 1, "a@1.1.0.unknown.1")
	wantExpiredAtDeadline(t, b.st, id, hw)
	run := b.terminalAdvancing(t, id, 10*time.Minute)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v", run.Phase, run.Error)
	}
	if got := toolAnswer(m, 1, "c1"); !strings.Contains(got, CodeOutcomeUnknown) || !strings.Contains(got, hw.ID) {
		t.Errorf("the model was told %q, want %s naming %s", got, CodeOutcomeUnknown, hw.ID)
	}
	if n := m.called("mail.lose"); n != 1 {
		t.Errorf("mail.lose called %d times, want 1", n)
	}
}

// An agent that does not say "ask" tells its model E_OUTCOME_UNKNOWN at
// once, as before: no wait.
func TestUnitAgentCallUnknownWithoutAsk(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(1, 1), tc("c1", "mail.lose", `{"to":"ann"}`)), answer("sent", use(1, 1)))
	m.loses = 1
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "not_asking", `{}`)
	if run.Phase != store.PhaseCompleted || !strings.Contains(toolAnswer(m, 1, "c1"), CodeOutcomeUnknown) {
		t.Fatalf("%s %+v, model told %q; want completed, told %s", run.Phase, run.Error, toolAnswer(m, 1, "c1"), CodeOutcomeUnknown)
	}
}
