package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/otlptest"
	"github.com/weirhq/weir/runtime/telemetry"
)

// TestTraceAcrossKill kills a tracing daemon at a durable boundary of a
// run, restarts it and reads the run's trace as the collector got it:
// one trace, the run's; exactly one span per visit the journal recorded
// the end of; and one span interrupted by restart, of the node the run
// was at when killed (the send whose start or answer was cut, or the
// node after the send whose result was written).
func TestTraceAcrossKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real daemons")
	}
	for _, tt := range []struct {
		failpoint string
		cut       string // the node whose span is interrupted
	}{
		{"after-started", "send"},
		{"after-tool@2", "send"},
		{"after-result@2", "after"},
	} {
		t.Run(tt.failpoint, func(t *testing.T) {
			t.Parallel()
			sink := otlptest.New(t)
			d := newDaemon(t)
			d.config = fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n}\n", sink.URL)
			d.start("")
			d.register(crashFlow)
			d.stop()

			d.start(tt.failpoint)
			res, err := d.startRun("crash", `{"x": 42}`, "req-trace")
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			d.waitKilled()
			d.start("")
			if v := d.waitTerminal(res.RunID); !v.Phase.Terminal() {
				t.Fatalf("run %s", v.Phase)
			}
			root := telemetry.SpanID(telemetry.SpanKey{Run: res.RunID}).String()
			testutil.Eventually(t, time.Minute, func() error {
				for _, sp := range sink.Spans() {
					if sp.SpanID == root {
						return nil
					}
				}
				return fmt.Errorf("the collector has no root span of %s yet\n%s", res.RunID, d.log())
			})
			ends := map[string]int{} // journaled visit ends, by node
			timeline := d.events(res.RunID)
			for _, e := range timeline {
				if e.Type == "node_completed" || e.Type == "node_failed" {
					ends[e.Node]++
				}
			}
			d.stop() // what was exported is all there is: one Export per run
			visits, interrupted := map[string]int{}, []string{}
			seen := map[string]bool{}
			for _, sp := range sink.Spans() {
				if sp.TraceID != telemetry.TraceID(res.RunID).String() {
					t.Errorf("span %s is in trace %s, not the run's", sp.Name, sp.TraceID)
				}
				if seen[sp.SpanID] {
					t.Errorf("span %s (%s) was exported twice", sp.SpanID, sp.Name)
				}
				seen[sp.SpanID] = true
				node, isVisit := sp.Attrs["weir.node"].(string)
				switch {
				case !isVisit || sp.ParentID != root:
				case sp.Attrs["weir.interrupted"] == true:
					interrupted = append(interrupted, node)
					if !sp.Error || sp.Description != telemetry.Interrupted {
						t.Errorf("interrupted span of %s: error %t %q", node, sp.Error, sp.Description)
					}
				default:
					visits[node]++
				}
			}
			if len(interrupted) != 1 || interrupted[0] != tt.cut {
				t.Errorf("interrupted spans of %v, want one of %s", interrupted, tt.cut)
			}
			if t.Failed() {
				for _, e := range timeline {
					t.Logf("event %s %s attempt %d %v", e.Type, e.Node, e.Attempt, e.Detail)
				}
				for _, sp := range sink.Spans() {
					t.Logf("span %s %v", sp.Name, sp.Attrs)
				}
			}
			if fmt.Sprint(visits) != fmt.Sprint(ends) {
				t.Errorf("visit spans by node %v, want one per journaled end %v", visits, ends)
			}
		})
	}
}

// TestTraceJoinsTheCallersTrace: `weir run start --traceparent
// --tracestate` makes the caller's trace the run's: the collector gets the
// run's root span in the caller's trace, its parent the caller's span,
// with the caller's tracestate; the plugin's call carries the trace on,
// the node visit's span its parent. A malformed traceparent is ignored
// and the run has a trace of its own, derived from its id. weir run get
// names the trace either way.
func TestTraceJoinsTheCallersTrace(t *testing.T) {
	e2e(t, "starts a real daemon exporting traces")
	sink := otlptest.New(t)
	d := newDaemon(t)
	d.config = fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n}\n", sink.URL)
	d.start("")
	d.register(`flow(name = "hello", nodes = [task("e", tool = "testkit.env", args = lambda ctx: {"vars": []})])`)
	const callerTrace, callerSpan, state = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "congo=t61rcWkgMzE"
	for _, tt := range []struct{ name, traceparent, trace, parent, state string }{
		{"the caller's", "00-" + callerTrace + "-" + callerSpan + "-01", callerTrace, callerSpan, state},
		{"malformed", "00-" + callerTrace + "-" + callerSpan, "", "", ""},
	} {
		code, out, errOut := d.cli("run", "start", "hello", "--traceparent", tt.traceparent, "--tracestate", state)
		if code != 0 {
			t.Fatalf("%s: run start exited %d: %s", tt.name, code, errOut)
		}
		id := strings.TrimSpace(out)
		d.waitTerminal(id)
		if tt.trace == "" {
			tt.trace = telemetry.TraceID(id).String()
		}
		root := telemetry.SpanID(telemetry.SpanKey{Run: id}).String()
		testutil.Eventually(t, time.Minute, func() error {
			for _, sp := range sink.Spans() {
				if sp.SpanID == root {
					if sp.TraceID != tt.trace || sp.ParentID != tt.parent || sp.TraceState != tt.state {
						return fmt.Errorf("%s: root span in trace %s with parent %q, state %q, want %s, %q and %q", tt.name, sp.TraceID, sp.ParentID, sp.TraceState, tt.trace, tt.parent, tt.state)
					}
					return nil
				}
			}
			return fmt.Errorf("%s: the collector has no root span of %s yet", tt.name, id)
		})
		// The plugin was given the trace, sampled, the visit its parent.
		visit := telemetry.SpanID(telemetry.SpanKey{Run: id, Node: "e", Visit: 1, Attempt: 1}).String()
		var env struct {
			Output struct{ Traceparent, Tracestate string }
		}
		if code, out, errOut := d.cli("run", "get", id, "--json"); code != 0 || json.Unmarshal([]byte(out), &env) != nil {
			t.Fatalf("%s: run get --json (%d): %s %s", tt.name, code, out, errOut)
		}
		if want := "00-" + tt.trace + "-" + visit + "-01"; env.Output.Traceparent != want || env.Output.Tracestate != tt.state {
			t.Errorf("%s: the plugin saw %q %q, want %q %q", tt.name, env.Output.Traceparent, env.Output.Tracestate, want, tt.state)
		}
		// weir run get names the trace to look the run up in.
		if code, out, _ := d.cli("run", "get", id); code != 0 || !strings.Contains(out, "trace:      "+tt.trace+"\n") {
			t.Errorf("%s: run get (%d) does not name trace %s:\n%s", tt.name, code, tt.trace, out)
		}
	}
	d.stop()
}
