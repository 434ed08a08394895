package telemetry

import (
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/runtime/store"
)

// The journal's events of a visit's parts that Build reads besides the
// step's own: model turns, an agent's tool calls, fan-out items and their
// cohort. Like the others, the engine's names (its test keeps them so).
const (
	EvAgentTurn     = "agent_turn"
	EvAgentCallDone = "agent_call_done"
	EvItemDone      = "item_done"
	EvCohortClosing = "cohort_closing"
	EvCohortClosed  = "cohort_closed"
	EvCohortStopped = "cohort_stopped"
)

// GenAIOperationChat and the other operation names of the OpenTelemetry
// GenAI conventions that weir's spans carry as gen_ai.operation.name.
const (
	GenAIOperationChat        = "chat"
	GenAIOperationExecuteTool = "execute_tool"
	GenAIOperationInvokeAgent = "invoke_agent"
)

// partEvent says whether e is an event of a task that works for a visit
// without being its step — an item's, an agent call's — and reads it if
// so: such events say nothing of the step's lease or the visit's waits.
func (b *builder) partEvent(e *store.Event) bool {
	_, item := e.Detail["item"]
	_, call := e.Detail["call"]
	task := detailString(e, "task")
	if (item || (call && b.parts[task] != nil)) && (e.Type == "queued" || e.Type == "renewed") {
		return true // a part's queueing and renewals say nothing of its span
	}
	switch {
	case e.Type == EvLeased && (item || call):
		b.partLeased(e, item)
	case e.Type == EvItemDone:
		b.itemDone(e)
	case e.Type == EvAgentCallDone:
		if p := b.parts[task]; p != nil {
			p.Status, p.Description = codes.Ok, ""
			if c := detailString(e, "code"); c != "" {
				p.Status, p.Description = codes.Error, c
				p.Attrs = append(p.Attrs, attribute.String("weir.error.code", c))
			}
			b.endPart(task, e.At)
		}
	case (e.Type == EvExpired || e.Type == EvDrained) && b.parts[task] != nil:
		p := b.parts[task]
		p.Status, p.Description = codes.Error, Interrupted
		p.Attrs = append(p.Attrs, attribute.Bool("weir.interrupted", true))
		b.event(p, e)
		b.endPart(task, e.At)
	case item || (call && b.parts[task] != nil):
		// A retry, a drop, a reconcile of a part: an event of its span.
		// (The step's own events may name a call too — an approval's, a
		// park on a call of one of the agent's flows — and stay the
		// step's.)
		if p := b.partOf(e); p != nil {
			b.event(p, e)
		}
		if e.Type == EvDropped && item {
			b.event(b.root, e)
		}
	default:
		return false
	}
	return true
}

// partOf is the span in progress of the part e names, if any.
func (b *builder) partOf(e *store.Event) *Span {
	if p := b.parts[detailString(e, "task")]; p != nil {
		return p
	}
	if _, ok := e.Detail["item"]; ok {
		return b.items[e.Node+"\x00"+detailString(e, "item")]
	}
	return nil
}

// partParent is the span a part of node's visit hangs from: the visit in
// progress, else (the step cut by a kill while its parts went on) the
// root; visit is the visit's number either way.
func (b *builder) partParent(node string) (*Span, int) {
	if b.open != nil && b.open.Key.Node == node {
		return b.open, b.open.Key.Visit
	}
	return b.root, b.ends[node] + 1
}

// partLeased opens the span of an item's or an agent call's task at its
// lease; a lease of a task whose span is open under another attempt
// means a kill cut the last one.
func (b *builder) partLeased(e *store.Event, item bool) {
	task := detailString(e, "task")
	if p := b.parts[task]; p != nil {
		if p.Key.Attempt == e.Attempt {
			b.event(p, e) // the lease after a retry: the same try of the part
			return
		}
		p.Status, p.Description = codes.Error, Interrupted
		p.Attrs = append(p.Attrs, attribute.Bool("weir.interrupted", true))
		b.endPart(task, e.At)
	}
	parent, visit := b.partParent(e.Node)
	key := SpanKey{Run: b.run, Node: e.Node, Visit: visit, Attempt: e.Attempt}
	var s *Span
	if item {
		n := detailString(e, "item")
		key.Call = "item:" + n
		c := b.cohort(e.Node, e.At)
		s = &Span{Parent: c.ID, Name: "item " + n + " " + c.Name[len("cohort "):],
			Attrs: []attribute.KeyValue{attribute.String("weir.node", escape.Cut(e.Node, maxAttrBytes)), attribute.String("weir.item", n)}}
		b.items[e.Node+"\x00"+n] = s
	} else {
		turn, call, tool := detailString(e, "turn"), detailString(e, "call"), detailString(e, "tool")
		key.Call = "call:" + turn + "." + call
		s = &Span{Parent: parent.ID, Name: GenAIOperationExecuteTool + " " + tool,
			Attrs: []attribute.KeyValue{attribute.String("gen_ai.operation.name", GenAIOperationExecuteTool),
				attribute.String("gen_ai.tool.name", tool), attribute.String("weir.tool", tool),
				attribute.String("weir.node", escape.Cut(e.Node, maxAttrBytes)), attribute.String("weir.turn", turn), attribute.String("weir.call", call)}}
	}
	key.Seg = b.segs[key]
	b.segs[key]++
	s.Key, s.Trace, s.ID, s.Start = key, b.trace, SpanID(key), e.At
	s.Attrs = append(s.Attrs, attribute.Int("weir.attempt", e.Attempt))
	b.parts[task] = s
}

// endPart ends the span of task's part at at and keeps it.
func (b *builder) endPart(task string, at time.Time) {
	p := b.parts[task]
	delete(b.parts, task)
	for k, s := range b.items {
		if s == p {
			delete(b.items, k)
		}
	}
	p.End = at
	b.keep(p)
}

// itemDone ends an item's span with the item's state: the span its task
// opened, or, for an item run as a child run (whose events are the
// child's own), one from the cohort's start linked to the child's root.
func (b *builder) itemDone(e *store.Event) {
	n := detailString(e, "item")
	s := b.items[e.Node+"\x00"+n]
	if s == nil {
		c := b.cohort(e.Node, e.At)
		key := c.Key
		key.Call = "item:" + n
		key.Seg = b.segs[key]
		b.segs[key]++
		s = &Span{Key: key, Trace: b.trace, ID: SpanID(key), Parent: c.ID, Name: "item " + n + " " + c.Name[len("cohort "):], Start: c.Start,
			Attrs: []attribute.KeyValue{attribute.String("weir.node", escape.Cut(e.Node, maxAttrBytes)), attribute.String("weir.item", n)}}
	}
	state := detailString(e, "state")
	s.Attrs = append(s.Attrs, attribute.String("weir.item.state", state))
	if child := detailString(e, "child"); child != "" {
		s.Attrs = append(s.Attrs, attribute.String("weir.item.child_run_id", child))
		s.Links = append(s.Links, childRoot(child))
	}
	s.Status = codes.Ok
	if c := detailString(e, "code"); c != "" || state == string(store.ItemFailed) {
		s.Status, s.Description = codes.Error, c
		s.Attrs = append(s.Attrs, attribute.String("weir.error.code", c))
	}
	if task := detailString(e, "task"); b.parts[task] == s {
		b.endPart(task, e.At)
		return
	}
	for task, p := range b.parts {
		if p == s {
			b.endPart(task, e.At)
			return
		}
	}
	s.End = e.At
	b.keep(s)
}

// childRoot is the root span of a child run: a span links to it.
func childRoot(child string) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: TraceID(child), SpanID: SpanID(SpanKey{Run: child}), TraceFlags: trace.FlagsSampled})
}

// cohort is the span of node's cohort in progress, opened at at if there
// is none: a cohort lasts across its parent's waits (and a kill of its
// parent), so it is keyed by the visit without an attempt.
func (b *builder) cohort(node string, at time.Time) *Span {
	if c := b.cohorts[node]; c != nil {
		return c
	}
	parent, visit := b.partParent(node)
	key := SpanKey{Run: b.run, Node: node, Visit: visit, Call: "cohort"}
	name := escape.Cut(node, maxAttrBytes)
	c := &Span{Key: key, Trace: b.trace, ID: SpanID(key), Parent: parent.ID, Name: "cohort " + name, Start: at,
		Attrs: []attribute.KeyValue{attribute.String("weir.node", name)}}
	b.cohorts[node] = c
	return c
}

// cohortEvent reads a cohort's close: its reason on the cohort's span.
func (b *builder) cohortEvent(e *store.Event) {
	c := b.cohort(e.Node, e.At)
	b.event(c, e)
	switch e.Type {
	case EvCohortClosing:
		sufficient, _ := e.Detail["sufficient"].(bool)
		fuse, _ := e.Detail["fuse"].(bool)
		reason := "need_unmet" // every item ended and the need was not met
		switch {
		case fuse:
			reason = "deadline"
		case sufficient:
			reason = "need_met"
		}
		c.Attrs = append(c.Attrs, attribute.String("weir.cohort.close_reason", reason), attribute.Bool("weir.cohort.sufficient", sufficient))
		if need := detailString(e, "need"); need != "" {
			c.Attrs = append(c.Attrs, attribute.String("weir.cohort.need", need))
		}
		c.Status = codes.Ok
		if !sufficient {
			c.Status, c.Description = codes.Error, "insufficient"
		}
	case EvCohortStopped:
		c.Attrs = append(c.Attrs, attribute.String("weir.cohort.stopped", detailString(e, "stopped")))
	case EvCohortClosed:
		b.endCohort(e.Node, e.At)
	}
}

// endCohort ends node's cohort span, if one is open, at at.
func (b *builder) endCohort(node string, at time.Time) {
	c := b.cohorts[node]
	if c == nil {
		return
	}
	delete(b.cohorts, node)
	c.End = at
	b.keep(c)
}

// turn reads a journaled model turn: a span with the GenAI conventions'
// attributes, from when the turn was asked to when its answer was
// journaled, a child of the agent's visit; the tool calls it asked for
// are its events. Prompt and completion stay out: the journal does not
// hold them in the timeline, and a trace backend is not where they
// belong by default.
func (b *builder) turn(e *store.Event) {
	v := b.visitOf(e)
	if !hasAttr(v.Attrs, attribute.String("gen_ai.operation.name", GenAIOperationInvokeAgent)) {
		v.Attrs = append(v.Attrs, attribute.String("gen_ai.operation.name", GenAIOperationInvokeAgent),
			attribute.String("gen_ai.agent.name", v.Name))
	}
	n := detailString(e, "turn")
	key := v.Key
	key.Call = "turn:" + n
	start := e.At
	if s, ok := e.Detail["asked_at"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil && !t.After(e.At) {
			start = t
		}
	} else if t, ok := e.Detail["asked_at"].(time.Time); ok && !t.After(e.At) {
		start = t
	}
	model, tool := detailString(e, "model"), detailString(e, "model_tool")
	provider := detailString(e, "provider")
	if provider == "" {
		provider = "weir." + pluginOf(tool) // the tool did not say: the plugin that answered
	}
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", GenAIOperationChat),
		attribute.String("gen_ai.provider.name", provider), attribute.String("gen_ai.request.model", model)}
	if mt, ok := detailInt(e, "max_tokens"); ok && mt > 0 {
		attrs = append(attrs, attribute.Int64("gen_ai.request.max_tokens", mt))
	}
	if rm := detailString(e, "response_model"); rm != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.model", rm))
	}
	if in, ok := detailInt(e, "input_tokens"); ok {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", in))
	}
	if out, ok := detailInt(e, "output_tokens"); ok {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.output_tokens", out))
	}
	if sr := detailString(e, "stop_reason"); sr != "" {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{sr}))
	}
	attrs = append(attrs, attribute.String("weir.turn", n), attribute.String("weir.tool", tool))
	if c, ok := detailInt(e, "cost"); ok {
		attrs = append(attrs, attribute.Int64("weir.cost", c))
	}
	if r, ok := e.Detail["usage_reported"].(bool); ok && !r {
		attrs = append(attrs, attribute.Bool("weir.usage_estimated", true))
	}
	s := &Span{Key: key, Trace: b.trace, ID: SpanID(key), Parent: v.ID, Name: GenAIOperationChat + " " + model, Start: start, End: e.At,
		Attrs: attrs, Status: codes.Ok, Kind: trace.SpanKindClient}
	// The turn's tries before the one answered (a rate limit, a provider
	// down), as the retries the journal recorded.
	retries := b.turnRetries[e.Node+"\x00"+n]
	delete(b.turnRetries, e.Node+"\x00"+n)
	for _, r := range retries {
		b.event(s, r)
	}
	if len(retries) > 0 {
		s.Attrs = append(s.Attrs, attribute.Int("weir.turn.tries", len(retries)+1))
	}
	tools, _ := e.Detail["tools"].([]any)
	if ts, ok := e.Detail["tools"].([]string); ok {
		for _, t := range ts {
			tools = append(tools, t)
		}
	}
	for i, t := range tools {
		if len(s.Events) >= MaxEventsPerSpan {
			break
		}
		s.Events = append(s.Events, Event{Name: "gen_ai.tool.call", At: e.At, Attrs: []attribute.KeyValue{
			attribute.String("gen_ai.tool.name", escape.Cut(fmt.Sprint(t), maxAttrBytes)), attribute.Int("weir.call", i)}})
	}
	b.keep(s)
}

// pluginOf is the plugin part of a tool's name ("llm" of "llm.chat").
func pluginOf(tool string) string {
	for i := 0; i < len(tool); i++ {
		if tool[i] == '.' {
			return tool[:i]
		}
	}
	return tool
}

// detailInt is a detail's value as an integer: a JSON number as the
// store decodes it, or an integer as a test builds it.
func detailInt(e *store.Event, key string) (int64, bool) {
	switch v := e.Detail[key].(type) {
	case float64:
		return int64(v), true
	case int64:
		return v, true
	case int:
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// hasAttr says attrs hold kv.
func hasAttr(attrs []attribute.KeyValue, kv attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == kv {
			return true
		}
	}
	return false
}
