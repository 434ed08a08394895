package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// The real-server tests of this package are in runtime/api
// (client_test.go), beside the server they exercise: they share its test
// bundle of a real engine, store and plugin. Here: what needs no server.

// An answer that is not the API's JSON still becomes an *Error, with the
// status and what came.
func TestErrorOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		status        int
		body          string
		code, message string
		class         string
	}{
		{"api error", 404, `{"code":"E_NOT_FOUND","message":"no run r","class":"protocol"}`, "E_NOT_FOUND", "no run r", "protocol"},
		{"proxy page", 502, "<html>bad gateway</html>\n", CodeHTTP, "502 Bad Gateway: <html>bad gateway</html>", ""},
		{"json without a code", 422, `{"flows":null}`, CodeHTTP, `422 Unprocessable Entity: {"flows":null}`, ""},
		{"empty", 500, "", CodeHTTP, "500 Internal Server Error: ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := errorOf(tt.status, []byte(tt.body))
			if e.Code != tt.code || e.Message != tt.message || e.Class != tt.class || e.HTTPStatus != tt.status {
				t.Errorf("got %+v", e)
			}
			if e.Error() != tt.code+": "+tt.message {
				t.Errorf("Error() = %q", e.Error())
			}
		})
	}
}

// A refused registration is a *DiagnosticsError whether the daemon
// answers the refusal's error shape (E_FLOW_INVALID) or, from before it,
// {flows, diagnostics} without a code. A daemon of another version cannot
// run here: a server answers as each did.
func TestFlowRegisterReadsDiagnostics(t *testing.T) {
	t.Parallel()
	diag := `[{"file":"a.star","line":1,"col":2,"code":"E_UNKNOWN_NODE","message":"no node nowhere"}]`
	tests := []struct {
		name, body string
		diagnosed  bool   // a *DiagnosticsError
		code       string // else, the *Error's code
	}{
		{"refusal", `{"code":"E_FLOW_INVALID","message":"the files do not pass","class":"protocol","diagnostics":` + diag + `}`, true, ""},
		{"before the refusal's shape", `{"flows":null,"diagnostics":` + diag + `}`, true, ""},
		{"another 422", `{"code":"E_CONFIG","message":"no","class":"protocol"}`, false, apitypes.CodeConfig},
		{"a refusal without diagnostics", `{"code":"E_FLOW_INVALID","message":"no","class":"protocol"}`, false, apitypes.CodeFlowInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c, err := New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, call := range []func(context.Context, ...apitypes.SourceFile) (*apitypes.RegisterResult, error){c.FlowRegister, c.FlowCheck} {
				_, err := call(context.Background(), apitypes.SourceFile{Path: "a.star", Src: "x"})
				var de *DiagnosticsError
				if got := errors.As(err, &de); got != tt.diagnosed {
					t.Fatalf("a *DiagnosticsError: %v, want %v: %v", got, tt.diagnosed, err)
				}
				if tt.diagnosed && (len(de.Diagnostics) != 1 || !strings.Contains(err.Error(), "a.star:1:2: E_UNKNOWN_NODE")) {
					t.Errorf("diagnostics %+v", de.Diagnostics)
				}
				if !tt.diagnosed && ErrorCode(err) != tt.code {
					t.Errorf("code %q, want %q: %v", ErrorCode(err), tt.code, err)
				}
			}
		})
	}
}

// A ctx carrying an OpenTelemetry span context sends it as the W3C
// traceparent of the request (a run it starts joins the caller's trace);
// a ctx without one sends none.
func TestTheCallersTraceGoesWithTheRequest(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"run_id":"run_1","existing":false}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	for _, tt := range []struct {
		ctx  context.Context
		want string
	}{
		{ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{context.Background(), ""},
	} {
		if _, err := c.RunStart(tt.ctx, apitypes.StartRequest{Flow: "f"}); err != nil {
			t.Fatal(err)
		}
		if h := <-got; h != tt.want {
			t.Errorf("traceparent %q, want %q", h, tt.want)
		}
	}
}
