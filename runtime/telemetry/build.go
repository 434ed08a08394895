package telemetry

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/runtime/store"
)

// The journal's event types Build reads: the engine's own (its events.go);
// a test in the engine keeps the two lists the same.
const (
	EvAccepted     = "accepted"
	EvLeased       = "leased"
	EvExpired      = "expired"
	EvDropped      = "dropped"
	EvRetry        = "retry_scheduled"
	EvDeadLettered = "dead_lettered"
	EvNodeStarted  = "node_started"
	EvNodeDone     = "node_completed"
	EvNodeFailed   = "node_failed"
	EvToolStarted  = "tool_started"
	EvWaiting      = "waiting"
	EvCompleted    = "completed"
	EvFailed       = "failed"
	EvCancelled    = "cancelled"
)

// Bounds of one run's trace (DESIGN §12, "Bounded by default"): a run of
// a loop of many visits gives at most MaxSpans spans, the root first; the
// root says how many more there were (weir.spans_dropped).
const (
	MaxSpans         = 1024
	MaxEventsPerSpan = 64
	maxAttrBytes     = 256
)

// Interrupted is the status description of a span a kill cut short.
const Interrupted = "interrupted by restart"

// ErrNotTerminal is Build given a timeline that has no terminal record:
// a run is traced once it has finished.
var ErrNotTerminal = errors.New("telemetry: the run has not finished")

// Span is one span as the journal gives it: what the SDK is handed.
type Span struct {
	Key    SpanKey
	Trace  trace.TraceID
	ID     trace.SpanID
	Parent trace.SpanID // invalid: none
	Name   string
	Start  time.Time
	End    time.Time
	Attrs  []attribute.KeyValue
	Events []Event
	// Links are other spans this one follows from: a child run's root
	// links to its parent run's root.
	Links  []trace.SpanContext
	Status codes.Code
	// Kind is the span's kind: a model turn is a client's call (the
	// GenAI conventions), the rest internal (the zero value).
	Kind trace.SpanKind
	// Description says why the status is Error (an E_ code, "interrupted
	// by restart").
	Description string
	// State is the caller's tracestate, carried by every span of its
	// trace (none for a run's own trace).
	State trace.TraceState
}

// Event is a point in a span's time: a retry, a tool call's start.
type Event struct {
	Name  string
	At    time.Time
	Attrs []attribute.KeyValue
}

// builder is Build's state while it reads a timeline.
type builder struct {
	run   string
	trace trace.TraceID
	state trace.TraceState // the caller's, beside its traceparent
	root  *Span
	spans []*Span
	// ends counts each node's ended visits: a visit's number is one more.
	ends map[string]int
	segs map[SpanKey]int
	// open is the node visit in progress; cursor is when the next node
	// began if the timeline says nothing else (the end of the previous
	// one, in one lease).
	open   *Span
	cursor time.Time
	waits  map[string]*Span // each node's wait in progress
	// try is the open visit's tool try in progress, once a retry showed
	// the visit is more than one try; tries counts the tries it ended.
	try   *Span
	tries int
	// leased says the step task is leased and leaseAttempt is the
	// lease's attempt; cuts are leases a kill cut before any event named
	// their node.
	leased       bool
	leaseAttempt int
	cuts         []cutLease
	over         int // spans left out past MaxSpans
	// parts are the spans in progress of the tasks that work for a visit
	// without being its step (items, agent calls), by task id; items
	// the item spans in progress by node and index; cohorts each node's
	// cohort span in progress.
	parts   map[string]*Span
	items   map[string]*Span
	cohorts map[string]*Span
	// turnRetries are the retries of each node's model turn not yet
	// answered, by node and turn.
	turnRetries map[string][]*store.Event
}

// Build returns the spans of the run whose timeline evs is (in sequence
// order, as the store lists it), the root first: the run from acceptance
// to its terminal record, a span per node visit, a span per wait, each
// with ids derived from the journal (SpanID). It is pure: the same
// timeline gives the same spans.
func Build(evs []*store.Event) ([]Span, error) {
	if len(evs) == 0 || evs[0].Type != EvAccepted {
		return nil, fmt.Errorf("telemetry: a timeline starts with its %s event", EvAccepted)
	}
	b := &builder{run: evs[0].RunID, ends: map[string]int{}, segs: map[SpanKey]int{}, waits: map[string]*Span{},
		parts: map[string]*Span{}, items: map[string]*Span{}, cohorts: map[string]*Span{}, turnRetries: map[string][]*store.Event{}}
	b.accepted(evs[0])
	for _, e := range evs[1:] {
		if b.step(e) {
			return b.result(), nil
		}
	}
	return nil, ErrNotTerminal
}

// RunTrace is the trace id of the run whose accepted event is e: the
// caller's, from the traceparent journaled with it, else one derived from
// the run id. A sampler can decide on it before the timeline is read.
func RunTrace(e *store.Event) trace.TraceID {
	tid, _ := runParent(e)
	return tid
}

// runParent is the run's trace id and its root's parent (the caller's
// span; invalid when none).
func runParent(e *store.Event) (trace.TraceID, trace.SpanID) {
	tp, _ := e.Detail["traceparent"].(string)
	return callerTrace(e.RunID, tp)
}

func (b *builder) accepted(e *store.Event) {
	key := SpanKey{Run: b.run}
	b.root = &Span{Key: key, ID: SpanID(key), Start: e.At, Name: "run"}
	b.trace, b.root.Parent = runParent(e)
	if b.root.Parent.IsValid() {
		ts, _ := e.Detail["tracestate"].(string)
		b.state = ParseTraceState(ts)
	}
	b.root.Trace = b.trace
	b.root.Attrs = append(b.root.Attrs, attribute.String("weir.run_id", b.run))
	if f, ok := e.Detail["flow"].(string); ok {
		b.root.Name = "run " + escape.Cut(f, maxAttrBytes)
		b.root.Attrs = append(b.root.Attrs, attribute.String("weir.flow", escape.Cut(f, maxAttrBytes)))
	}
	if o, ok := e.Detail["owner"].(string); ok {
		b.root.Attrs = append(b.root.Attrs, attribute.String("weir.owner", escape.Cut(o, maxAttrBytes)))
	}
	if p, ok := e.Detail["parent"].(string); ok && p != "" {
		// A subflow's or a fan-out's child: its own trace, linked to
		// the parent run's root (the parent's wait span names the child).
		b.root.Attrs = append(b.root.Attrs, attribute.String("weir.parent_run_id", escape.Cut(p, maxAttrBytes)))
		if n := detailString(e, "node"); n != "" {
			b.root.Attrs = append(b.root.Attrs, attribute.String("weir.parent_node", n))
		}
		b.root.Links = append(b.root.Links, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: TraceID(p), SpanID: SpanID(SpanKey{Run: p}), TraceFlags: trace.FlagsSampled}))
	}
	b.spans = append(b.spans, b.root)
	b.cursor = e.At
}

// leaseEvents name the node of the task, which is where its lease began,
// not where the run is: a lease holds the run across several nodes, and
// a rescued lease still names the node its task was made at. Which node
// a visit is comes only from the events the step itself writes.
var leaseEvents = map[string]bool{EvLeased: true, EvExpired: true, EvDeadLettered: true, EvDropped: true,
	"queued": true, "renewed": true, EvDrained: true}

// EvDrained is the journal's record of held work given back at a stop.
const EvDrained = "drained"

// step reads one event; it reports whether the run ended there.
func (b *builder) step(e *store.Event) bool {
	if b.partEvent(e) {
		return false // an item's or an agent call's: its own span's
	}
	if e.Type != EvWaiting && e.Type != "queued" && e.Type != "renewed" {
		// A wait lasts until the run's next event: the decision, the
		// wake's lease, the timeout's failure.
		b.endWaits(e)
	}
	switch e.Type {
	case EvLeased:
		b.lease(e)
	case EvExpired, EvDrained:
		b.cut(e.At) // the lease ended without the visit's end
	case EvDeadLettered:
		if b.open != nil {
			b.event(b.open, e)
			b.open.Status, b.open.Description = codes.Error, "dead-lettered"
			b.closeVisit(e.At, false)
		}
		b.event(b.root, e)
		b.leased = false
	case EvNodeStarted:
		if b.open != nil && b.open.Key.Node != e.Node {
			b.interrupt(e.At)
		}
		if b.open == nil {
			b.resolveCuts(e.Node)
			b.openVisit(e.Node, e.Attempt, e.At)
		}
	case EvNodeDone, EvNodeFailed:
		v := b.visitOf(e)
		b.addAttrs(v, e)
		if e.Type == EvNodeFailed {
			v.Status, v.Description = codes.Error, detailString(e, "code")
		} else {
			v.Status = codes.Ok
		}
		b.closeVisit(e.At, true)
		b.cursor = e.At
	case EvWaiting:
		b.wait(e)
	case EvCompleted, EvFailed, EvCancelled:
		b.terminal(e)
		return true
	case EvAgentTurn:
		b.turn(e)
	case EvCohortClosing, EvCohortClosed, EvCohortStopped:
		b.cohortEvent(e)
	case EvRetry:
		v := b.visitOf(e)
		b.retry(e)
		b.event(v, e)
		if turn := detailString(e, "turn"); turn != "" {
			// A model turn's retry: the turn's span, once its answer
			// is journaled, shows it too.
			b.turnRetries[e.Node+"\x00"+turn] = append(b.turnRetries[e.Node+"\x00"+turn], e)
		}
	default:
		switch {
		case leaseEvents[e.Type]:
			if e.Type == EvDropped {
				b.event(b.root, e)
			}
		case e.Node != "":
			b.event(b.visitOf(e), e) // tool_started, decisions, reconciles, cohort records
		}
	}
	return false
}

// lease is the run's step task leased: the run is worked on again.
func (b *builder) lease(e *store.Event) {
	switch {
	case b.open != nil && b.open.Key.Attempt != e.Attempt:
		b.interrupt(e.At) // a new lease took over without the visit's end
	case b.open == nil && b.leased && b.leaseAttempt != e.Attempt:
		b.cut(e.At)
	}
	b.leased, b.leaseAttempt = true, e.Attempt
	if b.open == nil {
		b.cursor = e.At
	} else if b.tries > 0 && b.try == nil {
		b.try = b.newTry(e.At) // the retry's lease: the next try begins
	}
}

// cut ends the lease in hand without the end of what it was doing: the
// open visit is interrupted; a lease with no visit yet named (the run
// between two nodes as the step writes them) is remembered, to be named
// by the node the run resumes at.
func (b *builder) cut(at time.Time) {
	switch {
	case b.open != nil:
		b.interrupt(at)
	case b.leased:
		b.cuts = append(b.cuts, cutLease{start: b.cursor, end: at, attempt: b.leaseAttempt})
	}
	b.leased = false
}

// cutLease is a lease cut before any event named its node.
type cutLease struct {
	start, end time.Time
	attempt    int
}

// resolveCuts makes a span of each remembered cut, now that the run
// resumed at node: a node's end is journaled with the continuation that
// names the next, so the node a run resumes at is the one it was at.
func (b *builder) resolveCuts(node string) {
	for _, c := range b.cuts {
		b.openVisit(node, c.attempt, c.start)
		b.interrupt(c.end)
	}
	b.cuts = nil
}

// visitOf is the visit an event of the step names: the open one, else
// one opened (at the cursor) for e's node.
func (b *builder) visitOf(e *store.Event) *Span {
	if b.open != nil && b.open.Key.Node != e.Node {
		b.interrupt(e.At)
	}
	if b.open == nil {
		b.resolveCuts(e.Node)
		b.openVisit(e.Node, e.Attempt, b.cursor)
	}
	return b.open
}

// endWaits ends the waits in progress at e.
func (b *builder) endWaits(e *store.Event) {
	for n, w := range b.waits {
		w.End = e.At
		w.Attrs = append(w.Attrs, attribute.String("weir.wait.ended_by", e.Type))
		delete(b.waits, n)
	}
}

func (b *builder) openVisit(node string, attempt int, at time.Time) {
	key := SpanKey{Run: b.run, Node: node, Visit: b.ends[node] + 1, Attempt: attempt}
	seg := b.segs[key]
	b.segs[key]++
	key.Seg = seg
	b.open = &Span{Key: key, Trace: b.trace, ID: SpanID(key), Parent: b.root.ID, Name: escape.Cut(node, maxAttrBytes), Start: at,
		Attrs: []attribute.KeyValue{attribute.String("weir.node", escape.Cut(node, maxAttrBytes)),
			attribute.Int("weir.visit", key.Visit), attribute.Int("weir.attempt", attempt)}}
}

// closeVisit ends the open visit at at and keeps it; ended says the
// journal recorded the visit's end, so the node's next visit is another.
func (b *builder) closeVisit(at time.Time, ended bool) {
	v := b.open
	b.open = nil
	if ended {
		b.ends[v.Key.Node]++
	}
	v.End = at
	b.keep(v)
	if ended {
		b.endCohort(v.Key.Node, at)
	}
	if t := b.try; t != nil {
		// The last try ends with its visit, as its visit did.
		t.End, t.Status, t.Description = at, v.Status, v.Description
		if v.Description == Interrupted {
			t.Attrs = append(t.Attrs, attribute.Bool("weir.interrupted", true))
		}
		b.keep(t)
	}
	b.try, b.tries = nil, 0
}

// retry ends the open visit's try in progress (the first one began with
// the visit) with the error it is retried for. A model turn's or a
// fan-out item's retry is not the visit's tool try.
func (b *builder) retry(e *store.Event) {
	if b.open == nil || b.open.Key.Node != e.Node {
		return
	}
	for _, k := range []string{"turn", "call", "item"} {
		if _, ok := e.Detail[k]; ok {
			return
		}
	}
	t := b.try
	if t == nil {
		t = b.newTry(b.open.Start)
	}
	t.End, t.Status, t.Description = e.At, codes.Error, detailString(e, "code")
	b.keep(t)
	b.try = nil
	b.tries++
}

// newTry opens the open visit's next tool try at at.
func (b *builder) newTry(at time.Time) *Span {
	n := b.tries + 1
	key := b.open.Key
	key.Call = "try:" + strconv.Itoa(n)
	attrs := []attribute.KeyValue{attribute.Int("weir.try", n)}
	for _, a := range b.open.Attrs {
		if a.Key == "weir.tool" {
			attrs = append(attrs, a)
		}
	}
	return &Span{Key: key, Trace: b.trace, ID: SpanID(key), Parent: b.open.ID, Name: "try " + b.open.Name, Start: at, Attrs: attrs}
}

// interrupt closes the open visit as cut short by a kill.
func (b *builder) interrupt(at time.Time) {
	v := b.open
	v.Status, v.Description = codes.Error, Interrupted
	v.Attrs = append(v.Attrs, attribute.Bool("weir.interrupted", true))
	b.closeVisit(at, false)
}

func (b *builder) wait(e *store.Event) {
	parent := b.visitOf(e)
	id, kind := detailString(e, "wait"), detailString(e, "for")
	// A wait is named by its id where it has one (NODE@VISIT...); a
	// child's or a cohort's by its kind, and a visit may park on those
	// more than once: the n-th of a name in the visit is "NAME.n".
	key := parent.Key
	key.Call = "wait:" + id
	if id == "" {
		key.Call = "wait:" + kind
	}
	if n := b.segs[key]; n > 0 {
		b.segs[key]++
		key.Call += "." + strconv.Itoa(n)
	} else {
		b.segs[key] = 1
	}
	attrs := []attribute.KeyValue{attribute.String("weir.wait.kind", kind)}
	if id != "" {
		attrs = append(attrs, attribute.String("weir.wait.id", id))
	}
	w := &Span{Key: key, Trace: b.trace, ID: SpanID(key), Parent: parent.ID, Name: "wait " + parent.Name, Start: e.At, End: e.At, Attrs: attrs}
	if child := detailString(e, "child"); child != "" {
		w.Attrs = append(w.Attrs, attribute.String("weir.wait.child_run_id", child))
		w.Links = append(w.Links, childRoot(child)) // the subflow's trace
	}
	if kind == "cohort" {
		b.cohort(e.Node, e.At)
	}
	b.waits[e.Node] = w
	b.keep(w)
}

// terminal ends the root, and what is still open, at the run's end.
func (b *builder) terminal(e *store.Event) {
	status, desc := codes.Ok, ""
	switch e.Type {
	case EvFailed:
		status, desc = codes.Error, detailString(e, "code")
	case EvCancelled:
		status, desc = codes.Error, "cancelled"
	}
	if v := b.open; v != nil {
		v.Status, v.Description = status, desc
		b.closeVisit(e.At, true)
	}
	for _, w := range b.waits {
		w.End = e.At
	}
	// A part still running when its run ended (a cancel, a failure
	// elsewhere) ends with the run, in a fixed order: Build is pure.
	for _, task := range slices.Sorted(maps.Keys(b.parts)) {
		p := b.parts[task]
		p.Status, p.Description = status, desc
		b.endPart(task, e.At)
	}
	for _, node := range slices.Sorted(maps.Keys(b.cohorts)) {
		b.endCohort(node, e.At)
	}
	for _, c := range b.cuts {
		// A lease cut and never resumed at a node: the run's end says
		// where it went, the root that it was cut.
		b.root.Events = append(b.root.Events, Event{Name: "weir.interrupted", At: c.end})
	}
	b.root.End, b.root.Status, b.root.Description = e.At, status, desc
	b.root.Attrs = append(b.root.Attrs, attribute.String("weir.outcome", e.Type))
	if b.over > 0 {
		b.root.Attrs = append(b.root.Attrs, attribute.Int("weir.spans_dropped", b.over))
	}
}

func (b *builder) event(s *Span, e *store.Event) {
	if len(s.Events) >= MaxEventsPerSpan {
		return
	}
	ev := Event{Name: "weir." + e.Type, At: e.At}
	for _, k := range []string{"code", "try", "reason", "tool"} {
		if v := detailString(e, k); v != "" {
			ev.Attrs = append(ev.Attrs, attribute.String("weir."+k, v))
		}
	}
	// A failed model try's tokens, as the provider reported them.
	for _, k := range []string{"input_tokens", "output_tokens"} {
		if v, ok := detailInt(e, k); ok && v > 0 {
			ev.Attrs = append(ev.Attrs, attribute.Int64("gen_ai.usage."+k, v))
		}
	}
	s.Events = append(s.Events, ev)
}

// addAttrs copies what a node's end says of it.
func (b *builder) addAttrs(s *Span, e *store.Event) {
	if t := detailString(e, "tool"); t != "" {
		s.Attrs = append(s.Attrs, attribute.String("weir.tool", t))
	}
	if c := detailString(e, "code"); c != "" {
		s.Attrs = append(s.Attrs, attribute.String("weir.error.code", c))
	}
}

func (b *builder) keep(s *Span) {
	if len(b.spans) >= MaxSpans {
		b.over++
		return
	}
	b.spans = append(b.spans, s)
}

func (b *builder) result() []Span {
	out := make([]Span, len(b.spans))
	for i, s := range b.spans {
		if s.End.Before(s.Start) {
			s.End = s.Start
		}
		if s.Trace == b.trace {
			s.State = b.state
		}
		out[i] = *s
	}
	return out
}

// detailString is a detail's value as a bounded string ("" if absent).
func detailString(e *store.Event, key string) string {
	v, ok := e.Detail[key]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return escape.Cut(s, maxAttrBytes)
	}
	return escape.Cut(fmt.Sprint(v), maxAttrBytes)
}
