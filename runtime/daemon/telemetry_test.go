package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/otlptest"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/telemetry"
)

// A daemon with a telemetry block exports a finished run's trace to the
// collector over OTLP/HTTP: the run's root and its task's span, with the
// ids derived from the journal, the header read from the environment.
func TestTelemetryExportsOverOTLP(t *testing.T) {
	t.Setenv("WEIR_TEST_OTLP_AUTH", "Bearer sink-0123456789")
	sink := otlptest.New(t)
	exportsTo(t, sink, fmt.Sprintf("  otlp_endpoint = %q\n", sink.URL))
}

// The same over OTLP/gRPC, to a host:port without TLS.
func TestTelemetryExportsOverOTLPgRPC(t *testing.T) {
	t.Setenv("WEIR_TEST_OTLP_AUTH", "Bearer sink-0123456789")
	sink := otlptest.NewGRPC(t)
	exportsTo(t, sink, fmt.Sprintf("  otlp_endpoint = %q\n  protocol = \"grpc\"\n  insecure = true\n", sink.Addr))
}

// exportsTo runs a one-task flow on a daemon whose telemetry block is
// endpoint's lines plus a service name and an Authorization header read
// from WEIR_TEST_OTLP_AUTH, and checks what sink received.
func exportsTo(t *testing.T, sink *otlptest.Sink, endpoint string) {
	t.Helper()
	cfg, err := config.Parse([]byte("telemetry {\n"+endpoint+"  service_name = \"weir-e2e\"\n"+
		"  headers = { Authorization = \"env:WEIR_TEST_OTLP_AUTH\" }\n}\n"), "t.hcl")
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
	var spans map[string]otlptest.Span
	testutil.Eventually(t, time.Minute, func() error {
		spans = map[string]otlptest.Span{}
		for _, sp := range sink.Spans() {
			spans[sp.SpanID] = sp
		}
		if spans[root].Name == "" || spans[task].Name == "" {
			return fmt.Errorf("the collector has spans %v, want %s (root) and %s (t)", spans, root, task)
		}
		return nil
	})
	trace := telemetry.TraceID(st.RunID).String()
	for _, sp := range spans {
		if sp.TraceID != trace || sp.Service != "weir-e2e" {
			t.Errorf("span %s in trace %s of service %q, want %s of weir-e2e", sp.Name, sp.TraceID, sp.Service, trace)
		}
	}
	if spans[root].Name != "run nap" || spans[task].Name != "t" || spans[task].ParentID != root || !spans[task].OK {
		t.Errorf("spans %+v and %+v, want \"run nap\" and its child \"t\", Ok", spans[root], spans[task])
	}
	for _, h := range sink.Headers() {
		if a := h.Get("Authorization"); a != os.Getenv("WEIR_TEST_OTLP_AUTH") {
			t.Errorf("an export came with Authorization %q", a)
		}
	}
}
