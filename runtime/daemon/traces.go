package daemon

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/telemetry"
)

// Traces is what the engine exports finished runs' traces through when
// the daemon starts with tracing on: the OTLP exporter of the telemetry
// block in force. A reload that changes the block (endpoint, protocol,
// headers, sample, service name, capture_content) swaps the exporter behind it, and the
// engine and its export service go on as they were; turning tracing on
// or off is a restart (the journal's trace outbox is kept only while it
// is on).
type Traces struct {
	cur atomic.Pointer[telemetry.Exporter]
	// retired is what the exporters a reload replaced dropped.
	retired atomic.Int64
}

var _ engine.TraceExporter = (*Traces)(nil)

func newTraces(x *telemetry.Exporter) *Traces {
	t := &Traces{}
	t.cur.Store(x)
	return t
}

// Sampled, QueueSize and Export are the exporter in force's. An export
// that meets an exporter a reload is retiring fails, and the service
// sends the run again through the new one (the outbox keeps it).
func (t *Traces) Sampled(tid trace.TraceID) bool { return t.cur.Load().Sampled(tid) }
func (t *Traces) QueueSize() int                 { return t.cur.Load().QueueSize() }
func (t *Traces) Export(ctx context.Context, spans []telemetry.Span) error {
	return t.cur.Load().Export(ctx, spans)
}

// CapturesContent is the exporter in force's: a reload may turn the
// export of model turns' messages on or off (engine.ContentCapturer).
func (t *Traces) CapturesContent() bool { return t.cur.Load().CapturesContent() }

var _ engine.ContentCapturer = (*Traces)(nil)

// Dropped counts the spans every exporter of the daemon dropped.
func (t *Traces) Dropped() int64 { return t.retired.Load() + t.cur.Load().Dropped() }

// swap puts x in force and returns the exporter it replaces, for the
// caller to flush and shut down.
func (t *Traces) swap(x *telemetry.Exporter) *telemetry.Exporter {
	old := t.cur.Swap(x)
	t.retired.Add(old.Dropped())
	return old
}

// retireTraces flushes and stops an exporter a reload replaced, within
// traceShutdown, without holding the reload up: what it cannot send in
// time is still in the trace outbox, which the new exporter sends.
func (d *Daemon) retireTraces(old *telemetry.Exporter) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceShutdown)
		defer cancel()
		if err := old.Shutdown(ctx); err != nil {
			d.log.Warn("flushing the replaced trace exporter", "error", err)
		}
	}()
}

// Shutdown flushes and stops the exporter in force.
func (t *Traces) Shutdown(ctx context.Context) error { return t.cur.Load().Shutdown(ctx) }
