package daemon

import (
	"context"
	"encoding/json"
	"fmt"
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
	cfg, err := config.Parse([]byte(fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n  service_name = \"weir-e2e\"\n"+
		"  headers = { Authorization = \"env:WEIR_TEST_OTLP_AUTH\" }\n}\n", sink.URL)), "t.hcl")
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
		if a := h.Get("Authorization"); a != "Bearer sink-0123456789" {
			t.Errorf("an export came with Authorization %q", a)
		}
	}
}
