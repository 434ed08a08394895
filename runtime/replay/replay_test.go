package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/tool/tooltest"
	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/chat"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// greet is the flow the tests record: a tool, a branch on the input,
// an at-most-once send on one side.
const greet = `flow(name = "greet", nodes = [
    task("hello", tool = "kit.echo", args = lambda ctx: {"msg": "hi " + ctx.input["name"], "email": ctx.input["email"]}, next = "long"),
    branch("long",
        cond = lambda ctx: len(ctx.input["name"]) > 3,
        then = "send", otherwise = "done"),
    task("send", tool = "kit.send", args = lambda ctx: {"to": ctx.input["name"]}, next = "done", at_most_once = True),
    task("done", tool = "kit.echo", args = {"ok": True}),
])
`

// recorded is a run of a flow on an engine of the unit layer (memstore,
// fake clock, in-process tools) and its recording, made through the
// same reads a daemon serves.
type recorded struct {
	rec   *Recording
	sends *atomic.Int64 // kit.send's calls, ever
}

func record(t testing.TB, src, input string, redact ...string) recorded {
	t.Helper()
	eng, id, sends := runLive(t, src, input)
	rec, err := Record(context.Background(), engineDaemon{eng: eng, owner: "ann"}, id, redact, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return recorded{rec: rec, sends: sends}
}

// recordDeciding is record with decide making the run's decisions
// (runDeciding).
func recordDeciding(t testing.TB, src, input string, decide func(eng *engine.Engine, w engine.HumanWait) engine.DecideParams) *Recording {
	t.Helper()
	eng, id, _ := runDeciding(t, src, input, decide)
	rec, err := Record(context.Background(), engineDaemon{eng: eng, owner: "ann"}, id, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// runLive runs src's first flow to its end on an engine of the unit
// layer and returns the engine, the run and kit.send's count.
func runLive(t testing.TB, src, input string) (*engine.Engine, string, *atomic.Int64) {
	t.Helper()
	return runDeciding(t, src, input, nil)
}

// runDeciding is runLive with decide called on each open decision of the
// run (nil: nobody decides, and the clock moves past the open waits'
// deadlines).
func runDeciding(t testing.TB, src, input string, decide func(eng *engine.Engine, w engine.HumanWait) engine.DecideParams) (*engine.Engine, string, *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	sends := &atomic.Int64{}
	tools, err := tooltest.New(t.TempDir(),
		sdk.Tool{Name: "kit.echo", Idempotent: true, Run: func(_ context.Context, c *sdk.Call) (any, error) { return c.Input, nil }},
		sdk.Tool{Name: "kit.send", Effect: sdk.EffectAtMostOnce, Run: func(_ context.Context, c *sdk.Call) (any, error) {
			sends.Add(1)
			return map[string]any{"sent": true}, nil
		}},
		sdk.Tool{Name: "kit.look", Effect: sdk.EffectRead, Run: func(_ context.Context, c *sdk.Call) (any, error) { return c.Input, nil }},
		sdk.Tool{Name: "kit.flaky", Idempotent: true, Run: func(context.Context, *sdk.Call) (any, error) {
			return nil, sdk.Retryable(errors.New("down again"))
		}},
		sdk.Tool{Name: "kit.refuse", Idempotent: true, Run: func(context.Context, *sdk.Call) (any, error) {
			return nil, sdk.WithCode(errors.New("no such customer"), "E_NO_CUSTOMER")
		}},
		scriptedModel())
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// Backoffs of a few milliseconds: a retried call comes due at the
	// next tick, which the loop below moves the clock to when the run
	// has stood still.
	eng, err := engine.Open(engine.Config{Store: mem, Tools: tools, Clock: clk, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Stop(context.Background()) })
	res, err := eng.RegisterAs(ctx, "ann", []engine.SourceFile{{Path: "greet.star", Src: src}})
	if err != nil || len(res.Diagnostics.Errors()) > 0 {
		t.Fatalf("register: %v %v", err, res.Diagnostics)
	}
	started, err := eng.Submit(ctx, engine.StartRequest{Owner: "ann", Flow: res.Flows[0].Name, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatal(err)
	}
	var seen uint64
	testutil.Eventually(t, time.Minute, func() error {
		run, err := eng.Get(ctx, "ann", started.RunID)
		if err == nil && !run.Phase.Terminal() {
			if evs, err := eng.Events(ctx, "ann", started.RunID, seen, 1000); err == nil && len(evs) > 0 {
				seen = evs[len(evs)-1].Seq
			} else if err == nil {
				clk.Advance(100 * time.Millisecond) // still: a backoff is due at the next tick
			}
			if run.Phase == store.PhaseWaiting {
				waits, err := eng.HumanWaits(ctx, "ann", started.RunID)
				if err != nil {
					return err
				}
				if decide == nil && len(waits) > 0 {
					// Nobody decides: the waits' deadlines pass. Only
					// then: a clock moved while calls run would take
					// their leases past their deadline.
					clk.Advance(10 * time.Minute)
				}
				for _, w := range waits {
					if decide == nil {
						break
					}
					p := decide(eng, w)
					p.Owner, p.RunID, p.Node = "ann", started.RunID, w.ID
					if _, err := eng.DecideWait(ctx, p); err != nil {
						t.Fatalf("decide %s: %v", w.ID, err)
					}
				}
			}
			err = fmt.Errorf("run is %s", run.Phase)
		}
		return err
	})
	return eng, started.RunID, sends
}

// engineDaemon serves an engine's reads as the API does, JSON included:
// the recording sees what a client of a daemon would.
type engineDaemon struct {
	eng   *engine.Engine
	owner string
}

func (d engineDaemon) RunGet(ctx context.Context, id string) (*apitypes.Run, error) {
	run, err := d.eng.Get(ctx, d.owner, id)
	if err != nil {
		return nil, err
	}
	return wire(api.ViewOf(run, nil))
}

func (d engineDaemon) FlowSourceAt(ctx context.Context, name, hash string) (*apitypes.FlowSource, error) {
	src, err := d.eng.FlowSource(ctx, name, hash)
	if err != nil {
		return nil, err
	}
	out := &apitypes.FlowSource{}
	for _, f := range src.Files {
		out.Files = append(out.Files, apitypes.SourceFile{Path: f.Path, Src: f.Src})
	}
	return out, nil
}

func (d engineDaemon) RunEventsAll(ctx context.Context, id string, _ client.EventListParams) iter.Seq2[apitypes.Event, error] {
	return func(yield func(apitypes.Event, error) bool) {
		evs, err := d.eng.Events(ctx, d.owner, id, 0, 100000)
		if err != nil {
			yield(apitypes.Event{}, err)
			return
		}
		for _, ev := range evs {
			w, err := wire(&apitypes.Event{Seq: ev.Seq, RunID: ev.RunID, At: ev.At, Type: ev.Type, Attempt: ev.Attempt, Node: ev.Node, Detail: ev.Detail})
			if !yield(*w, err) {
				return
			}
		}
	}
}

func (d engineDaemon) RunJournal(ctx context.Context, id string) (*apitypes.RunJournal, error) {
	j, err := d.eng.Ops().Journal(ctx, d.owner, id)
	if err != nil {
		return nil, err
	}
	out, err := api.JournalOf(j)
	if err != nil {
		return nil, err
	}
	return wire(out)
}

// wire is v as a client decodes it from the daemon's JSON.
func wire[T any](v *T) (*T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out T
	return &out, json.Unmarshal(b, &out)
}

// roundTrip writes rec to a file and reads it back.
func roundTrip(t testing.TB, rec *Recording) (*Recording, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.weirrun")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return back, path
}

func replayOf(t *testing.T, rec *Recording, src string) *Result {
	t.Helper()
	var opts Options
	if src != "" {
		opts.Files = []apitypes.SourceFile{{Path: "greet.star", Src: src}}
	}
	res, err := Replay(context.Background(), rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRecordingRoundTrips: a run's recording, written and read back,
// replays to a pass on the recorded sources, every call answered from
// it and the at-most-once tool never called again.
func TestRecordingRoundTrips(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "alice", "email": "a@example.com"}`)
	rec, _ := roundTrip(t, r.rec)
	if len(rec.Steps) != 4 || len(rec.Calls) != 3 || rec.Run.Phase != "completed" {
		t.Fatalf("recorded %d steps, %d calls, phase %s: %+v", len(rec.Steps), len(rec.Calls), rec.Run.Phase, rec)
	}
	if got := rec.Calls[0].Args; !canonicalEqual(got, json.RawMessage(`{"msg": "hi alice", "email": "a@example.com"}`)) {
		t.Errorf("hello's arguments recorded as %s", got)
	}
	res := replayOf(t, rec, "")
	if !res.Pass || res.Steps != 4 || res.Calls != 3 || res.Phase != "completed" {
		t.Fatalf("replay: %+v %v", res, res.Divergence)
	}
	if n := r.sends.Load(); n != 1 {
		t.Errorf("kit.send was called %d times; once, by the recorded run, and never by the replay", n)
	}
}

// TestReplayReportsAChangedBranchAtItsLine: a branch whose condition now
// sends the run the other way is the first divergence, at the line of
// its cond.
func TestReplayReportsAChangedBranchAtItsLine(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "alice", "email": "a@example.com"}`)
	changed := strings.Replace(greet, `len(ctx.input["name"]) > 3`, `len(ctx.input["name"]) > 10`, 1)
	res := replayOf(t, r.rec, changed)
	d := res.Divergence
	if res.Pass || d == nil || d.Kind != KindPath || d.Node != "long" {
		t.Fatalf("replay: %+v %v", res, d)
	}
	if !strings.HasPrefix(d.Pos, "greet.star:4:") || !strings.Contains(d.Message, "to done") || !strings.Contains(d.Message, "to send") {
		t.Errorf("divergence %q at %s; want the branch's cond at greet.star:4, both wires named", d.Message, d.Pos)
	}
	if n := r.sends.Load(); n != 1 {
		t.Errorf("kit.send was called %d times", n)
	}
}

// TestReplayReportsOtherArguments: a task that now calls its tool with
// other arguments diverges there, both sides shown.
func TestReplayReportsOtherArguments(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "alice", "email": "a@example.com"}`)
	changed := strings.Replace(greet, `"hi " + ctx.input["name"]`, `"hello " + ctx.input["name"]`, 1)
	d := replayOf(t, r.rec, changed).Divergence
	if d == nil || d.Kind != KindArgs || d.Node != "hello" || !strings.HasPrefix(d.Pos, "greet.star:2:") ||
		!strings.Contains(d.Recorded, "hi alice") || !strings.Contains(d.Replayed, "hello alice") {
		t.Fatalf("divergence %+v", d)
	}
}

// TestReplayOfACallTheRecordingLacks: a node the run never had calls a
// tool: a divergence naming it, not a crash, and the tool is never
// reached.
func TestReplayOfACallTheRecordingLacks(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "bo", "email": "b@example.com"}`) // short: no send
	changed := strings.Replace(greet, `task("done", tool = "kit.echo", args = {"ok": True}),`,
		`task("done", tool = "kit.echo", args = {"ok": True}, next = "extra"),
    task("extra", tool = "kit.send", args = {"to": "x"}, at_most_once = True),`, 1)
	res := replayOf(t, r.rec, changed)
	d := res.Divergence
	if res.Pass || d == nil || d.Kind != KindLacks || d.Node != "extra" || !strings.Contains(d.Message, "no answer") || !strings.HasPrefix(d.Pos, "greet.star:8:") {
		t.Fatalf("replay: %+v %v", res, d)
	}
	if n := r.sends.Load(); n != 0 {
		t.Errorf("kit.send was called %d times, by a run that never sent and a replay that must not", n)
	}
}

// TestRecordingRefusesWhatItCannotTrust: a recording of another format
// version is refused naming both versions; one edited by hand fails its
// checksum, naming the file; and neither is replayed.
func TestRecordingRefusesWhatItCannotTrust(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "alice", "email": "a@example.com"}`)
	_, path := roundTrip(t, r.rec)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "edited.weirrun")
	if err := os.WriteFile(edited, bytes.Replace(data, []byte(`hi alice`), []byte(`hi alicf`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	var re *Error
	if _, err := ReadFile(edited); !errors.As(err, &re) || re.Code != CodeChecksum || !strings.Contains(err.Error(), edited) {
		t.Errorf("a hand-edited recording: %v", err)
	}
	other := filepath.Join(t.TempDir(), "v2.weirrun")
	if err := os.WriteFile(other, bytes.Replace(data, []byte(`"format_version": 1`), []byte(`"format_version": 2`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(other); !errors.As(err, &re) || re.Code != CodeFormat || !strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("a recording of format version 2: %v", err)
	}
	// Reformatting changes no value: still the same recording.
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(v)
	if _, err := Read(bytes.NewReader(compact)); err != nil {
		t.Errorf("a reformatted recording: %v", err)
	}
}

// TestRecordingRedacts: --redact blanks a field wherever the run's data
// holds it (the input, a call's arguments), and the replay, blanking its
// own arguments there too, still passes.
func TestRecordingRedacts(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "alice", "email": "a@example.com"}`, "/email")
	var buf bytes.Buffer
	if err := Write(&buf, r.rec); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("a@example.com")) {
		t.Fatalf("the redacted address is in the recording:\n%s", buf.String())
	}
	if res := replayOf(t, r.rec, ""); !res.Pass {
		t.Fatalf("replay of a redacted recording: %v", res.Divergence)
	}
	if _, err := parsePointers([]string{"email"}); err == nil {
		t.Error("a pointer without its leading / was taken")
	}
}

// TestRecordingRefusesTooLarge: a recording over the bound is refused
// with E_TOO_LARGE, by Write (nothing written) and by Read. The bound is
// lowered here: building 64 MiB proves nothing more.
func TestRecordingRefusesTooLarge(t *testing.T) {
	old := maxBytes
	maxBytes = 4 << 10
	t.Cleanup(func() { maxBytes = old })
	big := json.RawMessage(`"` + strings.Repeat("x", maxBytes) + `"`)
	var buf bytes.Buffer
	var re *Error
	if err := Write(&buf, &Recording{Run: Run{ID: "run_x", Input: big}}); !errors.As(err, &re) || re.Code != CodeTooLarge || buf.Len() != 0 {
		t.Fatalf("Write: %v, %d bytes written", err, buf.Len())
	}
	if _, err := Read(strings.NewReader(string(big) + string(big))); !errors.As(err, &re) || re.Code != CodeTooLarge {
		t.Fatalf("Read: %v", err)
	}
}

// scriptedModel is llm.chat speaking the chat contract: its first turn of
// a visit asks for a tool (kit.echo; the model "large" asks kit.look,
// "risky" kit.send), its second answers.
func scriptedModel() sdk.Tool {
	first := map[string]string{"small": "kit.echo", "large": "kit.look", "risky": "kit.send"}
	return sdk.Tool{Name: "llm.chat", Idempotent: true, Contract: chat.Contract,
		Models: []sdk.Model{{Alias: "small", MaxTokens: 256}, {Alias: "large", MaxTokens: 256}, {Alias: "risky", MaxTokens: 256}},
		Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var req chat.Request
			if err := json.Unmarshal(c.Input, &req); err != nil {
				return nil, err
			}
			if len(req.Messages) == 1 {
				return chat.Response{Message: chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{
					{ID: "c1", Name: first[req.Model], Arguments: json.RawMessage(`{"q": "weather"}`)}}},
					StopReason: "tool_use", Usage: chat.Usage{InputTokens: 10, OutputTokens: 5}, Model: req.Model}, nil
			}
			return chat.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: "sunny"}, StopReason: chat.StopEndTurn,
				Usage: chat.Usage{InputTokens: 20, OutputTokens: 2}, Model: "m"}, nil
		}}
}

// agentFlow is an agent that calls a tool once and answers.
var agentFlow = agentWith(`tools = ["kit.echo"]`)

// agentWith is the agent of agentFlow with its tools (and what else the
// node says) as given.
func agentWith(tools string) string {
	return `flow(name = "ask", nodes = [
    agent("think", model = "small", model_tool = "llm.chat",
        system = "You look things up.",
        prompt = lambda ctx: "Question: " + ctx.input["q"],
        ` + tools + `, max_turns = 4, max_tokens = 64),
])
`
}

// TestReplayOfAnAgent: an agent's model turns and the call it asked for
// are answered from the recording (the request's digest checked), and a
// changed prompt is a divergence at the agent: the model would be asked
// something it never answered.
func TestReplayOfAnAgent(t *testing.T) {
	t.Parallel()
	r := record(t, agentFlow, `{"q": "weather?"}`)
	rec, _ := roundTrip(t, r.rec)
	if len(rec.Turns) != 2 || len(rec.Calls) != 3 {
		t.Fatalf("recorded %d turns and %d calls: %+v", len(rec.Turns), len(rec.Calls), rec.Calls)
	}
	res := replayOf(t, rec, "")
	if !res.Pass || res.Calls != 3 {
		t.Fatalf("replay: %+v %v", res, res.Divergence)
	}
	changed := strings.Replace(agentFlow, `"Question: "`, `"Q: "`, 1)
	d := replayOf(t, rec, changed).Divergence
	if d == nil || d.Kind != KindArgs || d.Node != "think" || !strings.Contains(d.Message, "turn 1") || !strings.HasPrefix(d.Pos, "greet.star:2:") {
		t.Fatalf("divergence %+v", d)
	}
}

// TestReplayOfASubflowSaysWhy: a child run's calls are not in its
// parent's recording: the replay says so at the subflow node rather than
// failing somewhere inside the child.
func TestReplayOfASubflowSaysWhy(t *testing.T) {
	t.Parallel()
	r := record(t, `flow(name = "mum", nodes = [subflow("call", flow = "kid")])
flow(name = "kid", nodes = [task("k", tool = "kit.echo", args = {"kid": True})])
`, `{}`)
	d := replayOf(t, r.rec, "").Divergence
	if d == nil || d.Kind != KindLacks || d.Node != "call" || !strings.Contains(d.Message, "child run") || !strings.HasPrefix(d.Pos, "greet.star:1:") {
		t.Fatalf("divergence %+v", d)
	}
}

// TestReplayOfANewTool: new code calling a tool the run never called
// registers (the tool is no plugin's here) and diverges at the call.
func TestReplayOfANewTool(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "alice", "email": "a@example.com"}`)
	changed := strings.Replace(greet, `task("hello", tool = "kit.echo"`, `task("hello", tool = "web.search"`, 1)
	d := replayOf(t, r.rec, changed).Divergence
	if d == nil || d.Kind != KindTool || d.Node != "hello" || !strings.Contains(d.Message, "web.search where the run called kit.echo") || !strings.HasPrefix(d.Pos, "greet.star:2:") {
		t.Fatalf("divergence %+v", d)
	}
}

// TestReplayOfALapsedWait: a wait nobody decided before its deadline
// replays the same way — the fake clock is taken past the deadline — and
// is no divergence; the wait decided where the run's lapsed is one.
func TestReplayOfALapsedWait(t *testing.T) {
	t.Parallel()
	src := `flow(name = "late", nodes = [
    wait("ask", timeout = "30m", next = "yes", error = "no"),
    task("yes", tool = "kit.echo", args = {"yes": True}),
    task("no", tool = "kit.echo", args = {"no": True}),
])
`
	r := record(t, src, `{}`)
	if r.rec.Run.Phase != "completed" || len(r.rec.Steps) != 2 || r.rec.Steps[0].Completed {
		t.Fatalf("recorded %s with steps %+v", r.rec.Run.Phase, r.rec.Steps)
	}
	if res := replayOf(t, r.rec, src); !res.Pass {
		t.Fatalf("replay: %v", res.Divergence)
	}
}

// TestReplayOfAWaitTheRunNeverDecided: a replay that waits where the run
// went straight on says so at the wait: the recording holds no decision.
func TestReplayOfAWaitTheRunNeverDecided(t *testing.T) {
	t.Parallel()
	r := record(t, greet, `{"name": "alice", "email": "a@example.com"}`)
	changed := strings.Replace(greet, `task("done", tool = "kit.echo", args = {"ok": True}),`,
		`wait("done", next = "end"),
    task("end", tool = "kit.echo", args = {"ok": True}),`, 1)
	d := replayOf(t, r.rec, changed).Divergence
	if d == nil || d.Kind != KindWait || d.Node != "done" || !strings.Contains(d.Message, "decision the recording lacks") || !strings.HasPrefix(d.Pos, "greet.star:7:") {
		t.Fatalf("divergence %+v", d)
	}
}

// TestReplayOfAnEditedApproval: a person approved an agent's proposed
// send with other arguments; the replay makes the same decision, edit
// included, on the wait of the same id, and the call is answered with
// the edited arguments checked.
func TestReplayOfAnEditedApproval(t *testing.T) {
	t.Parallel()
	src := agentWith(`tools = ["kit.echo"], approve = ["kit.echo"]`)
	rec := recordDeciding(t, src, `{"q": "weather?"}`, func(_ *engine.Engine, w engine.HumanWait) engine.DecideParams {
		return engine.DecideParams{Approve: true, Payload: json.RawMessage(`{"q": "rain"}`)}
	})
	if len(rec.Decisions) != 1 || rec.Decisions[0].Wait != "think@1.1.0" || !canonicalEqual(rec.Decisions[0].Payload, json.RawMessage(`{"q": "rain"}`)) {
		t.Fatalf("decisions %+v", rec.Decisions)
	}
	res := replayOf(t, rec, "")
	if !res.Pass {
		t.Fatalf("replay: %v", res.Divergence)
	}
}

// TestReplayOfAFanout: a tool fan-out's items are answered from their
// ends, each by its index, whatever order the replay admits them in; an
// item's other arguments are a divergence at the fan-out.
func TestReplayOfAFanout(t *testing.T) {
	t.Parallel()
	src := `flow(name = "many", nodes = [
    fanout("each", items = lambda ctx: ctx.input["xs"], tool = "kit.echo",
        args = lambda ctx, item: {"x": item},
        width = 2, depth = 1, max_items = 8, next = "sum"),
    task("sum", tool = "kit.echo", args = lambda ctx: {"n": len(ctx.results["each"]["results"])}),
])
`
	// The run waits for its cohort: nobody decides, and the clock stays
	// (moving it would take the items past their deadline).
	r := recorded{rec: recordDeciding(t, src, `{"xs": [1, 2, 3, 4]}`, func(_ *engine.Engine, w engine.HumanWait) engine.DecideParams {
		t.Fatalf("no decision is asked for, yet %s waits", w.ID)
		return engine.DecideParams{}
	})}
	if len(r.rec.Calls) != 5 {
		t.Fatalf("recorded %d calls: %+v", len(r.rec.Calls), r.rec.Calls)
	}
	if res := replayOf(t, r.rec, ""); !res.Pass || res.Calls != 5 {
		t.Fatalf("replay: %+v %v", res, res.Divergence)
	}
	changed := strings.Replace(src, `{"x": item}`, `{"x": item * 10}`, 1)
	d := replayOf(t, r.rec, changed).Divergence
	if d == nil || d.Kind != KindArgs || d.Node != "each" || !strings.Contains(d.Message, ", item ") || !strings.HasPrefix(d.Pos, "greet.star:3:") {
		t.Fatalf("divergence %+v", d)
	}
}

// TestCounterfactualAgent: a counterfactual replay asks the model turns
// again, of a live model, and keeps the run's tool answers. The same
// model decides the same; another model's new call is in the turn diff,
// and the replay stops at it — a read is made for real only with
// LiveReads, an at-most-once call never.
func TestCounterfactualAgent(t *testing.T) {
	t.Parallel()
	src := agentWith(`tools = ["kit.echo", "kit.look", "kit.send"], at_most_once = True`)
	r := record(t, src, `{"q": "weather?"}`)
	var looks, sends atomic.Int64
	live, err := tooltest.New(t.TempDir(), scriptedModel(),
		sdk.Tool{Name: "kit.look", Effect: sdk.EffectRead, Run: func(_ context.Context, c *sdk.Call) (any, error) { looks.Add(1); return c.Input, nil }},
		sdk.Tool{Name: "kit.send", Effect: sdk.EffectAtMostOnce, Run: func(_ context.Context, c *sdk.Call) (any, error) { sends.Add(1); return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	same, err := Replay(ctx, r.rec, Options{Model: "small", Live: live})
	if err != nil || !same.Pass || same.Asked != 2 || len(same.Turns) != 2 || !same.Turns[0].Same {
		t.Fatalf("the same model: %v %+v %v", err, same, same.Divergence)
	}

	other, err := Replay(ctx, r.rec, Options{Model: "large", Live: live})
	if err != nil {
		t.Fatal(err)
	}
	d, turn := other.Divergence, other.Turns[0]
	if d == nil || d.Kind != KindLacks || !strings.Contains(d.Message, "kit.look") || !strings.Contains(d.Message, "--live-reads") ||
		turn.Same || !strings.HasPrefix(turn.Recorded.Calls[0], "kit.echo ") || !strings.HasPrefix(turn.Replayed.Calls[0], "kit.look ") {
		t.Fatalf("another model: %+v %v", other, d)
	}
	if looks.Load() != 0 {
		t.Fatalf("kit.look was called %d times without LiveReads", looks.Load())
	}
	reads, err := Replay(ctx, r.rec, Options{Model: "large", Live: live, LiveReads: true})
	if err != nil || looks.Load() != 1 || reads.Asked != 2 || reads.Phase != "completed" {
		t.Fatalf("another model with live reads: %v %+v, kit.look called %d times", err, reads, looks.Load())
	}

	risky, err := Replay(ctx, r.rec, Options{Model: "risky", Live: live, LiveReads: true})
	if err != nil || risky.Divergence == nil || !strings.Contains(risky.Divergence.Message, "at_most_once") || sends.Load() != 0 || r.sends.Load() != 0 {
		t.Fatalf("a model asking for an at-most-once call: %v %+v; kit.send called %d times live, %d recorded", err, risky, sends.Load(), r.sends.Load())
	}
}

// movingDaemon answers every run as running.
type movingDaemon struct{ engineDaemon }

func (movingDaemon) RunGet(_ context.Context, id string) (*apitypes.Run, error) {
	return &apitypes.Run{ID: id, Phase: apitypes.PhaseRunning}, nil
}

// TestRecordRefusesARunStillMoving: a run still running is refused: its
// recording would stop where the run no longer is.
func TestRecordRefusesARunStillMoving(t *testing.T) {
	t.Parallel()
	var re *Error
	if _, err := Record(context.Background(), movingDaemon{}, "run_x", nil, time.Now()); !errors.As(err, &re) || re.Code != CodeNotSettled || !strings.Contains(err.Error(), "running") {
		t.Fatalf("a running run: %v", err)
	}
}

// TestReplayOfFailedCalls: a call whose retries ran out and one the tool
// refused are answered with their failures, try by try, and the replay
// takes the same error wires to the same end.
func TestReplayOfFailedCalls(t *testing.T) {
	t.Parallel()
	src := `flow(name = "fails", nodes = [
    task("flaky", tool = "kit.flaky", retries = 2, next = "done", error = "refuse"),
    task("refuse", tool = "kit.refuse", next = "done", error = "done"),
    task("done", tool = "kit.echo", args = {"ok": True}),
])
`
	r := record(t, src, `{}`)
	if len(r.rec.Steps) != 3 || r.rec.Steps[0].Code != engine.CodeRetriesExhausted || r.rec.Steps[1].Code != "E_NO_CUSTOMER" || len(r.rec.Calls) != 5 {
		t.Fatalf("recorded steps %+v, calls %+v", r.rec.Steps, r.rec.Calls)
	}
	if res := replayOf(t, r.rec, ""); !res.Pass || res.Calls != 5 {
		t.Fatalf("replay: %+v %v", res, res.Divergence)
	}
}
