package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// clientOf serves s to an in-process go-sdk client made with o, on the
// latest protocol version.
func clientOf(t *testing.T, s *Server, o *mcp.ClientOptions) *mcp.ClientSession {
	return clientAt(t, s, o, "")
}

// clientAt is clientOf on protocol version v ("" the latest).
func clientAt(t *testing.T, s *Server, o *mcp.ClientOptions, v string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, o).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); <-served })
	if v != "" && cs.InitializeResult().ProtocolVersion != v {
		t.Fatalf("protocol %s, want %s", cs.InitializeResult().ProtocolVersion, v)
	}
	return cs
}

func structuredOf(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

func textOf(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// A call whose run outlasts the follow bound answers with the run's id
// and phase and how to follow it; progress goes on meanwhile, re-sent
// while nothing moves (a client resetting its timeout on progress keeps
// waiting); wait_run then follows the run to its output.
func TestCallAnswersBeforeTheBound(t *testing.T) {
	t.Parallel()
	d := &daemonStub{working: true}
	d.setFlows(objectFlow("slow", `{}`))
	var mu sync.Mutex
	var progress []string
	cs := clientOf(t, New(d, Options{Follow: 300 * time.Millisecond, Poll: 5 * time.Millisecond, Heartbeat: time.Millisecond}), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
	})
	ctx := context.Background()
	p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
	p.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	m := structuredOf(t, res)
	follow, _ := m["follow"].(map[string]any)
	if res.IsError || m["run_id"] != "run_1" || m["phase"] != string(apitypes.PhaseRunning) || m["working"] != true ||
		follow["tool"] != WaitRunTool || follow["resource"] != RunURIPrefix+"run_1" {
		t.Fatalf("the early answer: %+v", m)
	}
	if text := textOf(res); !strings.Contains(text, "still working") || !strings.Contains(text, WaitRunTool) {
		t.Errorf("the early answer's text: %q", text)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		same := 0
		for _, msg := range progress {
			if strings.Contains(msg, "at b") {
				same++
			}
		}
		if len(progress) == 0 || progress[0] != "run run_1 accepted" || same < 2 {
			return fmt.Errorf("progress %q: want the id first, then the unchanged state re-sent", progress)
		}
		return nil
	})

	d.complete("run_1", `{"done":1}`)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: WaitRunTool, Arguments: map[string]any{"run_id": "run_1"}})
	if m := structuredOf(t, res); err != nil || res.IsError || m["phase"] != string(apitypes.PhaseCompleted) || fmt.Sprint(m["output"]) != "map[done:1]" {
		t.Fatalf("wait_run: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: WaitRunTool, Arguments: map[string]any{}})
	if em, _ := structuredOf(t, res)["error"].(map[string]any); err != nil || !res.IsError || em["code"] != apitypes.CodeBadInput {
		t.Fatalf("wait_run without a run id: %+v %v", res, err)
	}
}

// A client that declares elicitation is asked for the decision of the
// run's human wait, by an input request on protocol 2026-07-28 (the
// client calls again with the answer) and by a request mid-call before;
// what it answers is applied to that wait, and the call follows the run
// on. A dismissed form decides nothing.
func TestElicitationDecidesAWait(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			testElicitation(t, v)
		})
	}
}

func testElicitation(t *testing.T, version string) {
	tests := []struct {
		name   string
		answer *mcp.ElicitResult
		// want is the decision recorded ("" none) and the phase the call
		// answers.
		want  string
		phase apitypes.Phase
	}{
		{"approve", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, "approve run_1 ok@1", apitypes.PhaseCompleted},
		{"reject", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "reject", "reason": "not now"}}, "reject run_1 ok@1 not now", apitypes.PhaseFailed},
		{"decline", &mcp.ElicitResult{Action: "decline"}, "reject run_1 ok@1 " + reasonDeclined, apitypes.PhaseFailed},
		{"cancel", &mcp.ElicitResult{Action: "cancel"}, "", apitypes.PhaseWaiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &daemonStub{waitAt: "ok"}
			d.setFlows(objectFlow("gate", `{}`))
			var asked []string
			var mu sync.Mutex
			logs := &testutil.Buffer{}
			cs := clientAt(t, New(d, Options{Poll: time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))}), &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return tt.answer, nil
				},
			}, version)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "gate", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			m := structuredOf(t, res)
			if m["run_id"] != "run_1" || m["phase"] != string(tt.phase) {
				t.Fatalf("answer %+v, want phase %s\n%s", m, tt.phase, logs)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || !strings.Contains(asked[0], "run_1") || !strings.Contains(asked[0], "ship it?") {
				t.Errorf("asked %q, want once, with the run and what the wait shows", asked)
			}
			got := d.decided()
			if tt.want == "" && len(got) != 0 || tt.want != "" && !slices.Equal(got, []string{tt.want}) {
				t.Errorf("decisions %q, want %q", got, tt.want)
			}
		})
	}
}

// Without elicitation, a waiting call answers the wait's id and the
// tools that decide it; approve_wait and reject_wait decide it (found by
// id or node among the run's waits) and follow the run to its end; a
// wait that is not open is refused E_NOT_WAITING.
func TestDecisionTools(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"approve", "reject", "respond"} {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			d := &daemonStub{waitAt: "ok"}
			d.setFlows(objectFlow("gate", `{}`))
			cs := clientOf(t, New(d, Options{Poll: time.Millisecond}), nil)
			ctx := context.Background()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gate", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			m := structuredOf(t, res)
			waits, _ := m["waits"].([]any)
			if m["phase"] != string(apitypes.PhaseWaiting) || len(waits) != 1 || waits[0].(map[string]any)["wait"] != "ok@1" ||
				!strings.Contains(textOf(res), ApproveTool) || !strings.Contains(textOf(res), `"wait": "ok@1"`) {
				t.Fatalf("waiting answer: %+v %q", m, textOf(res))
			}
			tool, args, want, phase := ApproveTool, map[string]any{"run_id": "run_1", "wait": "ok@1", "payload": map[string]any{"x": 1}},
				"approve run_1 ok@1", apitypes.PhaseCompleted
			switch verb {
			case "reject":
				tool, args, want, phase = RejectTool, map[string]any{"run_id": "run_1", "wait": "ok", "reason": "no"}, "reject run_1 ok@1 no", apitypes.PhaseFailed
			case "respond":
				// A result answers an agent's call in the tool's place.
				args, want = map[string]any{"run_id": "run_1", "wait": "ok@1", "result": map[string]any{"sent": false}}, `respond run_1 ok@1 {"sent":false}`
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil || structuredOf(t, res)["phase"] != string(phase) {
				t.Fatalf("%s: %+v %v", tool, res, err)
			}
			if got := d.decided(); !slices.Equal(got, []string{want}) {
				t.Errorf("decisions %q, want %q", got, want)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if em, _ := structuredOf(t, res)["error"].(map[string]any); err != nil || !res.IsError || em["code"] != apitypes.CodeNotWaiting {
				t.Fatalf("%s again: %+v %v", tool, res, err)
			}
		})
	}
}

// tokenHTTP serves h over HTTP and returns a go-sdk session on it with
// token, made with o.
func tokenHTTP(t *testing.T, h *HTTPHandler, token string, o *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, o).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Over HTTP too, a flow registered while a session is open reaches it
// as notifications/tools/list_changed, with no tools/list of its own.
func TestHTTPSendsToolListChanged(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	d.setFlows(objectFlow("echo", `{}`))
	changed := make(chan struct{}, 1)
	cs := tokenHTTP(t, Handler(func(string) Daemon { return d }, Options{Watch: 10 * time.Millisecond}), "alice-token", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	d.setFlows(objectFlow("echo", `{}`), objectFlow("later", `{}`))
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no tools/list_changed over HTTP after a flow was registered")
	}
	if got := toolNames(t, cs); !slices.Equal(got, withBuiltins("echo", "later")) {
		t.Fatalf("tools after the change: %v", got)
	}
}

// The stateless transport lists and calls as the stateful one does, and
// checks the token with the daemon at every request: a token revoked
// meanwhile is refused at the next request, not a minute later.
func TestHTTPStateless(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	d.setFlows(objectFlow("echo", `{}`))
	cs := tokenHTTP(t, Handler(func(string) Daemon { return d }, Options{Stateless: true}), "alice-token", nil)
	if cs.ID() != "" {
		t.Errorf("a stateless session has id %q", cs.ID())
	}
	if got := toolNames(t, cs); !slices.Equal(got, withBuiltins("echo")) {
		t.Fatalf("tools %v", got)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"a": 1}})
	if err != nil || res.IsError || structuredOf(t, res)["phase"] != string(apitypes.PhaseCompleted) {
		t.Fatalf("call: %+v %v", res, err)
	}
	d.mu.Lock()
	before := d.flowLists
	d.revoked = true
	d.mu.Unlock()
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Fatal("a revoked token was served")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.flowLists <= before {
		t.Errorf("the token was not checked again (%d daemon checks, %d before)", d.flowLists, before)
	}
}

// A call parked on an agent's proposed call answers, with the wait, the
// digest of the proposal it shows, which a decision may name.
func TestWaitingShowsAnApprovalsDigest(t *testing.T) {
	t.Parallel()
	d := &daemonStub{waitAt: "a", waitKind: apitypes.WaitApproval}
	d.setFlows(objectFlow("agentic", `{}`))
	cs := clientOf(t, New(d, Options{Poll: time.Millisecond}), nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agentic", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	waits, _ := structuredOf(t, res)["waits"].([]any)
	if len(waits) != 1 {
		t.Fatalf("waiting answer %+v", structuredOf(t, res))
	}
	if w := waits[0].(map[string]any); w["wait"] != "a@1.1.0" || w["kind"] != apitypes.WaitApproval || w["digest"] != "d-1" || w["tool"] != ApproveTool {
		t.Errorf("the wait answered %+v, want the approval with its digest", w)
	}
}
