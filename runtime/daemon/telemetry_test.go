package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/telemetry"
)

// otlpSink is a loopback OTLP/HTTP receiver: it decodes each export
// request and keeps its spans' ids and names, and the headers it got.
type otlpSink struct {
	mu      sync.Mutex
	spans   map[string]string // span id (hex) → name
	traces  map[string]bool   // trace ids (hex)
	auth    []string          // the Authorization header of each request
	service []string          // service.name of each resource
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				s.service = append(s.service, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.spans[hex.EncodeToString(sp.SpanId)] = sp.Name
				s.traces[hex.EncodeToString(sp.TraceId)] = true
			}
		}
	}
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// A daemon with a telemetry block exports a finished run's trace to the
// collector over OTLP/HTTP: the run's root and its task's span, with the
// ids derived from the journal, the header read from the environment.
func TestTelemetryExportsOverOTLP(t *testing.T) {
	t.Setenv("WEIR_TEST_OTLP_AUTH", "Bearer sink-0123456789")
	sink := &otlpSink{spans: map[string]string{}, traces: map[string]bool{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	cfg, err := config.Parse([]byte(fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n  service_name = \"weir-e2e\"\n"+
		"  headers = { Authorization = \"env:WEIR_TEST_OTLP_AUTH\" }\n}\n", srv.URL)), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	o := options(t)
	o.Config = cfg
	ctx := context.Background()
	d, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	if d.Traces == nil {
		t.Fatal("a telemetry block with an endpoint built no exporter")
	}
	src := `flow(name = "nap", nodes = [task("t", tool = "testkit.sleep", args = {"ms": 1})])`
	if res, err := d.Engine.Register(ctx, []engine.SourceFile{{Path: "nap.star", Src: src}}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %v %v", res, err)
	}
	st, err := d.Engine.Submit(ctx, engine.StartRequest{Owner: "alice", Flow: "nap", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	root := telemetry.SpanID(telemetry.SpanKey{Run: st.RunID}).String()
	task := telemetry.SpanID(telemetry.SpanKey{Run: st.RunID, Node: "t", Visit: 1, Attempt: 1}).String()
	// The export service passes every two seconds of the wall clock.
	testutil.Eventually(t, time.Minute, func() error {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if sink.spans[root] == "" || sink.spans[task] == "" {
			return fmt.Errorf("the collector has spans %v, want %s (root) and %s (t)", sink.spans, root, task)
		}
		return nil
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if !sink.traces[telemetry.TraceID(st.RunID).String()] || len(sink.traces) != 1 {
		t.Errorf("traces %v, want only %s", sink.traces, telemetry.TraceID(st.RunID))
	}
	if sink.spans[root] != "run nap" || sink.spans[task] != "t" {
		t.Errorf("span names %q and %q, want \"run nap\" and \"t\"", sink.spans[root], sink.spans[task])
	}
	for _, a := range sink.auth {
		if a != "Bearer sink-0123456789" {
			t.Errorf("an export came with Authorization %q", a)
		}
	}
	if len(sink.service) == 0 || sink.service[0] != "weir-e2e" {
		t.Errorf("service.name %v, want weir-e2e", sink.service)
	}
}
