package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/telemetry"
)

// A start's W3C traceparent header is journaled in the run's accepted
// event (normalised), so that the run's trace joins the caller's; a
// malformed one, or none, journals nothing and the run has a trace of
// its own (the W3C spec: a malformed traceparent is ignored). The run's
// view carries the trace id either way.
func TestStartJournalsTheCallersTraceparent(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tt := range []struct {
		name, header, want string
	}{
		{"well formed", tp, tp},
		{"upper case is malformed", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", ""},
		{"a zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"not one at all", "hello", ""},
		{"none", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.header != "" {
				hdr = []string{"traceparent", tt.header}
			}
			a := b.send(t, alice, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":1}`)}, hdr...)
			if a.status != http.StatusCreated {
				t.Fatalf("start: %d %s", a.status, a.body)
			}
			var res apitypes.StartResult
			if err := json.Unmarshal(a.body, &res); err != nil {
				t.Fatal(err)
			}
			evs, err := b.eng.Events(context.Background(), "alice", res.RunID, 0, 0)
			if err != nil || len(evs) == 0 || evs[0].Type != "accepted" {
				t.Fatalf("events %+v %v", evs, err)
			}
			got, _ := evs[0].Detail["traceparent"].(string)
			if got != tt.want {
				t.Errorf("accepted event's traceparent %q, want %q", got, tt.want)
			}
			// The run keeps its trace id, shown on the wire: the caller's,
			// else its own (the one its spans are exported in).
			wantTrace := telemetry.TraceID(res.RunID).String()
			if tt.want != "" {
				wantTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
			}
			var v apitypes.Run
			if g := b.send(t, alice, "GET", "/v1/runs/"+res.RunID, nil); g.status != http.StatusOK || json.Unmarshal(g.body, &v) != nil || v.TraceID != wantTrace {
				t.Errorf("the run's trace id %q (%d %s), want %s", v.TraceID, g.status, g.body, wantTrace)
			}
		})
	}
}

// A start's tracestate is kept beside its traceparent, bounded to the 512
// characters the W3C spec asks to be passed on (its last members dropped
// first); without a traceparent, or malformed, none is kept.
func TestStartJournalsTheCallersTracestate(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	long := "congo=t61rcWkgMzE"
	for i := range 40 { // 40 members of 14 characters: past 512 and the W3C's 32 members
		long += fmt.Sprintf(",m%02d=%s", i, strings.Repeat("v", 9))
	}
	bounded := "congo=t61rcWkgMzE"
	for i := range 20 { // 297 characters
		bounded += fmt.Sprintf(",m%02d=%s", i, strings.Repeat("v", 9))
	}
	for _, tt := range []struct {
		name, parent, state, want string
	}{
		{"beside a traceparent", tp, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{"without a traceparent", "", "congo=t61rcWkgMzE", ""},
		{"malformed", tp, "not a tracestate", ""},
		{"more members than the W3C allows", tp, long, ""},
		{"past 512 characters", tp, bounded + ",last=" + strings.Repeat("x", 250), bounded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := []string{"tracestate", tt.state}
			if tt.parent != "" {
				hdr = append(hdr, "traceparent", tt.parent)
			}
			a := b.send(t, alice, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":1}`)}, hdr...)
			var res apitypes.StartResult
			if a.status != http.StatusCreated || json.Unmarshal(a.body, &res) != nil {
				t.Fatalf("start: %d %s", a.status, a.body)
			}
			evs, err := b.eng.Events(context.Background(), "alice", res.RunID, 0, 0)
			if err != nil || len(evs) == 0 {
				t.Fatalf("events %+v %v", evs, err)
			}
			got, _ := evs[0].Detail["tracestate"].(string)
			if got != tt.want {
				t.Errorf("accepted event's tracestate %q, want %q", got, tt.want)
			}
			if len(got) > telemetry.MaxTraceState {
				t.Errorf("kept %d characters of tracestate", len(got))
			}
		})
	}
}
