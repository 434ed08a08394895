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

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// daemonStub is the daemon seen through the Daemon interface: registered
// flows (whoever registered them: every user lists every flow) and runs
// that complete with their input as output at once.
type daemonStub struct {
	mu    sync.Mutex
	flows []apitypes.Flow
	runs  map[string]*apitypes.Run
	// panicOnStart makes RunStart panic, as a library on the way might.
	panicOnStart bool
	// working makes a started run stay running (until complete).
	working bool
	// waitAt makes a started run park on a human wait at this node, or
	// one of waitKind (opsWait).
	waitAt   string
	waitKind string
	waits    map[string][]apitypes.HumanWait // run id → its open waits
	// decisions records RunApprove and RunReject: "approve RUN WAIT" or
	// "reject RUN WAIT REASON".
	decisions []string
	// revoked makes every call refuse the token (401).
	revoked bool
	// flowLists counts FlowList calls (token checks among them).
	flowLists int
	// ops is what the recovery operations were asked (ops_test.go).
	ops opsStub
}

// complete ends run id with output out.
func (d *daemonStub) complete(id, out string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := *d.runs[id]
	r.Phase, r.Output = apitypes.PhaseCompleted, json.RawMessage(out)
	d.runs[id] = &r
}

func (d *daemonStub) decided() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.decisions)
}

func (d *daemonStub) setFlows(fl ...apitypes.Flow) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flows = fl
}

func (d *daemonStub) FlowList(context.Context) ([]apitypes.Flow, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flowLists++
	if d.revoked {
		return nil, &client.Error{Code: apitypes.CodeIdentity, Message: "unknown token", HTTPStatus: http.StatusUnauthorized}
	}
	return slices.Clone(d.flows), nil
}

func (d *daemonStub) RunStart(_ context.Context, req apitypes.StartRequest) (*apitypes.StartResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.panicOnStart {
		panic("a library choked on " + strings.Repeat("x", 1<<20))
	}
	if d.runs == nil {
		d.runs = map[string]*apitypes.Run{}
	}
	id := fmt.Sprintf("run_%d", len(d.runs)+1)
	r := &apitypes.Run{ID: id, Flow: req.Flow, Phase: apitypes.PhaseCompleted, Input: req.Input, Output: req.Input}
	switch {
	case d.waitAt != "":
		r.Phase, r.Output = apitypes.PhaseWaiting, nil
		if d.waits == nil {
			d.waits = map[string][]apitypes.HumanWait{}
		}
		w := apitypes.HumanWait{ID: d.waitAt + "@1", Kind: apitypes.WaitHuman, RunID: id, Flow: req.Flow, Node: d.waitAt,
			Until: time.Now().Add(time.Hour), Shown: json.RawMessage(`{"request":"ship it?"}`)}
		if d.waitKind != "" {
			w = opsWait(w, d.waitKind)
		}
		d.waits[id] = []apitypes.HumanWait{w}
	case d.working:
		r.Phase, r.Output = apitypes.PhaseRunning, nil
		r.Progress = &apitypes.Progress{Phase: apitypes.PhaseRunning, Done: 1, Node: "b"}
	}
	d.runs[id] = r
	return &apitypes.StartResult{RunID: id}, nil
}

func (d *daemonStub) RunGet(_ context.Context, id string) (*apitypes.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.runs[id]; r != nil {
		return r, nil
	}
	return nil, &client.Error{Code: apitypes.CodeNotFound, Message: "no run " + id}
}

func (d *daemonStub) RunEvents(context.Context, string, client.EventListParams) ([]apitypes.Event, error) {
	return nil, nil
}

func (d *daemonStub) RunWaits(_ context.Context, id string) ([]apitypes.HumanWait, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.waits[id]), nil
}

func (d *daemonStub) RunCancel(context.Context, string) (apitypes.CancelAnswer, error) {
	return apitypes.CancelAlreadyTerminal, nil
}

// RunApprove and RunReject close the wait; an approved run completes
// with {"approved": true}, a rejected one fails.
func (d *daemonStub) RunApprove(_ context.Context, id, wait string, _ json.RawMessage) (*apitypes.DecideResponse, error) {
	return d.decide(id, wait, "approve "+id+" "+wait)
}

func (d *daemonStub) RunRespond(_ context.Context, id, wait string, result json.RawMessage, _ string) (*apitypes.DecideResponse, error) {
	return d.decide(id, wait, "respond "+id+" "+wait+" "+string(result))
}

func (d *daemonStub) RunReject(_ context.Context, id, wait, reason string) (*apitypes.DecideResponse, error) {
	return d.decide(id, wait, "reject "+id+" "+wait+" "+reason)
}

func (d *daemonStub) decide(id, wait, what string) (*apitypes.DecideResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.waits[id]
	if len(ws) == 0 || ws[0].ID != wait {
		return nil, &client.Error{Code: apitypes.CodeNotWaiting, Message: "run " + id + " is not waiting at " + wait}
	}
	delete(d.waits, id)
	d.decisions = append(d.decisions, what)
	r := *d.runs[id]
	if strings.HasPrefix(what, "approve") || strings.HasPrefix(what, "respond") {
		r.Phase, r.Output = apitypes.PhaseCompleted, json.RawMessage(`{"approved":true}`)
	} else {
		r.Phase, r.Error = apitypes.PhaseFailed, &apitypes.RunError{Code: "E_REJECTED", Message: "rejected"}
	}
	d.runs[id] = &r
	return &apitypes.DecideResponse{RunID: id, Wait: wait}, nil
}

// connect serves s to an in-process go-sdk client.
func connect(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, st) }()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-served
	})
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// withBuiltins is names and the built-in tools' names, sorted as
// toolNames sorts.
func withBuiltins(names ...string) []string {
	out := slices.Clone(names)
	for n := range builtinTools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func objectFlow(name, props string) apitypes.Flow {
	return apitypes.Flow{Name: name, Hash: "h-" + name, Nodes: 1, Input: json.RawMessage(`{"type":"object","properties":` + props + `}`)}
}

// badHeaderSchemas are input schemas whose x-mcp-header annotations the
// go-sdk's AddTool refuses by panicking (mcp/streamable_headers.go,
// validateParamHeadersIn): on a type that is not a primitive, not a
// string, empty, not an HTTP token, twice (case-insensitively), and the
// same nested in an object property.
var badHeaderSchemas = map[string]string{
	"on_object":    `{"a":{"type":"object","x-mcp-header":"X-A"}}`,
	"on_array":     `{"a":{"type":"array","x-mcp-header":"X-A"}}`,
	"untyped":      `{"a":{"x-mcp-header":"X-A"}}`,
	"not_a_string": `{"a":{"type":"string","x-mcp-header":5}}`,
	"empty":        `{"a":{"type":"string","x-mcp-header":""}}`,
	"null":         `{"a":{"type":"string","x-mcp-header":null}}`,
	"not_a_token":  `{"a":{"type":"string","x-mcp-header":"X A\r\nSet-Cookie: x"}}`,
	"twice":        `{"a":{"type":"string","x-mcp-header":"X-A"},"b":{"type":"integer","x-mcp-header":"x-a"}}`,
	"nested":       `{"o":{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"X-A"}}}}`,
}

// One flow's input schema that the SDK panics on leaves that flow out of
// the tool list with a logged reason; the other flows are offered, the
// server answers the next request, and a flow's tool still runs.
func TestBadSchemaLeavesOnlyItsFlowOut(t *testing.T) {
	t.Parallel()
	for name, props := range badHeaderSchemas {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := &daemonStub{}
			d.setFlows(objectFlow("bad", props), objectFlow("greet", `{"name":{"type":"string"}}`))
			logs := &testutil.Buffer{}
			cs := connect(t, New(d, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}))
			want := withBuiltins("greet")
			for range 2 { // the first list at start, the next at tools/list
				if got := toolNames(t, cs); !slices.Equal(got, want) {
					t.Fatalf("tools %v, want %v", got, want)
				}
			}
			if !strings.Contains(logs.String(), "flow not offered as a tool") || !strings.Contains(logs.String(), "flow=bad") ||
				!strings.Contains(logs.String(), "x-mcp-header") {
				t.Errorf("no reason logged for the bad flow:\n%s", logs)
			}
			if n := strings.Count(logs.String(), "flow=bad"); n != 1 {
				t.Errorf("the reason was logged %d times, want once per version", n)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "ann"}})
			if err != nil || res.IsError {
				t.Fatalf("greet after the bad flow: %+v %v", res, err)
			}
		})
	}
}

// The same x-mcp-header that the SDK accepts is offered: the recover
// does not hide flows the SDK has no quarrel with.
func TestGoodHeaderSchemaIsOffered(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	d.setFlows(objectFlow("tenant", `{"t":{"type":"string","x-mcp-header":"X-Tenant"}}`))
	cs := connect(t, New(d, Options{}))
	if got := toolNames(t, cs); !slices.Equal(got, withBuiltins("tenant")) {
		t.Fatalf("tools %v", got)
	}
}

// A flow offered before, whose new version the SDK refuses, leaves the
// list (its old schema is no longer the flow's); fixed again, it is back.
func TestBadNewVersionRemovesTheOldTool(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	good := objectFlow("f", `{"a":{"type":"string"}}`)
	d.setFlows(good)
	cs := connect(t, New(d, Options{}))
	if got := toolNames(t, cs); !slices.Equal(got, withBuiltins("f")) {
		t.Fatalf("tools %v", got)
	}
	bad := objectFlow("f", badHeaderSchemas["on_object"])
	bad.Hash = "h-f-2"
	d.setFlows(bad)
	if got := toolNames(t, cs); !slices.Equal(got, withBuiltins()) {
		t.Fatalf("after a bad version: tools %v", got)
	}
	good.Hash = "h-f-3"
	d.setFlows(good)
	if got := toolNames(t, cs); !slices.Equal(got, withBuiltins("f")) {
		t.Fatalf("after a good version again: tools %v", got)
	}
}

// What one flow makes of tools/list is bounded: a doc of megabytes is a
// summary line, a schema the listing omitted or one over
// MaxToolSchemaBytes leaves the flow out.
func TestToolListIsBounded(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	huge := `{"a":{"type":"string","description":"` + strings.Repeat("x", MaxToolSchemaBytes) + `"}}`
	docs := objectFlow("docs", `{}`)
	docs.Doc = strings.Repeat("y", 7000000)
	omitted := apitypes.Flow{Name: "omitted", Hash: "h", InputOmitted: true}
	d.setFlows(docs, objectFlow("huge", huge), omitted, objectFlow("small", `{}`))
	cs := connect(t, New(d, Options{}))
	var total int
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(tl)
		if !builtinTools[tl.Name] { // what the flows make of the list
			total += len(b)
		}
		names = append(names, tl.Name)
		if tl.Name == "docs" && len(tl.Description) > flows.MaxDocSummaryBytes+100 {
			t.Errorf("docs: a description of %d bytes", len(tl.Description))
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, withBuiltins("docs", "small")) || total > 4096 {
		t.Fatalf("tools %v, %d bytes", names, total)
	}
}

// A panic while answering one request (here in the daemon client, as in
// any library a handler calls) is that request's error: the server
// answers the next one.
func TestPanicInARequestIsItsError(t *testing.T) {
	t.Parallel()
	d := &daemonStub{panicOnStart: true}
	d.setFlows(objectFlow("greet", `{}`))
	cs := connect(t, New(d, Options{}))
	ctx := context.Background()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "panicked") || len(err.Error()) > 2048 {
		t.Fatalf("a panicking call: %.300v (%d bytes)", err, len(fmt.Sprint(err)))
	}
	d.mu.Lock()
	d.panicOnStart = false
	d.mu.Unlock()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("the next call: %+v %v", res, err)
	}
}

// A shared `weir mcp --listen` server: bob's flow with a schema the SDK
// panics on does not end the server, nor alice's session, nor bob's;
// both still list and call the other flows.
func TestSharedHTTPServerSurvivesABadSchema(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	d.setFlows(objectFlow("greet", `{}`))
	h := Handler(func(string) Daemon { return d }, Options{})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	session := func(token string) *mcp.ClientSession {
		cl := mcp.NewClient(&mcp.Implementation{Name: token, Version: "1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{token}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, bob := session("alice-token"), session("bob-token")
	// Bob registers a flow with a bad header annotation.
	d.setFlows(objectFlow("greet", `{}`), objectFlow("bobs", badHeaderSchemas["twice"]))
	for _, cs := range []*mcp.ClientSession{bob, alice, bob} {
		if got := toolNames(t, cs); !slices.Equal(got, withBuiltins("greet")) {
			t.Fatalf("tools %v", got)
		}
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("greet: %+v %v", res, err)
		}
	}
	// A new session after the bad flow is offered the rest at once.
	if got := toolNames(t, session("carol-token")); !slices.Equal(got, withBuiltins("greet")) {
		t.Fatalf("a new session: tools %v", got)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServerSaysWhatItIsAndWhatChanged: serverInfo carries the version;
// a run's resource is private to its reader (never cached for others);
// a flow registered while a client is connected reaches it as
// notifications/tools/list_changed, with no tools/list of its own first.
func TestServerSaysWhatItIsAndWhatChanged(t *testing.T) {
	t.Parallel()
	d := &daemonStub{}
	d.setFlows(apitypes.Flow{Name: "echo", Hash: "h1", Input: json.RawMessage(`{"type":"object"}`)})
	s := New(d, Options{Version: "1.2.3", Watch: 10 * time.Millisecond})
	changed := make(chan struct{}, 1)
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, st) }()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); <-served })

	if v := cs.InitializeResult().ServerInfo.Version; v != "1.2.3" {
		t.Errorf("serverInfo.version %q, want 1.2.3", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: RunURIPrefix + "run_1"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.CacheScope != "private" {
		t.Errorf("a run's resource has cacheScope %q, want private", rr.CacheScope)
	}

	d.setFlows(apitypes.Flow{Name: "echo", Hash: "h1", Input: json.RawMessage(`{"type":"object"}`)},
		apitypes.Flow{Name: "later", Hash: "h2", Input: json.RawMessage(`{"type":"object"}`)})
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no tools/list_changed after a flow was registered")
	}
	if names := toolNames(t, cs); !slices.Contains(names, "later") {
		t.Fatalf("tools after the change: %v", names)
	}
}
