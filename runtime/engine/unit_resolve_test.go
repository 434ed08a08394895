package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

const unitResolveSrc = `
flow(name = "lose", nodes = [
    task("call", tool = "kit.lose", args = lambda ctx: ctx.input, at_most_once = True, next = "after"),
    task("after", tool = "kit.echo", args = lambda ctx: {"got": ctx.results["call"]}),
])

flow(name = "ask", nodes = [
    task("call", tool = "kit.lose", args = lambda ctx: ctx.input, at_most_once = True, on_unknown = "ask", unknown_timeout = "1h", next = "after"),
    task("after", tool = "kit.echo", args = lambda ctx: {"got": ctx.results["call"]}),
])

flow(name = "send", nodes = [
    task("send", tool = "kit.send", args = lambda ctx: {"to": "a@b.c", "gate": ctx.input.get("gate", "")}, at_most_once = True, next = "after"),
    task("after", tool = "kit.echo", args = lambda ctx: {"got": ctx.results["send"]}),
])
`

// probeTools stands between the engine and the kit's tools: a tool it
// has planned answers for declares a reconcile probe, which gives them in
// order (the last one again and again), and a tool it has a schema for
// declares that output schema.
type probeTools struct {
	Tools
	mu      sync.Mutex
	answers map[string][]probeReply
	schemas map[string]string
	asked   []tool.ReconcileRequest
}

type probeReply struct {
	res *tool.ReconcileResult
	err error
}

func (p *probeTools) wrap(t Tools) { p.Tools = t }

func (p *probeTools) LookupTool(name string) (flows.ToolInfo, bool) {
	info, ok := p.Tools.LookupTool(name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, probed := p.answers[name]; probed {
		info.Reconcile = true
	}
	if s := p.schemas[name]; s != "" {
		info.OutputSchema = []byte(s)
	}
	return info, ok
}

func (p *probeTools) Reconcile(_ context.Context, req tool.ReconcileRequest) (*tool.ReconcileResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, req)
	as := p.answers[req.Tool]
	if len(as) == 0 {
		return nil, errors.New("no answer planned")
	}
	if req.Deadline.IsZero() || req.IdempotencyKey == "" {
		return nil, errors.New("a probe without a deadline or a key")
	}
	if len(as) > 1 {
		p.answers[req.Tool] = as[1:]
	}
	return as[0].res, as[0].err
}

var _ tool.Reconciler = (*probeTools)(nil)

// answersOf lists the answers of the run's reconciled events, in order.
func (b *testBundle) answersOf(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range b.detailsOf(t, id, evReconciled) {
		out = append(out, ev["answer"].(string))
	}
	return out
}

// detailsOf lists the details of the run's events of type typ.
func (b *testBundle) detailsOf(t *testing.T, id, typ string) []map[string]any {
	t.Helper()
	evs, err := b.eng.Events(context.Background(), "alice", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e.Detail)
		}
	}
	return out
}

// An unknown outcome asks the tool's probe first: happened ends the call
// with the probe's result (or null) on the ok wire without calling again;
// not_happened makes the call once more (and only once: a second
// not_happened leaves it unknown); unknown, an error, an answer no probe
// may give or no probe at all end it E_OUTCOME_UNKNOWN. Each answer is a
// reconciled event.
func TestUnitProbeAnswers(t *testing.T) {
	t.Parallel()
	happened := func(out string) probeReply {
		r := &tool.ReconcileResult{Answer: tool.Happened}
		if out != "" {
			r.Output = json.RawMessage(out)
		}
		return probeReply{res: r}
	}
	answer := func(a tool.Reconciled) probeReply { return probeReply{res: &tool.ReconcileResult{Answer: a}} }
	tests := []struct {
		name    string
		times   int
		replies []probeReply // nil: the tool has no probe
		code    string       // "": completed
		got     string       // in the output, when completed
		calls   int
		answers []string
	}{
		{"happened with its result", 1, []probeReply{happened(`{"probed": 1}`)}, "", `"got":{"probed":1}`, 1, []string{"happened"}},
		{"happened without a result", 1, []probeReply{happened("")}, "", `"got":null`, 1, []string{"happened"}},
		{"happened with a result that is not JSON", 1, []probeReply{happened(`{nope`)}, CodeOutcomeUnknown, "", 1, []string{"error"}},
		{"not happened", 1, []probeReply{answer(tool.NotHappened)}, "", `"got":{"tries":2}`, 2, []string{"not_happened"}},
		{"not happened twice", 2, []probeReply{answer(tool.NotHappened)}, CodeOutcomeUnknown, "", 2, []string{"not_happened", "not_happened"}},
		{"unknown", 1, []probeReply{answer(tool.Unknown)}, CodeOutcomeUnknown, "", 1, []string{"unknown"}},
		{"an error", 1, []probeReply{{err: errors.New("probe down")}}, CodeOutcomeUnknown, "", 1, []string{"error"}},
		{"an answer no probe gives", 1, []probeReply{answer("maybe")}, CodeOutcomeUnknown, "", 1, []string{"error"}},
		{"no probe", 1, nil, CodeOutcomeUnknown, "", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pt := &probeTools{answers: map[string][]probeReply{}}
			if tt.replies != nil {
				pt.answers["kit.lose"] = tt.replies
			}
			b := setupUnit(t, Config{Tools: pt}, unitResolveSrc)
			id := b.start(t, "lose", `{"times": `+string(rune('0'+tt.times))+`, "kind": "unknown"}`, "")
			run := b.waitTerminal(t, id)
			if tt.code != "" {
				wantFailed(t, run, tt.code)
			} else if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), tt.got) {
				t.Fatalf("%s %s %+v, want completed with %s", run.Phase, run.Output, run.Error, tt.got)
			}
			if n := b.tools.Calls("kit.lose"); n != tt.calls {
				t.Errorf("%d calls, want %d", n, tt.calls)
			}
			if got := b.answersOf(t, id); strings.Join(got, ",") != strings.Join(tt.answers, ",") {
				t.Errorf("reconciled %v, want %v", got, tt.answers)
			}
			if len(pt.asked) > 0 && pt.asked[0].IdempotencyKey != id+"/call/1" {
				t.Errorf("probe asked for key %q", pt.asked[0].IdempotencyKey)
			}
			err := b.mem.View(context.Background(), func(tx store.Tx) error {
				rec, err := tx.IdemGet(id + "/call/1")
				if err != nil {
					return err
				}
				if rec.State != store.IdemDone {
					t.Errorf("record %+v, want done", rec)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The engine dies while an at-most-once call is in the tool; the next
// engine finds the started record without a result, asks the probe, which
// says it happened: the node goes on with the probe's result and the tool
// is never called again.
func TestUnitProbeAfterCrash(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setupUnit(t, Config{LeaseTimeout: lease}, unitResolveSrc)
	id := b.start(t, "send", `{"gate": "held"}`, "")
	b.kitIs(t, "the send in the tool", func(k *kit) bool { return k.blocked == 1 })
	if err := b.mem.Close(); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Stop(stopped)

	mem, err := b.mem.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	pt := &probeTools{Tools: b.tools, answers: map[string][]probeReply{
		"kit.send": {{res: &tool.ReconcileResult{Answer: tool.Happened, Output: json.RawMessage(`{"sent_to": "a@b.c", "probed": true}`)}}}}}
	b.eng, b.st = openEngine(t, Config{Store: mem, Tools: pt, Clock: b.clock, LeaseTimeout: lease}, ""), mem
	run := b.untilAfterRestart(t, id, lease, func(r *store.Run) bool { return r.Phase.Terminal() })
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"probed":true`) {
		t.Fatalf("%s %s %+v, want completed with the probe's result", run.Phase, run.Output, run.Error)
	}
	if n := b.sends(); n != 1 || b.tools.Calls("kit.send") != 1 {
		t.Fatalf("%d sends over %d calls: the probe said it happened", n, b.tools.Calls("kit.send"))
	}
	if got := b.answersOf(t, id); len(got) != 1 || got[0] != "happened" {
		t.Errorf("reconciled %v", got)
	}
}

// parkedUnknown starts the ask flow with kit.lose losing its first times
// answers, and waits until the run parks on an unknown wait with id want.
func (b *testBundle) parkedUnknown(t *testing.T, times int, want string) (string, HumanWait) {
	t.Helper()
	id := b.start(t, "ask", `{"times": `+string(rune('0'+times))+`, "kind": "unknown"}`, "")
	return id, b.unknownWaitOf(t, id, want)
}

// unknownWaitOf waits until run id's one open wait is the unknown wait
// want.
func (b *testBundle) unknownWaitOf(t *testing.T, id, want string) HumanWait {
	t.Helper()
	return oneOpenWait(t, b.eng, id, want)
}

// wantExpiredAtDeadline checks that an answer to unknown wait hw of run id
// at its deadline, before the run is woken, is refused E_WAIT_EXPIRED.
func wantExpiredAtDeadline(t *testing.T, st store.Store, id string, hw HumanWait) {
	t.Helper()
	err := st.View(context.Background(), func(tx store.Tx) error {
		_, _, refusal, err := resolveTargetTx(tx, ResolveParams{Owner: "alice", RunID: id, WaitID: hw.ID}, hw.Until)
		if refusal == nil || refusal.Code != CodeWaitExpired {
			t.Errorf("at the deadline: %v (%v), want %s", refusal, err, CodeWaitExpired)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// resolver answers wait waitID of run id with p, as alice unless p says
// another owner.
func (b *testBundle) resolver(id, waitID string) func(p ResolveParams) error {
	return func(p ResolveParams) error {
		p.RunID, p.WaitID = id, waitID
		if p.Owner == "" {
			p.Owner = "alice"
		}
		_, err := b.eng.Ops().Resolve(context.Background(), p)
		return err
	}
}

// A node that says on_unknown = "ask" parks on an unknown wait showing
// the tool, its arguments, the key and when the call started. Approve is
// refused there (it takes resolve), so are another owner (E_NOT_FOUND), a
// result outside the tool's output schema (E_BAD_RESULT, the wait stays
// open) and a result with not happened. Resolved happened, the node goes
// on its ok wire with the result and the tool is never called again; a
// second answer is E_ALREADY_DECIDED.
func TestUnitResolveHappened(t *testing.T) {
	t.Parallel()
	pt := &probeTools{schemas: map[string]string{"kit.lose": `{"type": "object", "required": ["sent"]}`}}
	b := setupUnit(t, Config{Tools: pt}, unitResolveSrc)
	ctx := context.Background()
	id, hw := b.parkedUnknown(t, 1, "call@1.unknown.1")
	var shown unknownShown
	if err := json.Unmarshal(hw.Shown, &shown); err != nil {
		t.Fatal(err)
	}
	if hw.Kind != WaitUnknown || shown.Tool != "kit.lose" || shown.Key != id+"/call/1" || shown.StartedAt.IsZero() ||
		!strings.Contains(string(shown.Arguments), `"times":1`) || !hw.Until.Equal(hw.Since.Add(time.Hour)) {
		t.Fatalf("wait %+v shows %s", hw, hw.Shown)
	}
	run, _ := b.eng.Get(ctx, "alice", id)
	if all, err := b.eng.Waits(ctx, run); err != nil || len(all) != 1 || all[0].ID != hw.ID || all[0].Kind != WaitUnknown {
		t.Fatalf("waits %+v (%v)", all, err)
	}

	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: id, Node: hw.ID, Approve: true}); codeOf(err) != CodeNotWaiting || !strings.Contains(err.Error(), "weir run resolve") {
		t.Errorf("approve of an unknown wait: %v, want %s pointing at resolve", err, CodeNotWaiting)
	}
	resolve := b.resolver(id, hw.ID)
	refusals := []struct {
		name string
		p    ResolveParams
		code string
	}{
		{"another owner", ResolveParams{Owner: "bob", Happened: true, Result: json.RawMessage(`{"sent": true}`)}, CodeNotFound},
		{"outside the output schema", ResolveParams{Happened: true, Result: json.RawMessage(`{"x": 1}`)}, CodeBadResult},
		{"not JSON", ResolveParams{Happened: true, Result: json.RawMessage(`{x`)}, CodeBadResult},
		{"a result that did not happen", ResolveParams{Result: json.RawMessage(`{"sent": true}`)}, CodeBadRequest},
		{"a reason too long", ResolveParams{Reason: strings.Repeat("x", MaxResolveReasonBytes+1)}, CodeBadRequest},
	}
	for _, r := range refusals {
		if err := resolve(r.p); codeOf(err) != r.code {
			t.Errorf("%s: %v, want %s", r.name, err, r.code)
		}
	}
	if _, err := b.eng.Ops().Resolve(ctx, ResolveParams{Owner: "alice", RunID: id, WaitID: "call@1.unknown.9", Happened: true}); codeOf(err) != CodeNotWaiting {
		t.Errorf("a wait that does not exist: %v", err)
	}
	b.unknownWaitOf(t, id, hw.ID) // still open after every refusal

	if err := resolve(ResolveParams{Happened: true, Result: json.RawMessage(`{"sent": true}`), Reason: "the outbox has it"}); err != nil {
		t.Fatal(err)
	}
	run = b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":{"sent":true}`) {
		t.Fatalf("%s %s %+v, want completed with the resolved result", run.Phase, run.Output, run.Error)
	}
	if n := b.tools.Calls("kit.lose"); n != 1 {
		t.Errorf("%d calls, want 1: a call resolved as happened is never made again", n)
	}
	if err := resolve(ResolveParams{Happened: true}); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("second resolve: %v, want %s", err, CodeAlreadyDecided)
	}
	evs := b.detailsOf(t, id, evResolved)
	if len(evs) != 1 || evs[0]["by"] != "alice" || evs[0]["reason"] != "the outbox has it" || evs[0]["happened"] != true || evs[0]["wait"] != hw.ID {
		t.Errorf("resolved events %v", evs)
	}
}

// Resolved not happened, the call is made exactly once more; when that
// call's outcome is unknown again the run parks on a new wait (.2), whose
// not happened makes it once more again.
func TestUnitResolveNotHappened(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitResolveSrc)
	ctx := context.Background()
	id, hw := b.parkedUnknown(t, 2, "call@1.unknown.1")
	if _, err := b.eng.Ops().Resolve(ctx, ResolveParams{Owner: "alice", RunID: id, WaitID: hw.ID}); err != nil {
		t.Fatal(err)
	}
	second := b.unknownWaitOf(t, id, "call@1.unknown.2")
	if n := b.tools.Calls("kit.lose"); n != 2 {
		t.Fatalf("%d calls after not happened, want 2", n)
	}
	if _, err := b.eng.Ops().Resolve(ctx, ResolveParams{Owner: "alice", RunID: id, WaitID: hw.ID}); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("the first wait again: %v, want %s", err, CodeAlreadyDecided)
	}
	if _, err := b.eng.Ops().Resolve(ctx, ResolveParams{Owner: "alice", RunID: id, WaitID: second.ID, Reason: "not in the outbox"}); err != nil {
		t.Fatal(err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":{"tries":3}`) {
		t.Fatalf("%s %s %+v", run.Phase, run.Output, run.Error)
	}
	if n := b.tools.Calls("kit.lose"); n != 3 {
		t.Errorf("%d calls, want 3: one, and one more after each not happened", n)
	}
	if n := count(b.events(t, id), evToolStarted); n != 3 {
		t.Errorf("%d tool_started, want one per call", n)
	}
}

// Nobody resolves the wait before unknown_timeout: the node takes its
// error wire with E_OUTCOME_UNKNOWN and the call is not made again; an
// answer after the deadline is E_WAIT_EXPIRED.
func TestUnitUnknownTimeout(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitResolveSrc)
	id, hw := b.parkedUnknown(t, 1, "call@1.unknown.1")
	// Past the deadline, before the run is woken: the answer is refused.
	wantExpiredAtDeadline(t, b.mem, id, hw)
	run := b.advanceUntil(t, id, 10*time.Minute, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	wantFailed(t, run, CodeOutcomeUnknown)
	if !strings.Contains(run.Error.Message, hw.ID) {
		t.Errorf("message %q does not name the wait", run.Error.Message)
	}
	if n := b.tools.Calls("kit.lose"); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
}

// The probe's decision, without a store.
func TestDecideProbe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		res       *tool.ReconcileResult
		err       error
		remade    bool
		elsewhere bool
		answer    string
		remake    bool
		hasOut    bool
		withWhy   bool
	}{
		{&tool.ReconcileResult{Answer: tool.Happened, Output: json.RawMessage(`1`)}, nil, false, false, "happened", false, true, false},
		{&tool.ReconcileResult{Answer: tool.Happened}, nil, true, false, "happened", false, true, false},
		{&tool.ReconcileResult{Answer: tool.NotHappened}, nil, false, false, "not_happened", true, false, false},
		{&tool.ReconcileResult{Answer: tool.NotHappened}, nil, true, false, "not_happened", false, false, true},
		// Another host made the call: its state is not this probe's to
		// see, so not_happened makes no second call; happened is trusted.
		{&tool.ReconcileResult{Answer: tool.NotHappened}, nil, false, true, "not_happened", false, false, true},
		{&tool.ReconcileResult{Answer: tool.Happened, Output: json.RawMessage(`1`)}, nil, false, true, "happened", false, true, false},
		{&tool.ReconcileResult{Answer: tool.Unknown}, nil, false, false, "unknown", false, false, false},
		{nil, errors.New("down"), false, false, "error", false, false, true},
		{nil, nil, false, false, "error", false, false, true},
		{&tool.ReconcileResult{Answer: "maybe"}, nil, false, false, "error", false, false, true},
	}
	for i, tt := range tests {
		v := decideProbe(tt.res, tt.err, tt.remade, tt.elsewhere)
		if v.Answer != tt.answer || v.Remake != tt.remake || (v.Output != nil) != tt.hasOut || (v.Why != "") != tt.withWhy {
			t.Errorf("%d: %+v", i, v)
		}
	}
}
