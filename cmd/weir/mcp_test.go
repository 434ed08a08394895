package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/mcpserver"
)

const mcpServedFlows = `
flow(
    name = "greet",
    doc = "Say hello to someone.",
    input = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    nodes = [task("hi", tool = "testkit.echo", args = lambda ctx: {"hello": ctx.input["name"]})],
)
flow(
    name = "slowpoke",
    nodes = [
        task("a", tool = "testkit.echo", args = {"x": 1}, next = "b"),
        task("b", tool = "testkit.sleep", args = {"ms": 600000}),
    ],
)
flow(
    name = "approval",
    nodes = [
        wait("ok", timeout = "1h", next = "done"),
        task("done", tool = "testkit.echo", args = {"approved": True}),
    ],
)
`

// mcpClient is a go-sdk MCP client whose progress messages are kept.
type mcpClient struct {
	*mcp.ClientSession
	mu       sync.Mutex
	progress []string
}

func (c *mcpClient) messages() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.progress...)
}

func connectMCP(t *testing.T, tr mcp.Transport) *mcpClient {
	t.Helper()
	c := &mcpClient{}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params.Message)
			c.mu.Unlock()
		},
	})
	s, err := cl.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c.ClientSession = s
	return c
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

// TestMCPServeStdio drives `weir mcp` on stdio with the go-sdk client: the
// flows are its tools, a call runs a flow (deduplicated by the client's
// request id), reports progress, detaches on cancellation, cancel_run
// stops the run, a human wait answers at once, and a run's state and
// timeline are resources.
func TestMCPServeStdio(t *testing.T) {
	d := servingDaemon(t)
	d.register(mcpServedFlows)
	c := connectMCP(t, &mcp.CommandTransport{Command: exec.Command(d.weir, "--socket", d.socket, "mcp")})
	ctx := context.Background()

	tools, err := c.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	for _, n := range []string{"greet", "slowpoke", "approval", mcpserver.CancelRunTool, mcpserver.WaitRunTool, mcpserver.ApproveTool, mcpserver.RejectTool} {
		if byName[n] == nil {
			t.Fatalf("tools %v lack %s", keysOf(byName), n)
		}
	}
	schema, _ := json.Marshal(byName["greet"].InputSchema)
	if !strings.Contains(byName["greet"].Description, "Say hello to someone.") || !strings.Contains(string(schema), `"name":{"type":"string"}`) ||
		!strings.Contains(string(schema), mcpserver.ArgRequestID) {
		t.Errorf("greet: %q %s", byName["greet"].Description, schema)
	}

	// A call runs the flow; the same request id returns the same run.
	call := func(name string, args any) *mcp.CallToolResult {
		t.Helper()
		res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	res := call("greet", map[string]any{"name": "ann", mcpserver.ArgRequestID: "order-7"})
	m := structured(t, res)
	if res.IsError || m["phase"] != "completed" || fmt.Sprint(m["output"]) != "map[hello:ann]" {
		t.Fatalf("greet: %+v", m)
	}
	first := m["run_id"].(string)
	p := &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "ann"}, Meta: mcp.Meta{mcpserver.MetaRequestID: "order-7"}}
	again, err := c.CallTool(ctx, p)
	if err != nil || structured(t, again)["run_id"] != first {
		t.Fatalf("the same request id in _meta started another run: %+v %v", again, err)
	}
	if v, err := d.api.RunGet(ctx, first); err != nil || string(v.Input) != `{"name":"ann"}` || v.RequestID != "order-7" {
		t.Fatalf("run %+v %v: the request id must not reach the flow's input", v, err)
	}
	// Bad input: refused with the daemon's code, nothing started.
	bad := call("greet", map[string]any{"nom": "x"})
	if em, _ := structured(t, bad)["error"].(map[string]any); !bad.IsError || em["code"] != apitypes.CodeBadInput || em["class"] == "" {
		t.Fatalf("bad input: %+v", bad.StructuredContent)
	}

	// Progress, then the client cancels: the run goes on.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		sp := &mcp.CallToolParams{Name: "slowpoke", Arguments: map[string]any{}}
		sp.SetProgressToken("slow-1")
		_, err := c.CallTool(cctx, sp)
		done <- err
	}()
	var runID string
	testutil.Eventually(t, 30*time.Second, func() error {
		msgs := c.messages()
		for _, msg := range msgs {
			if id, ok := strings.CutSuffix(strings.TrimPrefix(msg, "run "), " accepted"); ok {
				runID = id
			}
		}
		if runID == "" || !strings.Contains(strings.Join(msgs, "\n"), "at b") {
			return fmt.Errorf("progress so far: %q", msgs)
		}
		return nil
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call answered")
	}
	if v, err := d.api.RunGet(ctx, runID); err != nil || v.Phase.Terminal() {
		t.Fatalf("after the client cancelled: %+v %v, want the run going on", v, err)
	}
	cr := call(mcpserver.CancelRunTool, map[string]any{"run_id": runID})
	if cm := structured(t, cr); cr.IsError || cm["answer"] != string(apitypes.CancelRequested) {
		t.Fatalf("cancel_run: %+v", cm)
	}
	if v := d.waitTerminal(runID); v.Phase != apitypes.PhaseCancelled {
		t.Fatalf("run %s after cancel_run", v.Phase)
	}

	// A human wait answers at once with how to decide it.
	w := call("approval", map[string]any{})
	wm := structured(t, w)
	waits, _ := wm["waits"].([]any)
	text := w.Content[0].(*mcp.TextContent).Text
	if w.IsError || wm["phase"] != "waiting" || len(waits) != 1 || !strings.Contains(text, "weir run approve "+wm["run_id"].(string)+" ok") {
		t.Fatalf("waiting flow: %+v %q", wm, text)
	}

	// The run's state and timeline are resources.
	rr, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.RunURIPrefix + first})
	if err != nil || !strings.Contains(rr.Contents[0].Text, `"phase": "completed"`) {
		t.Fatalf("run resource: %v %v", rr, err)
	}
	tl, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.RunURIPrefix + first + "/timeline"})
	var evs []apitypes.Event
	if err != nil || json.Unmarshal([]byte(tl.Contents[0].Text), &evs) != nil || len(evs) == 0 || evs[len(evs)-1].Type == "" {
		t.Fatalf("timeline resource: %v %v", tl, err)
	}
	if _, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.RunURIPrefix + "no-such-run"}); err == nil {
		t.Fatal("a missing run was read")
	}
	d.stop()
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// bearerTransport sends a token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// tokenDaemon starts a daemon whose TCP listener (tcp) knows the tokens
// of alice and bob, with mcpServedFlows registered.
func tokenDaemon(t *testing.T) (d *daemon, tcp string) {
	t.Helper()
	d = newDaemon(t)
	tcp = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := filepath.Join(t.TempDir(), "weir.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`tcp {
  address = %q
  token "alice" {
    secret = "alice-token-0123456789"
  }
  token "bob" {
    secret = "bob-token-0123456789ab"
  }
}
`, tcp)), 0o600); err != nil {
		t.Fatal(err)
	}
	d.serveArgs = []string{"--config", conf}
	d.start("")
	d.register(mcpServedFlows)
	return d, tcp
}

// listenMCP starts `weir mcp --listen` over the daemon's TCP listener,
// with more flags if given, and returns its endpoint, its log and the
// process.
func listenMCP(t *testing.T, d *daemon, tcp string, flags ...string) (endpoint string, logs *testutil.Buffer, cmd *exec.Cmd) {
	t.Helper()
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd = exec.Command(d.weir, append([]string{"mcp", "--listen", listen, "--daemon", "http://" + tcp}, flags...)...)
	logs = &testutil.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testutil.Eventually(t, 30*time.Second, func() error {
		conn, err := net.Dial("tcp", listen)
		if err != nil {
			return fmt.Errorf("weir mcp does not listen: %v\n%s", err, logs)
		}
		return conn.Close()
	})
	return "http://" + listen + "/mcp", logs, cmd
}

// TestMCPServeHTTP: `weir mcp --listen` serves streamable HTTP, refuses a
// request without a token or with one the daemon does not know, runs a
// flow for a token's owner, and keeps another owner's runs invisible.
func TestMCPServeHTTP(t *testing.T) {
	e2e(t, "starts a real daemon")
	d, tcp := tokenDaemon(t)
	ctx := context.Background()
	bob, err := client.New("http://"+tcp, client.WithToken("bob-token-0123456789ab"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	bobs, err := bob.RunStart(ctx, apitypes.StartRequest{Flow: "greet", Input: json.RawMessage(`{"name":"bob"}`)})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, logs, _ := listenMCP(t, d, tcp)
	for _, tok := range []string{"", "not-a-token-of-this-daemon"} {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", tok, resp.StatusCode)
		}
	}

	alice := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{"alice-token-0123456789"}}})
	// Alice's session cannot be used with bob's token.
	sid := alice.ID()
	if sid == "" {
		t.Fatal("no session id: the binding of sessions to tokens is not exercised")
	}
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer bob-token-0123456789ab")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's token on alice's session: status %d, want 404", resp.StatusCode)
	}
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "alice"}})
	if err != nil || res.IsError {
		t.Fatalf("greet over HTTP: %+v %v\n%s", res, err, logs)
	}
	m := structured(t, res)
	v, err := bob.RunGet(ctx, m["run_id"].(string))
	if err == nil {
		t.Fatalf("bob reads alice's run %+v", v)
	}
	aliceAPI, err := client.New("http://"+tcp, client.WithToken("alice-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aliceAPI.Close)
	if v, err := aliceAPI.RunGet(ctx, m["run_id"].(string)); err != nil || v.Owner != "alice" {
		t.Fatalf("the run started over MCP is owned by %+v (%v), want alice", v, err)
	}
	if _, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.RunURIPrefix + bobs.RunID}); err == nil {
		t.Fatal("alice read bob's run through MCP")
	}
	cr, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.CancelRunTool, Arguments: map[string]any{"run_id": bobs.RunID}})
	if em, _ := structured(t, cr)["error"].(map[string]any); err != nil || !cr.IsError || em["code"] != apitypes.CodeNotFound {
		t.Fatalf("alice cancelling bob's run: %+v %v", cr, err)
	}
	d.stop()
}

// TestMCPSurvivesABadSchema (issue 24, finding 4): bob registers a flow
// whose input schema puts x-mcp-header on an object, which the go-sdk's
// AddTool panics on, and one with a doc of 60 KB. A shared `weir mcp
// --listen` lives on (same process), alice's session lists and runs the
// other flows, a stdio `weir mcp` starts and lists them too, and `weir
// flow ls` shows each doc's first line.
func TestMCPSurvivesABadSchema(t *testing.T) {
	e2e(t, "starts a real daemon")
	d, tcp := tokenDaemon(t)
	ctx := context.Background()
	endpoint, logs, proc := listenMCP(t, d, tcp)
	alice := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{"alice-token-0123456789"}}})
	names := func(c *mcpClient) []string {
		t.Helper()
		tools, err := c.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v\n%s", err, logs)
		}
		var out []string
		for _, tl := range tools.Tools {
			out = append(out, tl.Name)
			if len(tl.Description) > 400 {
				t.Errorf("%s: a description of %d bytes", tl.Name, len(tl.Description))
			}
		}
		slices.Sort(out)
		return out
	}
	want := []string{mcpserver.ApproveTool, "approval", mcpserver.CancelRunTool, "greet", "longdoc", mcpserver.RejectTool, "slowpoke", mcpserver.WaitRunTool,
		mcpserver.ResolveTool, mcpserver.RedriveTool, mcpserver.ForkTool, mcpserver.RaiseBudgetTool}
	slices.Sort(want)
	bob, err := client.New("http://"+tcp, client.WithToken("bob-token-0123456789ab"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	if _, err := bob.FlowRegister(ctx, apitypes.SourceFile{Path: "bobs.star", Src: `
flow(name = "headers", input = {"type": "object", "properties": {"a": {"type": "object", "x-mcp-header": "X-A"}}},
     nodes = [task("t", tool = "testkit.echo")])
flow(name = "longdoc", doc = "Bob's flow, in one line.\n" + "d" * 60000, nodes = [task("t", tool = "testkit.echo")])
`}); err != nil {
		t.Fatal(err)
	}
	if got := names(alice); !slices.Equal(got, want) {
		t.Fatalf("alice's tools %v, want %v\n%s", got, want, logs)
	}
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "alice"}})
	if err != nil || res.IsError {
		t.Fatalf("greet after the bad schema: %+v %v\n%s", res, err, logs)
	}
	if proc.ProcessState != nil || proc.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatalf("weir mcp --listen ended:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "flow not offered as a tool") || !strings.Contains(logs.String(), "headers") {
		t.Errorf("no reason for leaving headers out in the log:\n%s", logs)
	}
	stdio := connectMCP(t, &mcp.CommandTransport{Command: exec.Command(d.weir, "--socket", d.socket, "mcp")})
	if got := names(stdio); !slices.Equal(got, want) {
		t.Fatalf("stdio tools %v, want %v", got, want)
	}
	code, out, errb := d.cli("flow", "ls")
	if code != 0 || !strings.Contains(out, "Bob's flow, in one line.") || strings.Contains(out, "ddd") {
		t.Fatalf("flow ls: %d %.500s %s", code, out, errb)
	}
	d.stop()
}
