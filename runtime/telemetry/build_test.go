package telemetry

import (
	"errors"
	"reflect"
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

func hasAttr(attrs []attribute.KeyValue, kv attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == kv {
			return true
		}
	}
	return false
}

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
		if s.Key.Call != "" {
			waits++
			if s.End.Sub(s.Start) != time.Second {
				t.Errorf("wait %+v lasts %v, want until its node's next event", s.Key, s.End.Sub(s.Start))
			}
		}
	}
	if waits != 4 || len(spans) != 6 {
		t.Errorf("%d spans with %d waits, want 6 with 4", len(spans), waits)
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
