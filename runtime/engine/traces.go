package engine

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/telemetry"
)

// TraceOutbox is the pseudo run id whose timeline lists the finished runs
// whose traces are still to be exported (internal/traceexport): an entry
// is written in the run's terminal transaction and removed once the
// run's spans reached the collector.
const TraceOutbox = "trace-outbox"

// evTraceDue is an outbox entry: the run named in its detail finished.
const evTraceDue = "trace_due"

// ContentCapturer is what a TraceExporter that exports model turns'
// messages says (telemetry.Exporter.CapturesContent): then a visit's
// first turn journals the prompt it began with, which nothing else keeps.
type ContentCapturer interface {
	CapturesContent() bool
}

// tracedPrompt is the prompt turn 1 of a keeps for the trace export, nil
// for a later turn or while content is not captured.
func tracedPrompt(cfg *Config, a *agentLoop, turn int) *store.AgentPrompt {
	cc, ok := cfg.Traces.(ContentCapturer)
	if turn != 1 || !ok || !cc.CapturesContent() {
		return nil
	}
	return &store.AgentPrompt{System: telemetry.CutContent(a.system), User: telemetry.CutContent(a.prompt)}
}

// TraceExporter sends a finished run's spans, built from its journal by
// telemetry.Build (*telemetry.Exporter, over OTLP).
type TraceExporter interface {
	// Sampled says whether the run of trace id tid is exported.
	Sampled(tid trace.TraceID) bool
	// QueueSize is the most spans one Export takes.
	QueueSize() int
	// Export sends spans and returns nil only once all arrived.
	Export(ctx context.Context, spans []telemetry.Span) error
}

// callTrace is the trace context call c carries to its plugin: the run's
// trace, the node visit's span the parent, sampled when x exports the
// run (x nil: tracing is off, and a plugin's spans are not sampled).
func callTrace(x TraceExporter, c *toolCall) string {
	tid := telemetry.RunTraceID(c.Run.ID, c.Run.TraceID)
	key := telemetry.SpanKey{Run: c.Run.ID, Node: c.Node.ID, Visit: c.Visit, Attempt: c.Attempt}
	return telemetry.CallParent(tid, key, x != nil && x.Sampled(tid))
}

// runFields are the fields a log line about run r begins with: its id and
// its trace id (the one its spans carry, so a collector joins the line to
// the trace), then kv.
func runFields(r *store.Run, kv ...any) []any {
	tid := r.TraceID
	if tid == "" {
		tid = telemetry.TraceID(r.ID).String()
	}
	return append([]any{"run", r.ID, "trace_id", tid}, kv...)
}

// logFields are runFields of the step's run, with the node it is at and
// that node visit's span id (the span its tool calls are children of), so
// a collector joins the line to the visit, then kv.
func (s *stepper) logFields(kv ...any) []any {
	if s.cont == nil || s.cont.Node == "" {
		return runFields(s.run, kv...)
	}
	node := s.cont.Node
	key := telemetry.SpanKey{Run: s.run.ID, Node: node, Visit: s.cont.Visits[node], Attempt: s.run.Attempt}
	return runFields(s.run, append([]any{"node", node, "span_id", telemetry.SpanID(key).String()}, kv...)...)
}

// traceHost is the engine's side of the trace-export service.
type traceHost struct{ e *Engine }

// Holder names this daemon in the trace-export service lease: its host
// id, so a restarted daemon takes its own lease back.
func (h traceHost) Holder() string { return hostOf(h.e) }

// Info and Error log.
func (h traceHost) Info(msg string, args ...any)  { h.e.log.Info(msg, args...) }
func (h traceHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }
