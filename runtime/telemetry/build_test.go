package telemetry

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/store"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// timeline makes a run's events one second apart, in sequence order.
type timeline []*store.Event

func (tl timeline) add(typ, node string, attempt int, detail map[string]any) timeline {
	n := len(tl)
	return append(tl, &store.Event{Seq: uint64(n + 1), RunID: "run_t", At: epoch.Add(time.Duration(n) * time.Second),
		Type: typ, Attempt: attempt, Node: node, Detail: detail})
}

func start(flow string) timeline {
	return timeline{}.add(EvAccepted, "", 1, map[string]any{"flow": flow, "owner": "alice"})
}

func at(i int) time.Time { return epoch.Add(time.Duration(i) * time.Second) }

// want is what a test expects of one span.
type want struct {
	key         SpanKey
	parent      string // "root", or a node's key as "node/visit/attempt"; "" the root itself
	start, end  int    // seconds after epoch
	status      codes.Code
	desc        string
	interrupted bool
}

func key(node string, visit, attempt int) SpanKey {
	return SpanKey{Run: "run_t", Node: node, Visit: visit, Attempt: attempt}
}

func TestBuild(t *testing.T) {
	t.Parallel()
	root := SpanKey{Run: "run_t"}
	waitKey := key("approve", 1, 1)
	waitKey.Call = "wait:approve@1"
	try1, try2 := key("a", 1, 1), key("a", 1, 1)
	try1.Call, try2.Call = "try:1", "try:2"
	tests := []struct {
		name string
		tl   timeline
		want []want
	}{
		{"two tasks in one lease",
			start("two").add("queued", "a", 1, nil).add(EvLeased, "a", 1, nil).
				add(EvNodeDone, "a", 1, map[string]any{"tool": "kit.echo"}).add(EvNodeDone, "b", 1, nil).add(EvCompleted, "", 1, nil),
			[]want{
				{key: root, start: 0, end: 5, status: codes.Ok},
				{key: key("a", 1, 1), parent: "root", start: 2, end: 3, status: codes.Ok},
				{key: key("b", 1, 1), parent: "root", start: 3, end: 4, status: codes.Ok},
			}},
		{"a cut by a kill: started, expired, leased, started, completed",
			start("one").add(EvLeased, "a", 1, nil).add(EvNodeStarted, "a", 1, nil).add(EvExpired, "a", 1, map[string]any{"reason": "lease expired"}).
				add(EvLeased, "a", 2, nil).add(EvNodeStarted, "a", 2, nil).add(EvNodeDone, "a", 2, nil).add(EvCompleted, "", 2, nil),
			[]want{
				{key: root, start: 0, end: 7, status: codes.Ok},
				{key: key("a", 1, 1), parent: "root", start: 2, end: 3, status: codes.Error, desc: Interrupted, interrupted: true},
				{key: key("a", 1, 2), parent: "root", start: 5, end: 6, status: codes.Ok},
			}},
		{"a new lease without the visit's end: the node the run resumes at was cut",
			start("one").add(EvLeased, "a", 1, nil).add(EvLeased, "a", 2, nil).add(EvNodeDone, "a", 2, nil).add(EvCompleted, "", 2, nil),
			[]want{
				{key: root, start: 0, end: 4, status: codes.Ok},
				{key: key("a", 1, 1), parent: "root", start: 1, end: 2, status: codes.Error, desc: Interrupted, interrupted: true},
				{key: key("a", 1, 2), parent: "root", start: 2, end: 3, status: codes.Ok},
			}},
		{"lease events name the task's node, not the run's: the cut is the node resumed",
			start("crash").add(EvLeased, "prep", 1, nil).add(EvNodeDone, "prep", 1, nil).add(EvToolStarted, "send", 1, nil).
				add(EvExpired, "prep", 1, nil).add(EvLeased, "prep", 2, nil).add("reconciled", "send", 2, nil).
				add(EvNodeDone, "send", 2, nil).add(EvNodeDone, "after", 2, nil).add(EvCompleted, "", 2, nil),
			[]want{
				{key: root, start: 0, end: 9, status: codes.Ok},
				{key: key("prep", 1, 1), parent: "root", start: 1, end: 2, status: codes.Ok},
				{key: key("send", 1, 1), parent: "root", start: 2, end: 4, status: codes.Error, desc: Interrupted, interrupted: true},
				{key: key("send", 1, 2), parent: "root", start: 5, end: 7, status: codes.Ok},
				{key: key("after", 1, 2), parent: "root", start: 7, end: 8, status: codes.Ok},
			}},
		{"killed between two nodes: the next node is cut, no node twice",
			start("crash").add(EvLeased, "prep", 1, nil).add(EvNodeDone, "prep", 1, nil).add(EvExpired, "prep", 1, nil).
				add(EvLeased, "prep", 2, nil).add(EvNodeDone, "after", 2, nil).add(EvCompleted, "", 2, nil),
			[]want{
				{key: root, start: 0, end: 6, status: codes.Ok},
				{key: key("prep", 1, 1), parent: "root", start: 1, end: 2, status: codes.Ok},
				{key: key("after", 1, 1), parent: "root", start: 2, end: 3, status: codes.Error, desc: Interrupted, interrupted: true},
				{key: key("after", 1, 2), parent: "root", start: 4, end: 5, status: codes.Ok},
			}},
		{"held work given back at a stop (drained) is cut as a kill's is",
			start("one").add(EvLeased, "a", 1, nil).add(EvToolStarted, "a", 1, nil).add(EvDrained, "a", 1, nil).
				add(EvLeased, "a", 2, nil).add(EvNodeDone, "a", 2, nil).add(EvCompleted, "", 2, nil),
			[]want{
				{key: root, start: 0, end: 6, status: codes.Ok},
				{key: key("a", 1, 1), parent: "root", start: 1, end: 3, status: codes.Error, desc: Interrupted, interrupted: true},
				{key: key("a", 1, 2), parent: "root", start: 4, end: 5, status: codes.Ok},
			}},
		{"a wait for a person, approved",
			start("approval").add(EvLeased, "approve", 1, nil).add(EvWaiting, "approve", 1, map[string]any{"for": "human", "wait": "approve@1"}).
				add("approved", "approve", 1, map[string]any{"by": "alice"}).add(EvLeased, "approve", 1, nil).
				add(EvNodeDone, "approve", 1, nil).add(EvNodeDone, "after", 1, nil).add(EvCompleted, "", 1, nil),
			[]want{
				{key: root, start: 0, end: 7, status: codes.Ok},
				{key: waitKey, parent: "approve/1/1", start: 2, end: 3},
				{key: key("approve", 1, 1), parent: "root", start: 1, end: 5, status: codes.Ok},
				{key: key("after", 1, 1), parent: "root", start: 5, end: 6, status: codes.Ok},
			}},
		{"a failed node takes its error wire; a loop visits again",
			start("loop").add(EvLeased, "a", 1, nil).add(EvNodeFailed, "a", 1, map[string]any{"code": "E_TOOL", "wire": "b"}).
				add(EvNodeDone, "b", 1, nil).add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil),
			[]want{
				{key: root, start: 0, end: 5, status: codes.Ok},
				{key: key("a", 1, 1), parent: "root", start: 1, end: 2, status: codes.Error, desc: "E_TOOL"},
				{key: key("b", 1, 1), parent: "root", start: 2, end: 3, status: codes.Ok},
				{key: key("a", 2, 1), parent: "root", start: 3, end: 4, status: codes.Ok},
			}},
		{"the run fails at a node without an error wire, after a retry: two tries",
			start("one").add(EvLeased, "a", 1, nil).add(EvRetry, "a", 1, map[string]any{"code": "E_RATE"}).add(EvLeased, "a", 1, nil).
				add(EvFailed, "", 1, map[string]any{"code": "E_TOOL"}),
			[]want{
				{key: root, start: 0, end: 4, status: codes.Error, desc: "E_TOOL"},
				{key: try1, parent: "a/1/1", start: 1, end: 2, status: codes.Error, desc: "E_RATE"},
				{key: key("a", 1, 1), parent: "root", start: 1, end: 4, status: codes.Error, desc: "E_TOOL"},
				{key: try2, parent: "a/1/1", start: 3, end: 4, status: codes.Error, desc: "E_TOOL"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spans, err := Build(tt.tl)
			if err != nil {
				t.Fatal(err)
			}
			if len(spans) != len(tt.want) {
				t.Fatalf("%d spans, want %d: %+v", len(spans), len(tt.want), spans)
			}
			ids := map[string]trace.SpanID{"root": SpanID(root)}
			for _, s := range spans {
				if s.Key.Call == "" {
					ids[s.Key.Node+"/"+itoa(s.Key.Visit)+"/"+itoa(s.Key.Attempt)] = s.ID
				}
			}
			for i, w := range tt.want {
				s := spans[i]
				if s.Key != w.key || s.ID != SpanID(w.key) || s.Trace != TraceID("run_t") {
					t.Errorf("span %d is %+v (id %s trace %s), want key %+v with its derived ids", i, s.Key, s.ID, s.Trace, w.key)
				}
				if wp := ids[w.parent]; s.Parent != wp {
					t.Errorf("span %d (%s) has parent %s, want %s (%q)", i, s.Name, s.Parent, wp, w.parent)
				}
				if !s.Start.Equal(at(w.start)) || !s.End.Equal(at(w.end)) {
					t.Errorf("span %d (%s) runs %v to %v, want %v to %v", i, s.Name, s.Start, s.End, at(w.start), at(w.end))
				}
				if s.Status != w.status || s.Description != w.desc {
					t.Errorf("span %d (%s) status %v %q, want %v %q", i, s.Name, s.Status, s.Description, w.status, w.desc)
				}
				if got := hasAttr(s.Attrs, attribute.Bool("weir.interrupted", true)); got != w.interrupted {
					t.Errorf("span %d (%s) weir.interrupted %t, want %t", i, s.Name, got, w.interrupted)
				}
			}
			again, _ := Build(tt.tl)
			if !reflect.DeepEqual(spans, again) {
				t.Error("a second Build of the same timeline differs")
			}
		})
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// The wait span carries its kind and what ended it.
func TestBuildWaitAttributes(t *testing.T) {
	t.Parallel()
	tl := start("approval").add(EvLeased, "approve", 1, nil).add(EvWaiting, "approve", 1, map[string]any{"for": "human", "wait": "approve@1"}).
		add("rejected", "approve", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	var w *Span
	for i := range spans {
		if spans[i].Key.Call != "" {
			w = &spans[i]
		}
	}
	if w == nil {
		t.Fatalf("no wait span in %+v", spans)
	}
	for _, kv := range []attribute.KeyValue{attribute.String("weir.wait.kind", "human"), attribute.String("weir.wait.id", "approve@1"),
		attribute.String("weir.wait.ended_by", "rejected")} {
		if !hasAttr(w.Attrs, kv) {
			t.Errorf("wait span attrs %v lack %v", w.Attrs, kv)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	if _, err := Build(start("one").add(EvLeased, "a", 1, nil)); !errors.Is(err, ErrNotTerminal) {
		t.Errorf("a running run: %v, want ErrNotTerminal", err)
	}
	if _, err := Build(timeline{}.add(EvLeased, "a", 1, nil)); err == nil {
		t.Error("a timeline without its accepted event was built")
	}
}

// A run of more visits than MaxSpans keeps MaxSpans spans, the root
// first, and says how many it left out.
func TestBuildBounded(t *testing.T) {
	t.Parallel()
	tl := start("loop").add(EvLeased, "a", 1, nil)
	for i := 0; i < MaxSpans+9; i++ {
		tl = tl.add(EvNodeDone, "a", 1, nil)
	}
	spans, err := Build(tl.add(EvCompleted, "", 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != MaxSpans || spans[0].Key != (SpanKey{Run: "run_t"}) || !hasAttr(spans[0].Attrs, attribute.Int("weir.spans_dropped", 10)) {
		t.Errorf("%d spans, root %+v, want %d with weir.spans_dropped = 10", len(spans), spans[0].Attrs, MaxSpans)
	}
}

// A caller's traceparent journaled at acceptance makes the caller's trace
// the run's; a malformed one is ignored.
func TestBuildTraceParent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tt := range []struct {
		tp  string
		own bool
	}{{tp, false}, {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", true}, {"garbage", true}, {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", true}} {
		tl := timeline{}.add(EvAccepted, "", 1, map[string]any{"traceparent": tt.tp}).add(EvLeased, "a", 1, nil).
			add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil)
		spans, err := Build(tl)
		if err != nil {
			t.Fatal(err)
		}
		wantTrace, wantParent := TraceID("run_t"), trace.SpanID{}
		if !tt.own {
			wantTrace, _ = trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
			wantParent, _ = trace.SpanIDFromHex("00f067aa0ba902b7")
		}
		if spans[0].Trace != wantTrace || spans[1].Trace != wantTrace || spans[0].Parent != wantParent {
			t.Errorf("traceparent %q: trace %s parent %s, want %s %s", tt.tp, spans[0].Trace, spans[0].Parent, wantTrace, wantParent)
		}
	}
}

// Ids are never zero and differ by every part of the key.
func TestSpanIDs(t *testing.T) {
	t.Parallel()
	seen := map[trace.SpanID]SpanKey{}
	for _, k := range []SpanKey{{Run: "r"}, {Run: "r", Node: "a", Visit: 1, Attempt: 1}, {Run: "r", Node: "a", Visit: 2, Attempt: 1},
		{Run: "r", Node: "a", Visit: 1, Attempt: 2}, {Run: "r", Node: "a", Visit: 1, Attempt: 1, Call: "wait:a@1"},
		{Run: "r", Node: "a", Visit: 1, Attempt: 1, Seg: 1}, {Run: "s", Node: "a", Visit: 1, Attempt: 1}} {
		id := SpanID(k)
		if !id.IsValid() {
			t.Errorf("%+v: zero id", k)
		}
		if prev, dup := seen[id]; dup {
			t.Errorf("%+v and %+v share id %s", k, prev, id)
		}
		seen[id] = k
	}
	if TraceID("r") == TraceID("s") || !TraceID("").IsValid() {
		t.Error("trace ids do not tell runs apart, or one is zero")
	}
}

// A visit that parks more than once on waits without ids (a cohort's, a
// child's) gives each wait a span of its own id.
func TestBuildRepeatedWaits(t *testing.T) {
	t.Parallel()
	tl := start("fan").add(EvLeased, "fan", 1, nil)
	for i := 0; i < 3; i++ {
		tl = tl.add(EvWaiting, "fan", 1, map[string]any{"for": "cohort"}).add(EvLeased, "fan", 1, nil)
	}
	tl = tl.add(EvWaiting, "fan", 1, map[string]any{"for": "child", "child": "run_c"}).add(EvLeased, "fan", 1, nil)
	spans, err := Build(tl.add(EvNodeDone, "fan", 1, nil).add(EvCompleted, "", 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[trace.SpanID]bool{}
	waits := 0
	for _, s := range spans {
		if ids[s.ID] {
			t.Errorf("span %s (%+v) shares its id", s.Name, s.Key)
		}
		ids[s.ID] = true
		if strings.HasPrefix(s.Key.Call, "wait:") {
			waits++
			if s.End.Sub(s.Start) != time.Second {
				t.Errorf("wait %+v lasts %v, want until its node's next event", s.Key, s.End.Sub(s.Start))
			}
		}
	}
	if waits != 4 || len(spans) != 7 {
		t.Errorf("%d spans with %d waits, want 7 with 4 (and the cohort's)", len(spans), waits)
	}
	if last := spans[4]; !hasAttr(last.Attrs, attribute.String("weir.wait.child_run_id", "run_c")) {
		t.Errorf("the child wait's attrs %v lack its child", last.Attrs)
	}
}

// A child run's root links to its parent run's root.
func TestBuildChildLinksToParent(t *testing.T) {
	t.Parallel()
	tl := timeline{}.add(EvAccepted, "", 1, map[string]any{"flow": "child", "parent": "run_p", "node": "call"}).
		add(EvLeased, "c", 1, nil).add(EvNodeDone, "c", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	root := spans[0]
	if len(root.Links) != 1 || root.Links[0].TraceID() != TraceID("run_p") || root.Links[0].SpanID() != SpanID(SpanKey{Run: "run_p"}) {
		t.Errorf("links %v, want the parent's root", root.Links)
	}
	if !hasAttr(root.Attrs, attribute.String("weir.parent_run_id", "run_p")) || !hasAttr(root.Attrs, attribute.String("weir.parent_node", "call")) {
		t.Errorf("root attrs %v lack the parent", root.Attrs)
	}
	if root.Trace != TraceID("run_t") || root.Parent.IsValid() {
		t.Errorf("a child's root is in trace %s under %s, want its own trace, no parent", root.Trace, root.Parent)
	}
}

// spanBy returns the span of key, failing the test if there is none.
func spanBy(t *testing.T, spans []Span, k SpanKey) Span {
	t.Helper()
	for _, s := range spans {
		if s.Key == k {
			return s
		}
	}
	t.Fatalf("no span %+v in %+v", k, spans)
	return Span{}
}

// uniqueIDs fails the test if two spans share an id, or if a second
// Build of the timeline gives other spans.
func uniqueIDs(t *testing.T, tl timeline, spans []Span) {
	t.Helper()
	seen := map[trace.SpanID]SpanKey{}
	for _, s := range spans {
		if prev, dup := seen[s.ID]; dup {
			t.Errorf("spans %+v and %+v share id %s", prev, s.Key, s.ID)
		}
		seen[s.ID] = s.Key
		if s.ID != SpanID(s.Key) {
			t.Errorf("span %+v has id %s, not its key's", s.Key, s.ID)
		}
	}
	if again, _ := Build(tl); !reflect.DeepEqual(spans, again) {
		t.Error("a second Build of the same timeline differs")
	}
}

func withCall(k SpanKey, call string) SpanKey {
	k.Call = call
	return k
}

// An agent's visit: each journaled model turn is a span with the GenAI
// conventions' attributes, a child of the visit, the tool calls it asked
// for its events; each tool call run as a task is an execute_tool span
// from its lease to its end; the agent's wait for its calls lasts until
// the agent is woken, not until a call is leased.
func TestBuildAgentTurns(t *testing.T) {
	t.Parallel()
	tl := start("agent").add(EvLeased, "a", 1, nil).
		add(EvAgentTurn, "a", 1, map[string]any{"turn": 1, "model": "small", "model_tool": "llm.chat", "provider": "openai",
			"response_model": "m-1", "stop_reason": "tool_use", "input_tokens": 100, "output_tokens": 10, "usage_reported": true,
			"cost": 140, "tools": []any{"mail.send", "kit.echo"}, "asked_at": at(1).Format(time.RFC3339Nano)}).
		add(EvWaiting, "a", 1, map[string]any{"for": "child", "calls": 2, "turn": 1}).
		add(EvLeased, "a", 1, map[string]any{"task": "task_c0", "turn": 1, "call": 0, "tool": "mail.send"}).
		add(EvLeased, "a", 1, map[string]any{"task": "task_c1", "turn": 1, "call": 1, "tool": "kit.echo"}).
		add(EvAgentCallDone, "a", 1, map[string]any{"task": "task_c0", "turn": 1, "call": 0, "tool": "mail.send"}).
		add(EvAgentCallDone, "a", 1, map[string]any{"task": "task_c1", "turn": 1, "call": 1, "tool": "kit.echo", "code": "E_TOOL"}).
		add(EvLeased, "a", 1, nil).
		add(EvAgentTurn, "a", 1, map[string]any{"turn": 2, "model": "small", "model_tool": "llm.chat", "stop_reason": "end_turn",
			"input_tokens": 200, "output_tokens": 5, "tools": []any{}, "asked_at": at(8).Format(time.RFC3339Nano)}).
		add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	uniqueIDs(t, tl, spans)
	visit := spanBy(t, spans, key("a", 1, 1))
	if !hasAttr(visit.Attrs, attribute.String("gen_ai.operation.name", "invoke_agent")) || visit.Description != "" || visit.Status != codes.Ok {
		t.Errorf("the agent's visit: %v %v %q", visit.Attrs, visit.Status, visit.Description)
	}
	t1 := spanBy(t, spans, withCall(key("a", 1, 1), "turn:1"))
	for _, kv := range []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", "small"), attribute.String("gen_ai.response.model", "m-1"),
		attribute.Int64("gen_ai.usage.input_tokens", 100), attribute.Int64("gen_ai.usage.output_tokens", 10),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_use"})} {
		if !hasAttrEqual(t1.Attrs, kv) {
			t.Errorf("turn 1 lacks %s = %s: %v", kv.Key, kv.Value.String(), t1.Attrs)
		}
	}
	if t1.Parent != visit.ID || t1.Name != "chat small" || t1.Kind != trace.SpanKindClient || !t1.Start.Equal(at(1)) || !t1.End.Equal(at(2)) || t1.Status != codes.Ok {
		t.Errorf("turn 1: parent %s (visit %s) name %q %v..%v %v", t1.Parent, visit.ID, t1.Name, t1.Start, t1.End, t1.Status)
	}
	if len(t1.Events) != 2 || t1.Events[0].Name != "gen_ai.tool.call" || !hasAttr(t1.Events[0].Attrs, attribute.String("gen_ai.tool.name", "mail.send")) ||
		!hasAttr(t1.Events[1].Attrs, attribute.String("gen_ai.tool.name", "kit.echo")) {
		t.Errorf("turn 1's events %+v, want its two tool calls", t1.Events)
	}
	t2 := spanBy(t, spans, withCall(key("a", 1, 1), "turn:2"))
	if !hasAttrEqual(t2.Attrs, attribute.String("gen_ai.provider.name", "weir.llm")) || len(t2.Events) != 0 || hasAttrKey(t2.Attrs, "gen_ai.response.model") {
		t.Errorf("turn 2 (no provider, no response model, no calls): %v %v", t2.Attrs, t2.Events)
	}
	c0 := spanBy(t, spans, withCall(key("a", 1, 1), "call:1.0"))
	c1 := spanBy(t, spans, withCall(key("a", 1, 1), "call:1.1"))
	if c0.Parent != visit.ID || c0.Name != "execute_tool mail.send" || c0.Status != codes.Ok || !c0.Start.Equal(at(4)) || !c0.End.Equal(at(6)) ||
		!hasAttr(c0.Attrs, attribute.String("gen_ai.tool.name", "mail.send")) {
		t.Errorf("call 0: %+v", c0)
	}
	if c1.Status != codes.Error || c1.Description != "E_TOOL" {
		t.Errorf("call 1: %v %q, want its error", c1.Status, c1.Description)
	}
	w := spanBy(t, spans, withCall(key("a", 1, 1), "wait:child"))
	if !w.Start.Equal(at(3)) || !w.End.Equal(at(8)) {
		t.Errorf("the wait for the calls runs %v..%v, want until the agent's wake at %v", w.Start, w.End, at(8))
	}
	if len(spans) != 7 {
		t.Errorf("%d spans, want root, visit, two turns, two calls, a wait", len(spans))
	}
}

// An agent's call whose task a kill cut: its span is closed interrupted,
// the rerun's is another span; the agent's visit is not cut by it.
func TestBuildAgentCallCut(t *testing.T) {
	t.Parallel()
	call := map[string]any{"task": "task_c0", "turn": 1, "call": 0, "tool": "mail.send"}
	tl := start("agent").add(EvLeased, "a", 1, nil).
		add(EvAgentTurn, "a", 1, map[string]any{"turn": 1, "model": "small", "model_tool": "llm.chat", "tools": []any{"mail.send"}}).
		add(EvWaiting, "a", 1, map[string]any{"for": "child"}).
		add(EvLeased, "a", 1, call).add(EvExpired, "a", 1, map[string]any{"task": "task_c0", "reason": "lease expired"}).
		add(EvLeased, "a", 2, call).add(EvAgentCallDone, "a", 2, map[string]any{"task": "task_c0", "turn": 1, "call": 0, "code": "E_OUTCOME_UNKNOWN"}).
		add(EvLeased, "a", 1, nil).add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	uniqueIDs(t, tl, spans)
	cut := spanBy(t, spans, withCall(key("a", 1, 1), "call:1.0"))
	again := spanBy(t, spans, withCall(key("a", 1, 2), "call:1.0"))
	if cut.Description != Interrupted || !hasAttr(cut.Attrs, attribute.Bool("weir.interrupted", true)) || !cut.End.Equal(at(5)) {
		t.Errorf("the cut call: %q %v ends %v", cut.Description, cut.Attrs, cut.End)
	}
	if again.Description != "E_OUTCOME_UNKNOWN" || !again.Start.Equal(at(6)) {
		t.Errorf("the rerun: %q from %v", again.Description, again.Start)
	}
	if v := spanBy(t, spans, key("a", 1, 1)); v.Status != codes.Ok || hasAttr(v.Attrs, attribute.Bool("weir.interrupted", true)) {
		t.Errorf("the agent's visit was cut by its call's kill: %v %q", v.Status, v.Description)
	}
}

// A fan-out visit: a cohort span (its close reason) under the visit, a
// span per item under the cohort — a tool item's from its task's lease
// to its end, a child-run item's linked to the child's root.
func TestBuildFanOut(t *testing.T) {
	t.Parallel()
	tl := start("fan").add(EvLeased, "fan", 1, nil).
		add(EvWaiting, "fan", 1, map[string]any{"for": "cohort"}).
		add(EvLeased, "fan", 1, map[string]any{"task": "task_i0", "item": 0}).
		add(EvLeased, "fan", 1, map[string]any{"task": "task_i1", "item": 1}).
		add(EvItemDone, "fan", 0, map[string]any{"item": 0, "state": "published", "task": "task_i0"}).
		add(EvItemDone, "fan", 0, map[string]any{"item": 1, "state": "failed", "task": "task_i1", "code": "E_TOOL"}).
		add(EvItemDone, "fan", 0, map[string]any{"item": 2, "state": "published", "child": "run_c"}).
		add(EvLeased, "fan", 1, nil).
		add(EvCohortClosing, "fan", 1, map[string]any{"sufficient": true, "fuse": false, "need": 2}).
		add(EvCohortClosed, "fan", 1, map[string]any{"sufficient": true, "marker": true}).
		add(EvNodeDone, "fan", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	uniqueIDs(t, tl, spans)
	visit := spanBy(t, spans, key("fan", 1, 1))
	c := spanBy(t, spans, SpanKey{Run: "run_t", Node: "fan", Visit: 1, Call: "cohort"})
	if c.Parent != visit.ID || !hasAttr(c.Attrs, attribute.String("weir.cohort.close_reason", "need_met")) || c.Status != codes.Ok ||
		!c.Start.Equal(at(2)) || !c.End.Equal(at(10)) {
		t.Errorf("cohort: parent %s %v %v %v..%v", c.Parent, c.Attrs, c.Status, c.Start, c.End)
	}
	i0 := spanBy(t, spans, withCall(key("fan", 1, 1), "item:0"))
	i1 := spanBy(t, spans, withCall(key("fan", 1, 1), "item:1"))
	i2 := spanBy(t, spans, SpanKey{Run: "run_t", Node: "fan", Visit: 1, Call: "item:2"})
	if i0.Parent != c.ID || i0.Status != codes.Ok || !i0.Start.Equal(at(3)) || !i0.End.Equal(at(5)) {
		t.Errorf("item 0: %+v", i0)
	}
	if i1.Status != codes.Error || i1.Description != "E_TOOL" || !hasAttr(i1.Attrs, attribute.String("weir.item.state", "failed")) {
		t.Errorf("item 1: %v %q %v", i1.Status, i1.Description, i1.Attrs)
	}
	if len(i2.Links) != 1 || i2.Links[0].SpanID() != SpanID(SpanKey{Run: "run_c"}) || i2.Links[0].TraceID() != TraceID("run_c") {
		t.Errorf("the child item's links %v, want the child's root", i2.Links)
	}
	if w := spanBy(t, spans, withCall(key("fan", 1, 1), "wait:cohort")); !w.End.Equal(at(8)) {
		t.Errorf("the cohort wait ends %v, want at the parent's wake %v, not at an item's event", w.End, at(8))
	}
}

// A cohort that a deadline closed short says so.
func TestBuildCohortDeadline(t *testing.T) {
	t.Parallel()
	tl := start("fan").add(EvLeased, "fan", 1, nil).add(EvWaiting, "fan", 1, map[string]any{"for": "cohort"}).
		add(EvLeased, "fan", 1, nil).add(EvCohortClosing, "fan", 1, map[string]any{"sufficient": false, "fuse": true}).
		add(EvNodeFailed, "fan", 1, map[string]any{"code": "E_INSUFFICIENT"}).add(EvFailed, "", 1, map[string]any{"code": "E_INSUFFICIENT"})
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	c := spanBy(t, spans, SpanKey{Run: "run_t", Node: "fan", Visit: 1, Call: "cohort"})
	if !hasAttr(c.Attrs, attribute.String("weir.cohort.close_reason", "deadline")) || c.Status != codes.Error || !c.End.Equal(at(5)) {
		t.Errorf("cohort: %v %v ends %v", c.Attrs, c.Status, c.End)
	}
}

// A subflow's wait links to the child run's root.
func TestBuildWaitLinksToChild(t *testing.T) {
	t.Parallel()
	tl := start("parent").add(EvLeased, "call", 1, nil).add(EvWaiting, "call", 1, map[string]any{"for": "child", "child": "run_c"}).
		add(EvLeased, "call", 1, nil).add(EvNodeDone, "call", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	w := spanBy(t, spans, withCall(key("call", 1, 1), "wait:child"))
	if len(w.Links) != 1 || w.Links[0].SpanID() != SpanID(SpanKey{Run: "run_c"}) {
		t.Errorf("the child wait's links %v, want the child's root", w.Links)
	}
}

func hasAttrKey(attrs []attribute.KeyValue, k attribute.Key) bool {
	for _, a := range attrs {
		if a.Key == k {
			return true
		}
	}
	return false
}

// hasAttrEqual is hasAttr for values == cannot compare (slices).
func hasAttrEqual(attrs []attribute.KeyValue, kv attribute.KeyValue) bool {
	for _, a := range attrs {
		if a.Key == kv.Key && a.Value.Type() == kv.Value.Type() && a.Value.String() == kv.Value.String() {
			return true
		}
	}
	return false
}

// The step's own events that name a call stay the step's: a park on a
// call of one of the agent's flows is a wait span linked to the child, an
// approval's proposal an event of the visit.
func TestBuildAgentStepEventsNamingACall(t *testing.T) {
	t.Parallel()
	tl := start("agent").add(EvLeased, "a", 1, nil).
		add(EvAgentTurn, "a", 1, map[string]any{"turn": 1, "model": "small", "model_tool": "llm.chat", "tools": []any{"kid", "mail.send"}}).
		add("approval_asked", "a", 1, map[string]any{"tool": "mail.send", "turn": 1, "call": 1, "wait": "a@1.1.1"}).
		add(EvWaiting, "a", 1, map[string]any{"for": "child", "flow": "kid", "turn": 1, "call": 0, "child": "run_k"}).
		add(EvLeased, "a", 1, nil).add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	uniqueIDs(t, tl, spans)
	w := spanBy(t, spans, withCall(key("a", 1, 1), "wait:child"))
	if len(w.Links) != 1 || w.Links[0].SpanID() != SpanID(SpanKey{Run: "run_k"}) || !w.End.Equal(at(5)) {
		t.Errorf("the wait on the flow call: links %v, ends %v", w.Links, w.End)
	}
	v := spanBy(t, spans, key("a", 1, 1))
	if len(v.Events) != 1 || v.Events[0].Name != "weir.approval_asked" {
		t.Errorf("the visit's events %+v, want the approval asked", v.Events)
	}
}

// A model turn retried (a rate limit, a provider down) shows its retries
// on its span, with the tokens a try reported it used, and how many tries
// it took; a turn asked once has neither.
func TestBuildTurnRetries(t *testing.T) {
	t.Parallel()
	turn := func(n int) map[string]any {
		return map[string]any{"turn": n, "model": "small", "model_tool": "llm.chat", "stop_reason": "tool_use", "tools": []any{}}
	}
	tl := start("agent").add(EvLeased, "a", 1, nil).
		add(EvRetry, "a", 1, map[string]any{"turn": 1, "tool": "llm.chat", "try": 1, "code": "E_RATE_LIMITED"}).add(EvLeased, "a", 1, nil).
		add(EvRetry, "a", 1, map[string]any{"turn": 1, "tool": "llm.chat", "try": 2, "code": "E_MODEL_UNAVAILABLE", "input_tokens": 321}).add(EvLeased, "a", 1, nil).
		add(EvAgentTurn, "a", 1, turn(1)).add(EvAgentTurn, "a", 1, turn(2)).add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	uniqueIDs(t, tl, spans)
	t1 := spanBy(t, spans, withCall(key("a", 1, 1), "turn:1"))
	if len(t1.Events) != 2 || t1.Events[0].Name != "weir.retry_scheduled" || !hasAttr(t1.Events[0].Attrs, attribute.String("weir.code", "E_RATE_LIMITED")) ||
		!hasAttr(t1.Attrs, attribute.Int("weir.turn.tries", 3)) {
		t.Errorf("turn 1: events %+v attrs %v, want its two retries and three tries", t1.Events, t1.Attrs)
	}
	// The second failed try said what it used (a stream cut off after its
	// start); the first, refused, nothing.
	if !hasAttr(t1.Events[1].Attrs, attribute.Int64("gen_ai.usage.input_tokens", 321)) || hasAttrKey(t1.Events[0].Attrs, "gen_ai.usage.input_tokens") {
		t.Errorf("turn 1's retries %+v: want the second's reported tokens only", t1.Events)
	}
	if t2 := spanBy(t, spans, withCall(key("a", 1, 1), "turn:2")); len(t2.Events) != 0 || hasAttrKey(t2.Attrs, "weir.turn.tries") {
		t.Errorf("turn 2: events %+v attrs %v, want none", t2.Events, t2.Attrs)
	}
	for _, s := range spans {
		if s.Key.Call == "try:1" {
			t.Errorf("a model turn's retry made a tool try span %+v", s.Key)
		}
	}
}
