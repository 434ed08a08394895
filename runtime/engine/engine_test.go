package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

const flowsSrc = `
def echo_args(ctx):
    return {"n": ctx.input["n"], "step": 1}

flow(
    name = "ten",
    nodes = [
        task("s0", tool = "testkit.echo", args = echo_args, next = "s1"),
        task("s1", tool = "testkit.echo", args = lambda ctx: {"prev": ctx.results["s0"]}, next = "s2"),
        task("s2", tool = "testkit.echo", next = "s3"),
        task("s3", tool = "testkit.echo", next = "s4"),
        task("s4", tool = "testkit.echo", next = "s5"),
        task("s5", tool = "testkit.echo", next = "s6"),
        task("s6", tool = "testkit.echo", next = "s7"),
        task("s7", tool = "testkit.echo", next = "s8"),
        task("s8", tool = "testkit.echo", next = "s9"),
        task("s9", tool = "testkit.echo", args = lambda ctx: {"first": ctx.results["s1"]["prev"]["n"]}),
    ],
)

flow(
    name = "mail",
    nodes = [
        task("send", tool = "mail.send", args = lambda ctx: {"to": "a@b.c", "body": ctx.input["body"]}, at_most_once = True),
    ],
)

flow(
    name = "sleepy",
    nodes = [
        task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]}),
    ],
)

flow(
    name = "choose",
    output = lambda ctx: {"took": ctx.results.get("big", ctx.results.get("small"))},
    nodes = [
        branch("is_big", cond = lambda ctx: ctx.input["n"] > 10, then = "big", otherwise = "small"),
        task("big", tool = "testkit.echo", args = lambda ctx: {"size": "big"}),
        task("small", tool = "testkit.echo", args = lambda ctx: {"size": "small"}),
    ],
)

flow(
    name = "priced",
    budget = 12,
    nodes = [
        task("a", tool = "testkit.cost", args = lambda ctx: {"cost": 5}, next = "b"),
        task("b", tool = "testkit.cost", args = lambda ctx: {"cost": 5}, next = "c"),
        task("c", tool = "testkit.cost", args = lambda ctx: {"cost": 5}, error = "over"),
        task("over", tool = "testkit.echo", args = lambda ctx: {"over": True}),
    ],
)
`

func TestTenStepFlowCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	id := b.start(t, "ten", `{"n": 7}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s error %+v", run.Phase, run.Error)
	}
	var out map[string]any
	if err := json.Unmarshal(run.Output, &out); err != nil || out["first"] != float64(7) {
		t.Fatalf("output %s: want the last echo {\"first\":7}", run.Output)
	}
	evs := b.events(t, id)
	for _, want := range []string{evAccepted, evQueued, evLeased, evCompleted} {
		if count(evs, want) != 1 {
			t.Errorf("want one %q event, timeline %v", want, evs)
		}
	}
	if n := count(evs, evNodeDone); n != 10 {
		t.Errorf("%d node_completed events, want 10", n)
	}
	st := b.eng.Stats()
	for _, ts := range st.Types {
		if ts.Type == "testkit.echo" && (ts.Attempts != 10 || ts.Units != 10 || ts.Amplification != 1) {
			t.Errorf("echo figures %+v, want 10 attempts, 10 units, amplification 1", ts)
		}
	}
}

func TestBranchAndOutputCallable(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	for _, tc := range []struct {
		n    int
		want string
	}{{3, "small"}, {30, "big"}} {
		id := b.start(t, "choose", fmt.Sprintf(`{"n": %d}`, tc.n), "")
		run := b.waitTerminal(t, id)
		if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"size":"`+tc.want+`"`) {
			t.Errorf("n=%d: phase %s output %s, want size %s", tc.n, run.Phase, run.Output, tc.want)
		}
	}
}

func TestDedupByOwnerAndRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	ctx := context.Background()
	first, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{"n":1}`), RequestID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	// Same input, spaced differently: the same run.
	again, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{ "n" : 1 }`), RequestID: "req-1"})
	if err != nil || again.RunID != first.RunID || !again.Existing {
		t.Fatalf("resubmit: %+v %v, want existing run %s", again, err, first.RunID)
	}
	// Different input: refused, nothing created.
	_, err = b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{"n":2}`), RequestID: "req-1"})
	if ErrorCode(err) != CodeDedupConflict {
		t.Fatalf("different input: %v, want %s", err, CodeDedupConflict)
	}
	// Another owner with the same request id: a second run.
	other, err := b.eng.Submit(ctx, StartRequest{Owner: "bob", Flow: "ten", Input: json.RawMessage(`{"n":1}`), RequestID: "req-1"})
	if err != nil || other.RunID == first.RunID {
		t.Fatalf("other owner: %+v %v, want a new run", other, err)
	}
	runs, err := b.eng.List(ctx, "alice", store.RunListParams{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("alice has %d runs (%v), want 1", len(runs), err)
	}
}

// TestDedupRefusesAnotherFlow: the flow is part of what a request id
// means, so the same id with the same input naming another flow — a
// registered one, or one that does not exist — is refused, naming the run
// and its flow, and starts nothing.
func TestDedupRefusesAnotherFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	ctx := context.Background()
	first, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "choose", Input: json.RawMessage(`{"n":1}`), RequestID: "api-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, flow := range []string{"ten", "no_such_flow"} {
		_, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: flow, Input: json.RawMessage(`{"n":1}`), RequestID: "api-1"})
		if ErrorCode(err) != CodeDedupConflict || !strings.Contains(err.Error(), first.RunID) || !strings.Contains(err.Error(), `flow "choose"`) {
			t.Errorf("flow %s with the id of a choose run: %v, want %s naming %s and its flow", flow, err, CodeDedupConflict, first.RunID)
		}
	}
	again, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "choose", Input: json.RawMessage(`{"n":1}`), RequestID: "api-1"})
	if err != nil || again.RunID != first.RunID {
		t.Fatalf("the same flow and input: %+v %v, want run %s", again, err, first.RunID)
	}
	runs, err := b.eng.List(ctx, "alice", store.RunListParams{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("alice has %d runs (%v), want 1", len(runs), err)
	}
}

// TestDedupRecordWithoutFlow: a dedup record written before records kept
// their flow is checked through its run.
func TestDedupRecordWithoutFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	ctx := context.Background()
	first, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "choose", Input: json.RawMessage(`{"n":1}`), RequestID: "old-1"})
	if err != nil {
		t.Fatal(err)
	}
	// Make the record what an earlier version wrote: no flow.
	if err := b.st.Update(ctx, func(tx store.Tx) error {
		d, err := tx.DedupGet("alice", "old-1")
		if err != nil {
			return err
		}
		if d.Flow != "choose" {
			return fmt.Errorf("the new record keeps flow %q, want choose", d.Flow)
		}
		d.Flow = ""
		return tx.DedupPut(d)
	}); err != nil {
		t.Fatal(err)
	}
	_, err = b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{"n":1}`), RequestID: "old-1"})
	if ErrorCode(err) != CodeDedupConflict || !strings.Contains(err.Error(), `flow "choose"`) {
		t.Errorf("another flow against an old record: %v, want %s naming flow choose", err, CodeDedupConflict)
	}
	_, err = b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "choose", Input: json.RawMessage(`{"n":2}`), RequestID: "old-1"})
	if ErrorCode(err) != CodeDedupConflict || !strings.Contains(err.Error(), "different input") {
		t.Errorf("another input against an old record: %v, want %s", err, CodeDedupConflict)
	}
	again, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "choose", Input: json.RawMessage(`{"n":1}`), RequestID: "old-1"})
	if err != nil || again.RunID != first.RunID || !again.Existing {
		t.Fatalf("the same request against an old record: %+v %v, want run %s", again, err, first.RunID)
	}
}

func TestSubmitRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	ctx := context.Background()
	for _, tc := range []struct {
		req  StartRequest
		code string
	}{
		{StartRequest{Owner: "alice", Flow: "nope"}, CodeUnknownFlow},
		{StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{"n":`)}, CodeBadInput},
		{StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{} {}`)}, CodeBadInput},
		{StartRequest{Flow: "ten"}, CodeBadRequest},
	} {
		if _, err := b.eng.Submit(ctx, tc.req); ErrorCode(err) != tc.code {
			t.Errorf("%+v: got %v, want %s", tc.req, err, tc.code)
		}
	}
	if runs, _ := b.eng.List(ctx, "alice", store.RunListParams{}); len(runs) != 0 {
		t.Errorf("refusals created %d runs", len(runs))
	}
}

func TestNonIdempotentToolRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	id := b.start(t, "mail", `{"body":"hello"}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s error %+v", run.Phase, run.Error)
	}
	if n := b.outboxLines(t); n != 1 {
		t.Fatalf("outbox has %d lines, want 1", n)
	}
	evs := b.events(t, id)
	if count(evs, evToolStarted) != 1 {
		t.Errorf("want one durable tool_started before the call, timeline %v", evs)
	}
}

func TestBudgetExhaustedTakesErrorWire(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	id := b.start(t, "priced", `{}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"over":true`) {
		t.Fatalf("phase %s output %s error %+v, want the third call refused onto its error wire", run.Phase, run.Output, run.Error)
	}
	if run.Spent != 10 {
		t.Errorf("spent %d, want 10 (two calls of 5; the third was never paid)", run.Spent)
	}
}

func TestCancelAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	ctx := context.Background()

	// Running: the plugin call's context is cancelled; the run ends cancelled.
	id := b.start(t, "sleepy", `{"ms": 60000}`, "")
	b.wait(t, id, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	began := time.Now()
	a, err := b.eng.Cancel(ctx, "alice", id)
	if err != nil || a != CancelRequested {
		t.Fatalf("cancel running: %v %v", a, err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCancelled || run.Error == nil || run.Error.Code != CodeCancelled {
		t.Fatalf("phase %s error %+v, want cancelled", run.Phase, run.Error)
	}
	if time.Since(began) > 10*time.Second {
		t.Errorf("cancel took %s: the sleep was not interrupted", time.Since(began))
	}
	b.cancelEnded(t, id)
}

// TestOverload offers ten times what the slots admit: every run is either
// accepted and finished, or refused with a reason; none is lost.
func TestOverload(t *testing.T) {
	t.Parallel()
	const workers, maxQueued, offered = 4, 20, 240
	b := setup(t, Config{Workers: workers, MaxQueued: maxQueued}, flowsSrc)
	ctx := context.Background()
	var mu sync.Mutex
	var accepted []string
	refused := map[string]int{}
	var wg sync.WaitGroup
	for i := range offered {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "sleepy", Input: json.RawMessage(`{"ms": 20}`), RequestID: fmt.Sprint("o", i)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused[ErrorCode(err)]++
				return
			}
			accepted = append(accepted, res.RunID)
		}()
	}
	wg.Wait()
	if len(accepted)+refused[CodeQueueFull] != offered {
		t.Fatalf("accepted %d + refused %v != offered %d", len(accepted), refused, offered)
	}
	if refused[CodeQueueFull] == 0 {
		t.Fatalf("nothing refused: the queue bound did not hold (accepted %d)", len(accepted))
	}
	for _, id := range accepted {
		if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
			t.Errorf("accepted run %s ended %s %+v", id, run.Phase, run.Error)
		}
	}
	runs, _ := b.eng.List(ctx, "alice", store.RunListParams{})
	if len(runs) != len(accepted) {
		t.Errorf("store holds %d runs, accepted %d", len(runs), len(accepted))
	}
	for _, ts := range b.eng.Stats().Types {
		if ts.Type == "testkit.sleep" && ts.Amplification > 1.0 {
			t.Errorf("amplification %.2f under overload, want 1", ts.Amplification)
		}
	}
	t.Logf("offered %d: accepted %d, refused %v", offered, len(accepted), refused)
}

func TestStorageFailureClosesAdmission(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	ctx := context.Background()
	b.st.Close() // the store breaks under the engine
	_, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "ten", Input: json.RawMessage(`{"n":1}`)})
	var e *Error
	if !errors.As(err, &e) || e.Class != ClassStorage {
		t.Fatalf("submit on a broken store: %v, want a storage-class error", err)
	}
	h := b.eng.Health(ctx)
	if h.Admission != CodeStorage {
		t.Fatalf("health %+v, want admission closed with %s", h, CodeStorage)
	}
	// Closed means closed: the next start is refused before touching the store.
	if _, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "ten"}); ErrorCode(err) != CodeStorage {
		t.Fatalf("second submit: %v", err)
	}
}

func TestContinuationDecodeRefusesUnknown(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"v":2,"node":"x"}`, `{"v":0}`, `[]`} {
		if _, err := decodeContinuation([]byte(in)); err == nil {
			t.Errorf("%q decoded without error", in)
		}
	}
	c, err := decodeContinuation(encodeContinuation(newContinuation("a")))
	if err != nil || c.Node != "a" {
		t.Fatalf("round trip: %+v %v", c, err)
	}
}

func FuzzDecodeContinuation(f *testing.F) {
	f.Add(encodeContinuation(newContinuation("a")))
	f.Add([]byte(`{"v":1,"node":"x","results":{"a":1},"visits":{"a":-1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeContinuation(b)
		if err == nil && c.V != continuationVersion {
			t.Fatalf("accepted version %d", c.V)
		}
	})
}

// A context the caller cancelled is not a storage failure: admission stays
// open.
func TestCancelledContextIsNotAStorageFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, flowsSrc)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.eng.admission.storageFailed(ctx.Err()); err.Class == ClassStorage {
		t.Fatalf("a cancelled context was taken for a storage failure: %v", err)
	}
	if h := b.eng.Health(context.Background()); h.Admission != "open" {
		t.Fatalf("admission %s after a cancelled context", h.Admission)
	}
}
