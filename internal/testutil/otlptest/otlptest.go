// Package otlptest is a loopback OTLP trace receiver for tests, over HTTP
// (New) or gRPC (NewGRPC): it decodes each export request as a collector
// would (the protobuf of go.opentelemetry.io/proto/otlp) and keeps the
// spans, so a test asserts what reached the wire rather than what the
// SDK was handed.
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is a span as received, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentID string
	TraceState                string
	Name                      string
	// Error: status code Error; OK: status code Ok.
	Error, OK   bool
	Description string
	Attrs       map[string]any // string, bool, int64, float64 or []string values
	Links       []string       // linked span ids
	Service     string         // the resource's service.name
	Events      []Event
	Client      bool // span kind Client
}

// Event is a span's event as received.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Sink is the receiver. URL is its base URL (the exporter posts to
// URL/v1/traces); a gRPC sink's Addr is its host:port.
type Sink struct {
	URL  string
	Addr string

	mu       sync.Mutex
	spans    []Span
	requests int
	headers  []http.Header
}

// New starts a sink, closed at the end of the test.
func New(t testing.TB) *Sink {
	t.Helper()
	s := &Sink{}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// NewGRPC starts a sink serving OTLP over gRPC (without TLS), stopped at
// the end of the test.
func NewGRPC(t testing.TB) *Sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{Addr: ln.Addr().String()}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcSink{s: s})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return s
}

// grpcSink is a Sink's gRPC trace service.
type grpcSink struct {
	coltrace.UnimplementedTraceServiceServer
	s *Sink
}

func (g grpcSink) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	h := http.Header{}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for k, vs := range md {
			for _, v := range vs {
				h.Add(k, v)
			}
		}
	}
	g.s.keep(req, h)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// keep records one export request's spans and headers.
func (s *Sink) keep(req *coltrace.ExportTraceServiceRequest, h http.Header) {
	var got []Span
	for _, rs := range req.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		name, _ := service.(string)
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				got = append(got, span(sp, name))
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spans = append(s.spans, got...)
	s.requests++
	s.headers = append(s.headers, h)
}

// Spans returns the spans received so far, in arrival order.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

// Headers returns each request's headers.
func (s *Sink) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// ServeHTTP decodes one export request.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.keep(&req, r.Header.Clone())
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func span(sp *tracepb.Span, service string) Span {
	out := Span{TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId), TraceState: sp.TraceState, Name: sp.Name,
		Attrs: attrs(sp.Attributes), Service: service, Description: sp.GetStatus().GetMessage()}
	if len(sp.ParentSpanId) > 0 {
		out.ParentID = hex.EncodeToString(sp.ParentSpanId)
	}
	switch sp.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_ERROR:
		out.Error = true
	case tracepb.Status_STATUS_CODE_OK:
		out.OK = true
	}
	for _, l := range sp.Links {
		out.Links = append(out.Links, hex.EncodeToString(l.SpanId))
	}
	for _, e := range sp.Events {
		out.Events = append(out.Events, Event{Name: e.Name, Attrs: attrs(e.Attributes)})
	}
	out.Client = sp.Kind == tracepb.Span_SPAN_KIND_CLIENT
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = v.BoolValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var vs []string // the string arrays weir's spans carry
			for _, e := range v.ArrayValue.GetValues() {
				vs = append(vs, e.GetStringValue())
			}
			out[kv.Key] = vs
		}
	}
	return out
}
