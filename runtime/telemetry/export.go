package telemetry

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultQueueSize is the batch processor's queue: spans handed to the
// exporter and not yet sent. It holds at least one run's MaxSpans.
const DefaultQueueSize = 2 * MaxSpans

// Options say where and how spans are exported: the telemetry block.
type Options struct {
	// Endpoint is a URL or host:port; "" leaves it to the standard
	// OTEL_EXPORTER_OTLP_* variables, which the SDK's exporters read.
	Endpoint string
	// Protocol is "http" or "grpc"; "" reads OTEL_EXPORTER_OTLP_PROTOCOL
	// (grpc, else http).
	Protocol string
	// Headers go with every export (resolved secrets: never logged).
	Headers map[string]string
	// Insecure sends to a host:port endpoint without TLS.
	Insecure bool
	// Sample is the fraction of runs exported, by trace id.
	Sample float64
	// ServiceName is the resource's service.name.
	ServiceName string
	// QueueSize bounds the batch processor's queue (0: DefaultQueueSize).
	QueueSize int
	// CaptureContent exports model turns' messages (AddContent): off
	// unless asked, here or by OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT.
	CaptureContent bool
}

// CaptureContentEnv is the GenAI instrumentations' variable that turns on
// the export of messages ("true").
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// Exporter sends spans built by Build through the OpenTelemetry SDK: a
// TracerProvider whose id generator hands out the derived ids and a
// batch span processor with a bounded, non-blocking queue in front of
// the span exporter. It is used by one caller at a time (the engine's
// trace-export service), which keeps its count of drops exact.
type Exporter struct {
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	exp     *countingExporter
	sampler sdktrace.Sampler
	queue   int
	content bool
	dropped atomic.Int64
}

// New returns an Exporter over OTLP as o says.
func New(ctx context.Context, o Options) (*Exporter, error) {
	se, err := otlpExporter(ctx, o)
	if err != nil {
		return nil, err
	}
	return NewWithExporter(se, o), nil
}

// otlpExporter is the SDK's OTLP span exporter, over HTTP or gRPC.
func otlpExporter(ctx context.Context, o Options) (sdktrace.SpanExporter, error) {
	proto := o.Protocol
	if proto == "" {
		proto = "http"
		for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			if p := os.Getenv(v); p != "" {
				if p == "grpc" {
					proto = "grpc"
				}
				break
			}
		}
	}
	isURL := strings.Contains(o.Endpoint, "://")
	switch proto {
	case "http":
		var opts []otlptracehttp.Option
		switch {
		case isURL:
			u, err := tracesURL(o.Endpoint)
			if err != nil {
				return nil, err
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		case o.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(o.Endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(o.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(o.Headers))
		}
		return otlptracehttp.New(ctx, opts...)
	case "grpc":
		var opts []otlptracegrpc.Option
		switch {
		case isURL:
			opts = append(opts, otlptracegrpc.WithEndpointURL(o.Endpoint))
		case o.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(o.Endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(o.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(o.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	return nil, fmt.Errorf("telemetry: protocol %q is neither http nor grpc", proto)
}

// tracesURL is the OTLP/HTTP URL spans are posted to for an endpoint
// URL, read as OTEL_EXPORTER_OTLP_ENDPOINT is: a base to which the
// signal's path /v1/traces is added, unless the path already ends in it.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("telemetry: endpoint: %w", err)
	}
	if !strings.HasSuffix(u.Path, tracesPath) {
		u.Path = path.Join("/", u.Path, tracesPath)
	}
	return u.String(), nil
}

const tracesPath = "/v1/traces"

// NewWithExporter returns an Exporter sending to se (a test's in-memory
// exporter, or New's OTLP one); o's endpoint and headers are se's
// business.
func NewWithExporter(se sdktrace.SpanExporter, o Options) *Exporter {
	q := o.QueueSize
	if q <= 0 {
		q = DefaultQueueSize
	}
	name := o.ServiceName
	if name == "" {
		name = "weir"
	}
	x := &Exporter{exp: &countingExporter{SpanExporter: se}, queue: q, sampler: sdktrace.TraceIDRatioBased(o.Sample),
		content: o.CaptureContent || strings.EqualFold(os.Getenv(CaptureContentEnv), "true")}
	bsp := sdktrace.NewBatchSpanProcessor(x.exp, sdktrace.WithMaxQueueSize(q), sdktrace.WithMaxExportBatchSize(min(q, 512)))
	x.tp = sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(bsp),
		sdktrace.WithIDGenerator(journalIDs{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()), // Sampled decides per run
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	x.tracer = x.tp.Tracer("github.com/weirhq/weir/runtime/telemetry")
	return x
}

// CapturesContent says model turns' messages are exported (AddContent).
func (x *Exporter) CapturesContent() bool { return x.content }

// QueueSize is how many spans one Export may hand over at most.
func (x *Exporter) QueueSize() int { return x.queue }

// Sampled reports whether the run of trace id tid is exported: the
// ratio sampler's decision on the trace id, the same in every daemon.
func (x *Exporter) Sampled(tid trace.TraceID) bool {
	r := x.sampler.ShouldSample(sdktrace.SamplingParameters{TraceID: tid})
	return r.Decision == sdktrace.RecordAndSample
}

// Dropped is how many spans were handed over and never sent: dropped at
// the full queue or refused by the collector.
func (x *Exporter) Dropped() int64 { return x.dropped.Load() }

// ErrDropped is Export whose spans did not all reach the collector.
var ErrDropped = errors.New("telemetry: spans were dropped")

// Export hands spans to the batch processor and flushes it. It returns
// nil only when every span reached the collector; on an error the
// caller keeps the runs to export again (their ids are the same).
func (x *Exporter) Export(ctx context.Context, spans []Span) error {
	before := x.exp.sent.Load()
	for i := range spans {
		x.emit(ctx, &spans[i])
	}
	err := x.tp.ForceFlush(ctx)
	// Spans not sent were dropped at the full queue or refused by the
	// collector: one caller at a time, so the difference is this call's.
	lost := int64(len(spans)) - (x.exp.sent.Load() - before)
	if lost > 0 {
		x.dropped.Add(lost)
	}
	switch {
	case err != nil:
		return fmt.Errorf("telemetry: flushing spans: %w", err)
	case lost > 0:
		return fmt.Errorf("%w: %d of %d", ErrDropped, lost, len(spans))
	}
	return nil
}

// emit makes s an SDK span with its own ids and times.
func (x *Exporter) emit(ctx context.Context, s *Span) {
	ctx = context.WithValue(ctx, spanKey{}, s)
	if s.Parent.IsValid() {
		psc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.Trace, SpanID: s.Parent, TraceFlags: trace.FlagsSampled, TraceState: s.State})
		if s.Key.Node == "" && s.Key.Call == "" {
			ctx = trace.ContextWithRemoteSpanContext(ctx, psc) // the caller's span
		} else {
			ctx = trace.ContextWithSpanContext(ctx, psc)
		}
	}
	links := make([]trace.Link, len(s.Links))
	for i, l := range s.Links {
		links[i] = trace.Link{SpanContext: l}
	}
	kind := s.Kind
	if kind == trace.SpanKindUnspecified {
		kind = trace.SpanKindInternal
	}
	_, span := x.tracer.Start(ctx, s.Name, trace.WithTimestamp(s.Start), trace.WithAttributes(s.Attrs...),
		trace.WithSpanKind(kind), trace.WithLinks(links...))
	for _, e := range s.Events {
		span.AddEvent(e.Name, trace.WithTimestamp(e.At), trace.WithAttributes(e.Attrs...))
	}
	if s.Status != codes.Unset {
		span.SetStatus(s.Status, s.Description)
	}
	span.End(trace.WithTimestamp(s.End))
}

// Shutdown flushes what is queued and stops the exporter.
func (x *Exporter) Shutdown(ctx context.Context) error { return x.tp.Shutdown(ctx) }

// spanKey carries the Span being started to journalIDs.
type spanKey struct{}

// journalIDs is the TracerProvider's id generator: the ids Build derived
// from the journal, carried in the context of each span's start.
type journalIDs struct{}

func (journalIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if s, ok := ctx.Value(spanKey{}).(*Span); ok {
		return s.Trace, s.ID
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = crand.Read(tid[:])
	_, _ = crand.Read(sid[:])
	return tid, sid
}

func (journalIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if s, ok := ctx.Value(spanKey{}).(*Span); ok {
		return s.ID
	}
	var sid trace.SpanID
	_, _ = crand.Read(sid[:])
	return sid
}

// countingExporter counts the spans its exporter took.
type countingExporter struct {
	sdktrace.SpanExporter
	sent atomic.Int64
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.sent.Add(int64(len(spans)))
	}
	return err
}
