package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/sdk/wire"
)

// TestToolDefaultTimeout: a call without a deadline gets its tool's
// declared default timeout (testkit.bounded, 500ms, revision 2) rather
// than the host's; a caller's deadline still wins.
func TestToolDefaultTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{DefaultTimeout: 10 * time.Minute}, "testkit")
	m := b.h.set.Load().tools["testkit.bounded"]
	if m == nil || m.m.Timeout != 500*time.Millisecond {
		t.Fatalf("testkit.bounded's manifest %+v: want a timeout of 500ms", m)
	}
	if info, _ := b.h.LookupTool("testkit.bounded"); info.Timeout != 500*time.Millisecond {
		t.Fatalf("LookupTool gives timeout %v, want 500ms", info.Timeout)
	}
	var out struct {
		DeadlineMS int64 `json:"deadline_ms"`
	}
	if err := json.Unmarshal(mustCall(t, b.h, "testkit.bounded", `{}`).Output, &out); err != nil {
		t.Fatal(err)
	}
	if out.DeadlineMS > 500 {
		t.Fatalf("a call without a deadline was given %dms, want the tool's 500ms at most", out.DeadlineMS)
	}
	res, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.bounded", Input: json.RawMessage(`{}`), Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || out.DeadlineMS <= 500 {
		t.Fatalf("a call with a deadline a minute away was given %dms (%v)", out.DeadlineMS, err)
	}
	// A call that waits for its end ends at the tool's deadline; the
	// caller's minute only bounds a failing test.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = b.h.Call(ctx, CallRequest{Tool: "testkit.bounded", Input: json.RawMessage(`{"wait":true}`)})
	wantKind(t, err, KindDeadline)
}

// TestRevision1PluginServed: a plugin that speaks only revision 1 is
// installed, listed and called as before.
func TestRevision1PluginServed(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "rev1", "testkit")
	plugins := map[string]int{}
	for _, p := range b.h.Plugins() {
		if p.Manifest == nil {
			t.Fatalf("plugin %s has no manifest: %v", p.Name, p.Err)
		}
		plugins[p.Name] = p.Manifest.ProtocolVersion
	}
	if plugins["rev1"] != 1 || plugins["testkit"] != wire.ProtocolVersion {
		t.Fatalf("protocol versions %v, want rev1 on 1 and testkit on %d", plugins, wire.ProtocolVersion)
	}
	if res := mustCall(t, b.h, "rev1.echo", `{"a":1}`); string(res.Output) != `{"a":1}` {
		t.Fatalf("rev1.echo answered %s", res.Output)
	}
	// Its manifest, cached at install, is read back on the next start.
	h2, err := New(Config{PluginsDir: b.pluginsDir, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if _, ok := h2.LookupTool("rev1.echo"); !ok {
		t.Fatal("a second host does not know rev1.echo from the manifest cache")
	}
	if n := launches(h2, "rev1"); n != 0 {
		t.Fatalf("the cached revision-1 manifest was not used: %d launches", n)
	}
}

func TestManifestDefaultTimeoutBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout *durationpb.Duration
		version uint32
		want    string // "" for accepted
	}{
		{"unset", nil, wire.ProtocolVersion, ""},
		{"a minute", durationpb.New(time.Minute), wire.ProtocolVersion, ""},
		{"the most", durationpb.New(wire.MaxToolTimeout), wire.ProtocolVersion, ""},
		{"zero", durationpb.New(0), wire.ProtocolVersion, "outside"},
		{"negative", durationpb.New(-time.Second), wire.ProtocolVersion, "outside"},
		{"past the most", durationpb.New(wire.MaxToolTimeout + time.Nanosecond), wire.ProtocolVersion, "outside"},
		{"malformed", &durationpb.Duration{Seconds: 1, Nanos: -5}, wire.ProtocolVersion, "outside"},
		{"revision 1", nil, 1, ""},
		{"revision 0", nil, 0, "protocol version 0"},
		{"a revision to come", nil, wire.ProtocolVersion + 1, "protocol version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := manifestFromWire("", "sum", &wire.ManifestResponse{ProtocolVersion: tc.version, Tools: []*wire.ToolSpec{
				{Name: "x.y", Idempotent: true, DefaultTimeout: tc.timeout}}})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				if want := tc.timeout.AsDuration(); tc.timeout != nil && m.Tools[0].Timeout != want {
					t.Fatalf("timeout %v, want %v", m.Tools[0].Timeout, want)
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// A call's trace context reaches a revision-2 plugin (the SDK gives it to
// the tool as Call.TraceParent and TraceState); a call without one
// carries none.
func TestTheCallsTraceReachesThePlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, want := range [][2]string{{tp, "congo=t61rcWkgMzE"}, {tp, ""}, {"", ""}} {
		res, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.env", Input: json.RawMessage(`{}`), IdempotencyKey: t.Name(),
			TraceParent: want[0], TraceState: want[1]})
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Traceparent, Tracestate string }
		if err := json.Unmarshal(res.Output, &env); err != nil {
			t.Fatal(err)
		}
		if got := [2]string{env.Traceparent, env.Tracestate}; got != want {
			t.Errorf("the plugin saw trace context %q, want %q", got, want)
		}
	}
}

// A plugin's log lines about a call carry the call's trace and span, so a
// collector joins them to the run's trace; a call without a trace, none.
func TestPluginLogLinesCarryTheCallsTrace(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct{ message, traceparent string }{{"traced", "00-" + tid + "-" + sid + "-01"}, {"untraced", ""}} {
		if _, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.log", Input: json.RawMessage(`{"message":"` + c.message + `"}`),
			IdempotencyKey: c.message, TraceParent: c.traceparent}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		var traced, untraced string
		for _, line := range strings.Split(b.logs.String(), "\n") {
			switch {
			case strings.Contains(line, "weir.plugin.testkit: traced:"):
				traced = line
			case strings.Contains(line, "weir.plugin.testkit: untraced:"):
				untraced = line
			}
		}
		if traced == "" || untraced == "" {
			return fmt.Errorf("the two log lines are not both in the log yet:\n%s", b.logs.String())
		}
		if !strings.Contains(traced, "trace_id="+tid) || !strings.Contains(traced, "span_id="+sid) {
			t.Errorf("the traced call's log line lacks its trace and span: %s", traced)
		}
		if strings.Contains(untraced, "trace_id=") || strings.Contains(untraced, "span_id=") {
			t.Errorf("the untraced call's log line names a trace: %s", untraced)
		}
		return nil
	})
}

// TestPartialsReachTheirCall: a revision-2 plugin's pieces of output reach
// the call that asked for them, numbered from 1, in order, all of them
// before Call returns and none after; a call that did not ask, and a
// revision-1 plugin, are served as before.
func TestPartialsReachTheirCall(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "rev1", "testkit")
	for range 3 { // the stream serves call after call
		var (
			mu       sync.Mutex
			pieces   []string
			returned bool
			late     int
		)
		res, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.flood", Input: json.RawMessage(`{"bytes":1000,"piece":7}`),
			Partials: func(seq uint64, delta []byte) {
				mu.Lock()
				defer mu.Unlock()
				if returned {
					late++
				}
				if seq != uint64(len(pieces)+1) {
					t.Errorf("piece %d after %d pieces", seq, len(pieces))
				}
				pieces = append(pieces, string(delta))
			}})
		mu.Lock()
		returned = true
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		var out string
		if err := json.Unmarshal(res.Output, &out); err != nil {
			t.Fatal(err)
		}
		if len(pieces) != 143 || strings.Join(pieces, "") != out {
			t.Fatalf("%d pieces making %d bytes before Call returned, want 143 making the output's %d", len(pieces), len(strings.Join(pieces, "")), len(out))
		}
		mu.Lock()
		if late != 0 {
			t.Fatalf("%d pieces after Call returned", late)
		}
		mu.Unlock()
	}
	// A call that did not ask gets the whole output only.
	mustCall(t, b.h, "testkit.flood", `{"bytes":10,"piece":1}`)
	res, err := b.h.Call(context.Background(), CallRequest{Tool: "rev1.echo", Input: json.RawMessage(`{"a":1}`),
		Partials: func(uint64, []byte) { t.Error("a revision-1 plugin sent a piece") }})
	if err != nil || string(res.Output) != `{"a":1}` {
		t.Fatalf("rev1.echo with Partials: %v %v", res, err)
	}
}
