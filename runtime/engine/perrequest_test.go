package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

const perRequestSrc = `
flow(name = "one", nodes = [
    task("a", tool = "testkit.echo", args = lambda ctx: {"v": 1}),
])

flow(name = "fan_big", nodes = [
    fanout("fan", items = lambda ctx: list(range(6)), tool = "testkit.flood",
           args = lambda ctx, item: {"bytes": ctx.input["n"]}, width = 6, depth = 1, max_items = 6),
])

flow(name = "fan_big_args", nodes = [
    fanout("fan", items = lambda ctx: list(range(6)), tool = "testkit.echo",
           args = lambda ctx, item: {"blob": "x" * ctx.input["n"]}, width = 6, depth = 1, max_items = 6),
])

flow(name = "big_out", nodes = [
    task("a", tool = "testkit.echo", args = lambda ctx: {"blob": "x" * ctx.input["n"]}),
])

flow(name = "big_wired", nodes = [
    task("a", tool = "testkit.echo", args = lambda ctx: {"blob": "x" * ctx.input["n"]}, error = "small"),
    task("small", tool = "testkit.echo", args = lambda ctx: {"fell_back": True}),
])
`

// admissionOpen fails the test unless the engine still admits work and a
// plain run still finishes.
func (b *bundle) admissionOpen(t *testing.T) {
	t.Helper()
	if h := b.eng.Health(context.Background()); h.Admission != "open" {
		t.Fatalf("admission %q (%s), want open", h.Admission, h.Reason)
	}
	if run := b.waitTerminal(t, b.start(t, "one", `{}`, "")); run.Phase != store.PhaseCompleted {
		t.Fatalf("a plain run after the refusal ended %s %+v", run.Phase, run.Error)
	}
}

// Request ids become store keys: one a key cannot hold is the request's
// error, not a storage failure that closes admission for everyone.
func TestSubmitRefusesBadRequestIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, perRequestSrc)
	for name, id := range map[string]string{
		"badger key limit": strings.Repeat("r", 65000),
		"one over limit":   strings.Repeat("r", MaxRequestIDBytes+1),
		"nul":              "abc\x00def",
		"newline":          "abc\ndef",
		"escape":           "abc\x1b[2Jdef",
		"del":              "abc\x7f",
		"not utf-8":        "abc\xff",
		"U+FFFD":           "abc\ufffd", // what a decoder made of "abc\xfe"
		"schedule:":        "schedule:nightly",
		"event:":           "event:1",
		"fork:":            "fork:run_1",
		"redrive:":         "redrive:b",
	} {
		_, err := b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "one", Input: json.RawMessage(`{}`), RequestID: id})
		if ErrorCode(err) != CodeBadRequestID || !strings.Contains(err.Error(), "request id") {
			t.Errorf("%s: %v, want %s naming the request id", name, err, CodeBadRequestID)
		}
	}
	// At the limit, printable UTF-8 is accepted.
	b.waitTerminal(t, b.start(t, "one", `{}`, strings.Repeat("é", MaxRequestIDBytes/2)))
	b.admissionOpen(t)
}

// A fan-out whose children each return less than MaxResultBytes but
// together more than one transaction can
// hold fails that run with a run error; the daemon keeps admitting, and
// the run does not come back after a restart.
func TestFanoutTooLargeFailsOnlyItsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, perRequestSrc)
	run := b.waitTerminal(t, b.start(t, "fan_big", `{"n": 400000}`, ""))
	wantFailed(t, run, CodeResultTooLarge)
	b.admissionOpen(t)

	// Children over MaxResultBytes each fail on their own, before the
	// write: the 6 x 600 KB.
	run6 := b.waitTerminal(t, b.start(t, "fan_big", `{"n": 600000}`, ""))
	if r := b.fanResult(t, run6.Output); run6.Phase != store.PhaseCompleted || len(r.Results) != 0 || r.Sufficient {
		t.Fatalf("fan-out of 6 x 600 KB ended %s %+v %s, want completed with no results", run6.Phase, run6.Error, run6.Output)
	}
	evs, err := b.eng.Events(context.Background(), "alice", run6.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	tooLarge := 0
	for _, ev := range evs {
		if ev.Type == evItemDone && ev.Detail["code"] == CodeResultTooLarge {
			tooLarge++
		}
	}
	if tooLarge != 6 {
		t.Fatalf("%d items ended %s, want 6", tooLarge, CodeResultTooLarge)
	}
	b.admissionOpen(t)

	// Arguments that together outgrow one transaction when the children
	// are admitted: the step's write is refused, and the run fails.
	runArgs := b.waitTerminal(t, b.start(t, "fan_big_args", `{"n": 400000}`, ""))
	if runArgs.Phase != store.PhaseFailed || runArgs.Error == nil || runArgs.Error.Code != CodeResultTooLarge {
		t.Fatalf("fan-out of 6 x 400 KB arguments ended %s %+v, want failed %s", runArgs.Phase, runArgs.Error, CodeResultTooLarge)
	}
	b.admissionOpen(t)

	// After a restart the run stays failed and admission open: nothing of
	// the refused write is left to retry.
	ctx := context.Background()
	b.restart(t, Config{})
	b.admissionOpen(t)
	if again, err := b.eng.Get(ctx, "alice", run.ID); err != nil || again.Phase != store.PhaseFailed || again.Error.Code != CodeResultTooLarge {
		t.Fatalf("after a restart the run is %+v %v", again, err)
	}
}

// One tool output above MaxResultBytes fails its node; a smaller one is
// kept.
func TestToolOutputTooLargeFailsOnlyItsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, perRequestSrc)
	run := b.waitTerminal(t, b.start(t, "big_out", `{"n": 3000000}`, ""))
	wantFailed(t, run, CodeResultTooLarge)
	// With an error wire the node's refusal takes it, like any node error.
	run = b.waitTerminal(t, b.start(t, "big_wired", `{"n": 3000000}`, ""))
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), "fell_back") {
		t.Fatalf("3 MB output with an error wire ended %s %+v %s", run.Phase, run.Error, run.Output)
	}
	// Just under the bound is kept.
	run = b.waitTerminal(t, b.start(t, "big_out", `{"n": 500000}`, ""))
	if run.Phase != store.PhaseCompleted || len(run.Output) < 500000 {
		t.Fatalf("500 KB output ended %s %+v", run.Phase, run.Error)
	}
	b.admissionOpen(t)
}

// Registration refuses a flow whose IR is over flows.MaxIRBytes with the
// diagnostic flow check gives, and stores nothing.
func TestRegisterRefusesOversizedIR(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, perRequestSrc)
	res, err := b.eng.Register(context.Background(), []SourceFile{{Path: "big.star", Src: `
flow(name = "big", nodes = [task("a%d" % i, tool = "testkit.echo", doc = "x" * 64000, next = ("a%d" % (i + 1)) if i < 149 else None) for i in range(150)])
`}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Flows) != 0 || len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != flows.CodeIRTooLarge {
		t.Fatalf("registered %+v with %v, want nothing and one %s", res.Flows, res.Diagnostics, flows.CodeIRTooLarge)
	}
	b.admissionOpen(t)
}

// Registration refuses a flow or node doc over flows.MaxDocBytes, each at
// its doc argument, and stores nothing: issue 24's eight flows of a 7 MB
// doc in one registration, and a node's doc one byte over.
func TestRegisterRefusesOversizeDocs(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, perRequestSrc)
	ctx := context.Background()
	res, err := b.eng.Register(ctx, []SourceFile{{Path: "docs.star", Src: `
D = "x" * 7000000
[flow(name = "bomb%d" % i, doc = D, nodes = [task("a", tool = "testkit.echo")]) for i in range(8)]
flow(name = "node_doc", nodes = [task("a", tool = "testkit.echo", doc = "y" * (64 * 1024 + 1))])
`}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Flows) != 0 || len(res.Diagnostics) != 9 {
		t.Fatalf("registered %d flows with %d diagnostics %v, want none and 9", len(res.Flows), len(res.Diagnostics), res.Diagnostics)
	}
	for _, d := range res.Diagnostics {
		if d.Code != flows.CodeDocTooLarge || d.Pos.Line == 0 || d.Pos.Col == 0 || len(d.Message) > 300 {
			t.Errorf("diagnostic %s, want %s at the doc argument", d, flows.CodeDocTooLarge)
		}
	}
	for name := range registeredOwners(t, b.eng) {
		if strings.HasPrefix(name, "bomb") || name == "node_doc" {
			t.Fatalf("after the refusal, %s is registered", name)
		}
	}
	b.admissionOpen(t)
}

// Run ids and node names reach the engine from callers other than the
// API too; ones no key can hold are the caller's error, and admission
// stays open.
func TestBadIDsInQueriesAndDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, perRequestSrc)
	ctx := context.Background()
	for name, id := range map[string]string{"long": strings.Repeat("r", 65000), "nul": "run_\x00x"} {
		_, err := b.eng.Get(ctx, "alice", id)
		check := func(op string, err error) {
			t.Helper()
			if err == nil || ErrorCode(err) == CodeStorage {
				t.Errorf("%s %s: %v, want a refusal that is not %s", op, name, err, CodeStorage)
			}
		}
		check("get", err)
		_, err = b.eng.Cancel(ctx, "alice", id)
		check("cancel", err)
		_, err = b.eng.Events(ctx, "alice", id, 0, 0)
		check("events", err)
		check("decide", b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: id, Node: id, Approve: true}))
		_, err = b.eng.HumanWaits(ctx, "alice", id)
		check("waits", err)
	}
	b.admissionOpen(t)
}
