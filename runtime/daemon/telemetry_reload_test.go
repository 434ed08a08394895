package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/otlptest"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/telemetry"
)

// A reload that changes the telemetry block swaps the exporter: runs that
// finish after it go to the new collector under the new service name, none
// to the old one, within the export's next passes (the reload keeps the
// daemon's host id, so its export service lease stays its own), and with
// it whether model turns' messages are captured; turning
// tracing off is refused as a restart change and the exporter in force
// stays.
func TestTelemetryBlockReloads(t *testing.T) {
	first, second := otlptest.New(t), otlptest.New(t)
	file := filepath.Join(t.TempDir(), "weir.hcl")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	block := func(sink *otlptest.Sink, service string) string {
		return fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n  service_name = %q\n}\n", sink.URL, service)
	}
	write(block(first, "weir-before"))
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	o := options(t)
	o.Config = cfg
	o.SocketPath = filepath.Join(t.TempDir(), "weir.sock")
	o.Load = func() (*config.Config, []string, []string, error) {
		c, err := config.Load(file)
		return c, nil, nil, err
	}
	ctx := context.Background()
	d, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	// Served, as weir serve does (a reload swaps the API's tokens too);
	// the end of sctx closes the daemon.
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- d.Serve(sctx) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	// Reloads go through the API, as weir admin reload sends them.
	c := client.NewUnix(o.SocketPath)
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := c.Health(ctx)
		return err
	})
	src := `flow(name = "nap", nodes = [task("t", tool = "testkit.sleep", args = {"ms": 1})])`
	if res, err := d.Engine.Register(ctx, []engine.SourceFile{{Path: "nap.star", Src: src}}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %v %v", res, err)
	}
	before := exportedRun(t, d, first, "weir-before")

	if d.Traces.CapturesContent() {
		t.Fatal("content captured without capture_content")
	}
	write(strings.Replace(block(second, "weir-after"), "}\n", "  capture_content = true\n}\n", 1))
	if res, err := c.AdminReload(ctx); err != nil || !res.Changed {
		t.Fatalf("reload to the second collector: %+v %v", res, err)
	}
	// What the engine and its export service ask is the exporter in
	// force's: the reload turned the capture of messages on.
	if !d.Traces.CapturesContent() {
		t.Fatal("a reload to capture_content = true left content off")
	}
	exportedRun(t, d, second, "weir-after")
	for _, sp := range first.Spans() {
		if sp.TraceID != telemetry.TraceID(before).String() {
			t.Errorf("the first collector got span %s of another run after the reload", sp.Name)
		}
	}

	write("")
	if _, err := c.AdminReload(ctx); client.ErrorCode(err) != "E_CONFIG" || !strings.Contains(err.Error(), "telemetry on -> off") {
		t.Fatalf("a reload turning tracing off: %v, want E_CONFIG naming it", err)
	}
	exportedRun(t, d, second, "weir-after")
}

// exportedRun runs the nap flow once and waits until sink has its root
// span, of service; it returns the run's id.
func exportedRun(t *testing.T, d *Daemon, sink *otlptest.Sink, service string) string {
	t.Helper()
	st, err := d.Engine.Submit(context.Background(), engine.StartRequest{Owner: "alice", Flow: "nap", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	root := telemetry.SpanID(telemetry.SpanKey{Run: st.RunID}).String()
	testutil.Eventually(t, time.Minute, func() error {
		for _, sp := range sink.Spans() {
			if sp.SpanID == root {
				if sp.Service != service {
					return fmt.Errorf("root span of service %q, want %q", sp.Service, service)
				}
				return nil
			}
		}
		return fmt.Errorf("the collector has no root span of %s yet", st.RunID)
	})
	return st.RunID
}
