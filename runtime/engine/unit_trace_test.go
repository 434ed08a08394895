package engine

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/engine/internal/traceexport"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/telemetry"
	"github.com/weirhq/weir/runtime/tool"
)

const unitTraceSrc = `
flow(name = "two", nodes = [task("a", tool = "kit.echo", next = "b"), task("b", tool = "kit.echo")])
flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])
flow(name = "flaky", nodes = [task("call", tool = "kit.fail", args = lambda ctx: ctx.input, retries = 3)])
`

// traceBundle is a unit engine exporting traces to memory, whose
// trace-export passes the test drives.
type traceBundle struct {
	*testBundle
	mem *tracetest.InMemoryExporter
	svc *traceexport.Service
}

func setupTrace(t *testing.T) *traceBundle { return setupTraceTools(t, nil) }

// setupTraceTools is setupTrace with tools (nil: none) standing between
// the engine and the kit.
func setupTraceTools(t *testing.T, tools toolsWrapper) *traceBundle {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	x := telemetry.NewWithExporter(mem, telemetry.Options{Sample: 1})
	t.Cleanup(func() { _ = x.Shutdown(context.Background()) })
	cfg := Config{Traces: x, RetryBase: time.Second, RetryMax: time.Second}
	if tools != nil {
		cfg.Tools = tools
	}
	b := setupUnit(t, cfg, unitTraceSrc)
	if !b.eng.services.StopNamed("traceexport") {
		t.Fatal("the trace-export service was not started with Config.Traces set")
	}
	return &traceBundle{testBundle: b, mem: mem, svc: traceexport.New(traceHost{b.eng}, b.st, b.clock, x, TraceOutbox)}
}

// spanIDs are the exported spans' ids, in export order.
func (b *traceBundle) spanIDs() []trace.SpanID {
	var out []trace.SpanID
	for _, s := range b.mem.GetSpans() {
		out = append(out, s.SpanContext.SpanID())
	}
	return out
}

// A run of two tasks is exported once it finished: a root and a span per
// task, with the ids derived from the journal and the root their parent;
// the next pass finds nothing left to export.
func TestUnitTraceTwoTasks(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	ctx := context.Background()
	id := b.start(t, "two", `{}`, "")
	b.waitTerminal(t, id)
	if res := b.svc.RunOnce(ctx); res.Err != nil || res.Runs != 1 || res.Spans != 3 {
		t.Fatalf("pass %+v, want one run of 3 spans", res)
	}
	root := telemetry.SpanID(telemetry.SpanKey{Run: id})
	want := []struct {
		id     trace.SpanID
		parent trace.SpanID
	}{
		{root, trace.SpanID{}},
		{telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "a", Visit: 1, Attempt: 1}), root},
		{telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "b", Visit: 1, Attempt: 1}), root},
	}
	got := b.mem.GetSpans()
	if len(got) != len(want) {
		t.Fatalf("%d spans exported, want %d", len(got), len(want))
	}
	for i, w := range want {
		s := got[i]
		if s.SpanContext.TraceID() != telemetry.TraceID(id) || s.SpanContext.SpanID() != w.id || s.Parent.SpanID() != w.parent {
			t.Errorf("span %d (%s): %s/%s parent %s, want %s/%s parent %s", i, s.Name, s.SpanContext.TraceID(), s.SpanContext.SpanID(),
				s.Parent.SpanID(), telemetry.TraceID(id), w.id, w.parent)
		}
		if s.Status.Code != codes.Ok {
			t.Errorf("span %d (%s) status %+v, want Ok", i, s.Name, s.Status)
		}
	}
	if res := b.svc.RunOnce(ctx); res.Runs != 0 || len(b.mem.GetSpans()) != 3 {
		t.Errorf("a second pass %+v exported again (%d spans)", res, len(b.mem.GetSpans()))
	}
}

// A kill between the export and the outbox entry's removal exports the
// run again: with the same span ids, so the backend sees one trace.
func TestUnitTraceExportedTwiceSameIDs(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	ctx := context.Background()
	id := b.start(t, "two", `{}`, "")
	b.waitTerminal(t, id)
	b.svc.RunOnce(ctx)
	first := b.spanIDs()
	// The entry as it was before its removal.
	if err := b.st.Update(ctx, func(tx store.Tx) error {
		return appendEvent(tx, TraceOutbox, evTraceDue, 0, "", map[string]any{"run": id}, b.clock.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if res := b.svc.RunOnce(ctx); res.Runs != 1 {
		t.Fatalf("pass %+v, want the run exported again", res)
	}
	all := b.spanIDs()
	if len(first) != 3 || len(all) != 6 {
		t.Fatalf("%d then %d spans, want 3 then 6", len(first), len(all))
	}
	for i, sid := range first {
		if all[3+i] != sid {
			t.Errorf("span %d: %s the second time, %s the first", i, all[3+i], sid)
		}
	}
}

// A task whose holder died (its lease expired, the rescuer gave it to
// another worker) is one interrupted span and one completed span of the
// same visit.
func TestUnitTraceKilledVisit(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	ctx := context.Background()
	id := b.start(t, "held", `{"gate": "g"}`, "")
	b.waitFor(t, "the first worker at the gate", func() bool {
		n := 0
		b.kit.read(func() { n = b.kit.atGate["g"] })
		return n == 1
	})
	if err := b.st.Update(ctx, func(tx store.Tx) error { return leaseToTheDead(tx, id, b.clock.Now()) }); err != nil {
		t.Fatal(err)
	}
	// The rescuer looks every tenth of the lease timeout.
	b.advanceUntil(t, id, DefaultConfig().LeaseTimeout/10+b.tick, "leased again", func(*store.Run) bool { return count(b.events(t, id), evLeased) == 2 })
	b.kit.open("g")
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s %+v", run.Phase, run.Error)
	}
	if res := b.svc.RunOnce(ctx); res.Runs != 1 {
		t.Fatalf("pass %+v, want one run", res)
	}
	var interrupted, completed int
	for _, s := range b.mem.GetSpans() {
		if s.Name != "hold" {
			continue
		}
		cut := false
		for _, a := range s.Attributes {
			cut = cut || a == attribute.Bool("weir.interrupted", true)
		}
		switch {
		case cut && s.Status.Code == codes.Error && s.Status.Description == telemetry.Interrupted &&
			s.SpanContext.SpanID() == telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "hold", Visit: 1, Attempt: 1}):
			interrupted++
		case !cut && s.Status.Code == codes.Ok &&
			s.SpanContext.SpanID() == telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "hold", Visit: 1, Attempt: 2}):
			completed++
		default:
			t.Errorf("span %s %+v %v", s.SpanContext.SpanID(), s.Status, s.Attributes)
		}
	}
	if interrupted != 1 || completed != 1 {
		t.Errorf("%d interrupted and %d completed spans of hold, want 1 and 1; timeline %v", interrupted, completed, b.events(t, id))
	}
}

// A task that fails twice and then succeeds is three try spans under its
// visit: two with the retried error, the last as the visit ended.
func TestUnitTraceRetriedTask(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	ctx := context.Background()
	id := b.start(t, "flaky", `{"times": 2, "code": "E_FLAKY"}`, "")
	b.advanceUntil(t, id, time.Second+b.tick, "finished", func(r *store.Run) bool { return r.Phase.Terminal() })
	if res := b.svc.RunOnce(ctx); res.Runs != 1 {
		t.Fatalf("pass %+v, want one run", res)
	}
	visit := telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "call", Visit: 1, Attempt: 1})
	want := map[trace.SpanID]codes.Code{}
	for n, c := range []codes.Code{codes.Error, codes.Error, codes.Ok} {
		want[telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "call", Visit: 1, Attempt: 1, Call: "try:" + string(rune('1'+n))})] = c
	}
	tries := 0
	for _, s := range b.mem.GetSpans() {
		c, ok := want[s.SpanContext.SpanID()]
		if !ok {
			continue
		}
		tries++
		if s.Status.Code != c || s.Parent.SpanID() != visit || (c == codes.Error && s.Status.Description != "E_FLAKY") {
			t.Errorf("try %s: status %+v parent %s, want %v under the visit %s", s.SpanContext.SpanID(), s.Status, s.Parent.SpanID(), c, visit)
		}
	}
	if tries != 3 {
		t.Errorf("%d try spans exported, want 3; timeline %v", tries, b.events(t, id))
	}
}

// Without Config.Traces nothing is written for traces and no service runs.
func TestUnitTraceOff(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitTraceSrc)
	id := b.start(t, "two", `{}`, "")
	b.waitTerminal(t, id)
	for _, n := range b.eng.services.Names() {
		if n == "traceexport" {
			t.Error("the trace-export service runs without Config.Traces")
		}
	}
	var evs []*store.Event
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: TraceOutbox})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Errorf("the trace outbox holds %d entries with tracing off", len(evs))
	}
}

// The telemetry package reads the journal's event types by name: they
// are the engine's.
func TestTraceEventNames(t *testing.T) {
	t.Parallel()
	for mine, theirs := range map[string]string{
		evAccepted: telemetry.EvAccepted, evLeased: telemetry.EvLeased, evExpired: telemetry.EvExpired, evDropped: telemetry.EvDropped,
		evRetry: telemetry.EvRetry, evDeadLettered: telemetry.EvDeadLettered, evNodeStarted: telemetry.EvNodeStarted,
		evNodeDone: telemetry.EvNodeDone, evNodeFailed: telemetry.EvNodeFailed, evToolStarted: telemetry.EvToolStarted,
		evWaiting: telemetry.EvWaiting, evCompleted: telemetry.EvCompleted, evFailed: telemetry.EvFailed, evCancelled: telemetry.EvCancelled,
		evAgentTurn: telemetry.EvAgentTurn, evAgentCallDone: telemetry.EvAgentCallDone, evItemDone: telemetry.EvItemDone,
		evCohortClosing: telemetry.EvCohortClosing, evCohortClosed: telemetry.EvCohortClosed, evCohortStopped: telemetry.EvCohortStopped,
	} {
		if mine != theirs {
			t.Errorf("the engine writes %q, telemetry reads %q", mine, theirs)
		}
	}
}

// parents and states are the traceparents and tracestates node's calls
// carried.
func parents(r *callRecorder, node string) []string {
	return recorded(r, node, func(c tool.CallRequest) string { return c.TraceParent })
}

func states(r *callRecorder, node string) []string {
	return recorded(r, node, func(c tool.CallRequest) string { return c.TraceState })
}

// Every call carries the run's trace with its node visit's span as the
// parent — the span the export then holds under that id — sampled when
// the run is exported; every retry of a call the same parent.
func TestUnitCallsCarryTheirVisitsSpan(t *testing.T) {
	t.Parallel()
	rec := newCallRecorder()
	b := setupTraceTools(t, rec)
	ctx := context.Background()
	two := b.start(t, "two", `{}`, "")
	b.waitTerminal(t, two)
	flaky := b.start(t, "flaky", `{"times": 2, "code": "E_FLAKY"}`, "")
	b.advanceUntil(t, flaky, time.Second+b.tick, "finished", func(r *store.Run) bool { return r.Phase.Terminal() })
	if res := b.svc.RunOnce(ctx); res.Err != nil || res.Runs != 2 {
		t.Fatalf("pass %+v, want two runs exported", res)
	}
	exported := map[trace.SpanID]trace.TraceID{}
	for _, s := range b.mem.GetSpans() {
		exported[s.SpanContext.SpanID()] = s.SpanContext.TraceID()
	}
	for _, c := range []struct {
		run, node string
		calls     int
	}{{two, "a", 1}, {two, "b", 1}, {flaky, "call", 3}} {
		sid := telemetry.SpanID(telemetry.SpanKey{Run: c.run, Node: c.node, Visit: 1, Attempt: 1})
		want := "00-" + telemetry.TraceID(c.run).String() + "-" + sid.String() + "-01"
		if got := parents(rec, c.node); len(got) != c.calls || slices.ContainsFunc(got, func(tp string) bool { return tp != want }) {
			t.Errorf("node %s's calls carried %q, want %d of %q", c.node, got, c.calls, want)
		}
		if exported[sid] != telemetry.TraceID(c.run) {
			t.Errorf("no exported span of node %s has the id its calls name as their parent", c.node)
		}
	}
}

// A run started in a caller's trace gives its calls the caller's trace
// id and tracestate, the visit's span still their parent.
func TestUnitCallsCarryTheCallersTraceAndState(t *testing.T) {
	t.Parallel()
	rec := newCallRecorder()
	b := setupUnit(t, Config{Tools: rec}, unitTraceSrc)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const ts = "congo=t61rcWkgMzE"
	res, err := b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "two", Input: json.RawMessage(`{}`), TraceParent: tp, TraceState: ts})
	if err != nil {
		t.Fatal(err)
	}
	b.waitTerminal(t, res.RunID)
	sid := telemetry.SpanID(telemetry.SpanKey{Run: res.RunID, Node: "a", Visit: 1, Attempt: 1})
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + sid.String() + "-00"
	if got, st := parents(rec, "a"), states(rec, "a"); len(got) != 1 || got[0] != want || st[0] != ts {
		t.Errorf("node a's call carried %q %q, want %q %q", got, st, want, ts)
	}
}

// Without tracing a call still carries the run's trace, not sampled: a
// plugin's spans are not recorded for a trace nobody exports.
func TestUnitCallsCarryAnUnsampledTraceWithoutTracing(t *testing.T) {
	t.Parallel()
	rec := newCallRecorder()
	b := setupUnit(t, Config{Tools: rec}, unitTraceSrc)
	id := b.start(t, "two", `{}`, "")
	b.waitTerminal(t, id)
	sid := telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "a", Visit: 1, Attempt: 1})
	want := "00-" + telemetry.TraceID(id).String() + "-" + sid.String() + "-00"
	if got := parents(rec, "a"); len(got) != 1 || got[0] != want {
		t.Errorf("node a's call carried %q, want %q", got, want)
	}
}
