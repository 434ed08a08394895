package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/tool"
)

// demoServer is the MCP server the tests bridge in, built with the
// official Go SDK like any vendor's.
const demoServer = "github.com/weirhq/weir/examples/cmd/demo-mcp"

func TestMain(m *testing.M) {
	// The token the HTTP demo server wants, in weir's environment, passed
	// to the plugin by its block's env as an operator would.
	os.Setenv("DEMO_TOKEN", "tok-123")
	// A secret meant for one stdio server alone (TestStdioServerEnv).
	os.Setenv("DEMO_OTHER", "other-secret")
	testutil.Main(m, testutil.Plugins("mcp"), testutil.Programs(demoServer))
}

// transports are the two ways the bridge reaches a server.
var transports = []string{"stdio", "http"}

// serverBlock starts the demo server for transport (an HTTP one as a
// process of the test, with a bearer token) and returns its config
// section entry, the environment the plugin needs and, for HTTP, the
// server's process.
func serverBlock(t *testing.T, transport, journal, hide string) (entry string, env []string, srv *testutil.Listener) {
	t.Helper()
	bin := testutil.Program(t, "demo-mcp")
	args := []string{"-journal", journal}
	if hide != "" {
		args = append(args, "-hide", hide)
	}
	if transport == "stdio" {
		cmd, _ := json.Marshal(append([]string{bin}, args...))
		return fmt.Sprintf(`{"command":%s}`, cmd), nil, nil
	}
	srv = testutil.StartListener(t, append(append([]string{bin}, args...), "-token", "tok-123")...)
	return fmt.Sprintf(`{"url":"http://%s/mcp","token_env":"DEMO_TOKEN"}`, srv.Addr), []string{"DEMO_TOKEN"}, srv
}

// bridged is the mcp plugin under a real host, over one demo server
// named "demo".
type bridged struct {
	host    *host.Host
	srv     *testutil.Listener // nil for stdio
	journal string
	plugins string
	data    string
	cfg     host.Config
}

func start(t *testing.T, transport string, extra string) *bridged {
	t.Helper()
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	entry, env, srv := serverBlock(t, transport, journal, "")
	cfg, newHost := mcpHosts(t, fmt.Sprintf(`{"servers":{"demo":%s}%s}`, entry, extra), env)
	return &bridged{host: newHost(), srv: srv, journal: journal, plugins: cfg.PluginsDir, data: cfg.DataDir, cfg: *cfg}
}

// mcpHosts installs the mcp plugin in a plugins directory of its own and
// returns the host configuration that gives the plugin section as its
// config and env from weir's environment, and a function that starts a
// host on it as it is then (as many as a test needs, each closed when the
// test ends): a test may change the configuration between hosts.
func mcpHosts(t testing.TB, section string, env []string) (*host.Config, func() *host.Host) {
	t.Helper()
	plugins, data := t.TempDir(), t.TempDir()
	if _, err := host.Install(plugins, testutil.Plugin(t, "mcp"), nil); err != nil {
		t.Fatal(err)
	}
	cfg := &host.Config{PluginsDir: plugins, DataDir: data,
		PluginConfig: map[string]json.RawMessage{"mcp": json.RawMessage(section)},
		PluginEnv:    map[string][]string{"mcp": env}}
	return cfg, func() *host.Host {
		t.Helper()
		h, err := host.New(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
}

func (b *bridged) call(ctx context.Context, name, input string, progress func(done, total int64)) (string, error) {
	res, err := b.host.Call(ctx, host.CallRequest{Tool: name, Input: json.RawMessage(input), IdempotencyKey: "key-1", Attempt: 1, Progress: progress})
	if err != nil {
		return "", err
	}
	return string(res.Output), nil
}

func (b *bridged) journalLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(b.journal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// TestBridgeTools checks, over stdio and HTTP, that the server's tools are
// weir tools with their mapped names, descriptions, schemas and
// idempotency, and that each kind of answer maps as documented.
func TestBridgeTools(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			b := start(t, tr, `,"trust_annotations":["demo"],"idempotent":["demo-fail"]`)
			tools := map[string]host.ToolManifest{}
			for _, tm := range b.host.Tools() {
				tools[tm.Name] = tm
			}
			want := map[string]flows.Effect{
				"mcp.demo-echo":        flows.EffectRead,       // trusted, readOnlyHint
				"mcp.demo-lookup-item": flows.EffectIdempotent, // trusted, idempotentHint + destructiveHint false
				"mcp.demo-append":      flows.EffectAtMostOnce, // no annotations
				"mcp.demo-slow":        flows.EffectRead,       // trusted, readOnlyHint
				"mcp.demo-fail":        flows.EffectIdempotent, // the operator's word
				"mcp.demo-crash":       flows.EffectAtMostOnce,
				"mcp.demo-grow":        flows.EffectAtMostOnce,
				"mcp.demo-picture":     flows.EffectRead,
			}
			if len(tools) != len(want) {
				t.Fatalf("tools %v, want %v", keys(tools), want)
			}
			for name, class := range want {
				tm, ok := tools[name]
				if !ok || tm.Class() != class || tm.Idempotent != (class != flows.EffectAtMostOnce) {
					t.Errorf("%s: present %v class %s idempotent %v, want %s", name, ok, tm.Class(), tm.Idempotent, class)
				}
			}
			if d := tools["mcp.demo-lookup-item"].Description; !strings.Contains(d, `tool "Lookup.Item"`) || !strings.Contains(d, "Looks an item up") {
				t.Errorf("description %q", d)
			}
			if s := string(tools["mcp.demo-echo"].InputSchema); !strings.Contains(s, `"text"`) {
				t.Errorf("input schema %s", s)
			}
			ctx := context.Background()
			if out, err := b.call(ctx, "mcp.demo-echo", `{"text":"hi"}`, nil); err != nil || out != `"hi"` {
				t.Errorf("echo: %s %v", out, err)
			}
			// weir checks the server's input schema before the call.
			if _, err := b.call(ctx, "mcp.demo-echo", `{"text":7}`, nil); tool.KindOf(err) != tool.KindSchema {
				t.Errorf("echo with a number: %v, want a schema refusal", err)
			}
			out, err := b.call(ctx, "mcp.demo-lookup-item", `{"key":"k7"}`, nil)
			if err != nil || out != `{"found":true,"idempotency_key":"key-1","key":"k7"}` {
				t.Errorf("structured content and the idempotency key in _meta: %s %v", out, err)
			}
			const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			traced, err := b.host.Call(ctx, host.CallRequest{Tool: "mcp.demo-lookup-item", Input: json.RawMessage(`{"key":"k7"}`), IdempotencyKey: "key-1", Attempt: 1,
				TraceParent: tp, TraceState: "congo=t61rcWkgMzE"})
			if err != nil || string(traced.Output) != `{"found":true,"idempotency_key":"key-1","key":"k7","traceparent":"`+tp+`","tracestate":"congo=t61rcWkgMzE"}` {
				t.Errorf("the call's trace in _meta: %v %v", traced, err)
			}
			if out, err := b.call(ctx, "mcp.demo-append", `{"line":"one"}`, nil); err != nil || out != `"1 lines"` {
				t.Errorf("append: %s %v", out, err)
			}
			_, err = b.call(ctx, "mcp.demo-fail", `{}`, nil)
			var te *tool.Error
			if !errors.As(err, &te) || te.Kind != tool.KindPermanent || te.Code != CodeToolError || !strings.Contains(te.Message, "quota exceeded") {
				t.Errorf("isError: %#v, want a permanent %s with the server's text", err, CodeToolError)
			}
			out, err = b.call(ctx, "mcp.demo-picture", `{}`, nil)
			var parts []map[string]any
			if err != nil || json.Unmarshal([]byte(out), &parts) != nil || len(parts) != 3 {
				t.Fatalf("picture: %s %v", out, err)
			}
			if parts[0]["text"] != "a red dot" || parts[1]["type"] != "image" || parts[1]["mime_type"] != "image/png" ||
				parts[2]["type"] != "resource_link" || parts[2]["uri"] != "file:///srv/docs/dot.txt" || parts[2]["mime_type"] != "text/plain" {
				t.Errorf("picture parts %s", out)
			}
			uri, _ := parts[1]["uri"].(string)
			if got, err := os.ReadFile(strings.TrimPrefix(uri, "file://")); err != nil || string(got) != "\x89PNG\r\n\x1a\nred-dot" {
				t.Errorf("the image's reference %q holds %q (%v)", uri, got, err)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestUntrustedAnnotationsIgnored: without trust_annotations and without
// the operator's list, every tool is at most once, whatever it claims.
func TestUntrustedAnnotationsIgnored(t *testing.T) {
	t.Parallel()
	b := start(t, "stdio", "")
	for _, tm := range b.host.Tools() {
		if tm.Idempotent || tm.Class() != flows.EffectAtMostOnce {
			t.Errorf("%s is %s on an untrusted server's word", tm.Name, tm.Class())
		}
	}
}

// TestProgressAndCancel: the server's progress notifications reach the
// caller as the tool's progress, and cancelling the call reaches the
// server as an MCP cancellation.
func TestProgressAndCancel(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			b := start(t, tr, "")
			var mu sync.Mutex
			var got [][2]int64
			out, err := b.call(context.Background(), "mcp.demo-slow", `{"steps":4}`, func(done, total int64) {
				mu.Lock()
				got = append(got, [2]int64{done, total})
				mu.Unlock()
			})
			if err != nil || out != `"4 steps"` {
				t.Fatalf("slow: %s %v", out, err)
			}
			mu.Lock()
			if len(got) == 0 || got[len(got)-1] != [2]int64{4, 4} {
				t.Errorf("progress %v, want it to end at 4 of 4", got)
			}
			mu.Unlock()

			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := b.call(ctx, "mcp.demo-append", `{"line":"held","hold":true}`, nil)
				errc <- err
			}()
			testutil.Eventually(t, 30*time.Second, func() error {
				if l := b.journalLines(t); len(l) != 1 || l[0] != "held" {
					return fmt.Errorf("journal %q", l)
				}
				return nil
			})
			cancel()
			if err := <-errc; tool.KindOf(err) != tool.KindCancelled {
				t.Fatalf("cancelled call: %v", err)
			}
			testutil.Eventually(t, 30*time.Second, func() error {
				if l := b.journalLines(t); len(l) != 2 || l[1] != "held cancelled" {
					return fmt.Errorf("the server never saw the cancellation: journal %q", l)
				}
				return nil
			})
		})
	}
}

// TestServerRestartsAfterCrash: a stdio server that dies mid-call fails
// that call as an unknown outcome (not idempotent: never retried by weir),
// and the next call starts it again.
func TestServerRestartsAfterCrash(t *testing.T) {
	t.Parallel()
	b := start(t, "stdio", "")
	ctx := context.Background()
	if _, err := b.call(ctx, "mcp.demo-echo", `{"text":"before"}`, nil); err != nil {
		t.Fatal(err)
	}
	_, err := b.call(ctx, "mcp.demo-crash", `{}`, nil)
	var te *tool.Error
	if !errors.As(err, &te) || te.Code != CodeServerGone || te.Kind != tool.KindUnknown || !strings.Contains(te.Message, "unknown") {
		t.Fatalf("crash: %#v, want kind unknown with %s saying the outcome is unknown", err, CodeServerGone)
	}
	if out, err := b.call(ctx, "mcp.demo-echo", `{"text":"after"}`, nil); err != nil || out != `"after"` {
		t.Fatalf("after the crash: %s %v", out, err)
	}
	if r := b.host.Restarts()["mcp"]; r != 0 {
		t.Errorf("the plugin itself restarted %d times: only the MCP server should have", r)
	}
}

// TestChangedToolListNoticed: a server that stops offering a tool is
// noticed when the plugin launches, which the host does at its start for a
// configured plugin: the catalog registration checks no longer has the
// tool, and a call of it fails with weir's unknown-tool kind.
func TestChangedToolListNoticed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hide := filepath.Join(dir, "hide")
	entry, env, _ := serverBlock(t, "stdio", filepath.Join(dir, "journal"), hide)
	_, newHost := mcpHosts(t, `{"servers":{"demo":`+entry+`}}`, env)
	h1 := newHost()
	if _, ok := h1.LookupTool("mcp.demo-append"); !ok {
		t.Fatal("append missing at first")
	}
	h1.Close()

	if err := os.WriteFile(hide, []byte("append\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h2 := newHost() // the manifest cached by h1 still lists append
	if _, ok := h2.LookupTool("mcp.demo-append"); ok {
		t.Fatal("the host still lists the vanished tool: registration would accept it")
	}
	if _, ok := h2.LookupTool("mcp.demo-echo"); !ok {
		t.Fatal("echo vanished too")
	}
	_, err := h2.Call(context.Background(), host.CallRequest{Tool: "mcp.demo-append", Input: json.RawMessage(`{"line":"x"}`), Attempt: 1})
	if tool.KindOf(err) != tool.KindUnknownTool {
		t.Fatalf("call of a vanished tool: %v, want kind %s", err, tool.KindUnknownTool)
	}
	if r := h2.Restarts()["mcp"]; r != 0 {
		t.Errorf("%d restarts: the launch at start serves the calls", r)
	}
}

// TestLaunchRefusals: a server that cannot be reached and a server whose
// tool names collide stop the launch with a clear error.
func TestLaunchRefusals(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "mcp", `{"servers":{"gone":{"command":["/nonexistent/mcp-server"]}}}`)
	_, err := p.Host.Call(context.Background(), host.CallRequest{Tool: "mcp.gone-x", Attempt: 1})
	if err == nil {
		t.Fatal("a tool of an unreachable server was called")
	}
	found := false
	for _, info := range p.Host.Plugins() {
		if info.Name == "mcp" {
			found = true
			if info.Err == nil || !strings.Contains(info.Err.Error(), "mcp server gone: connecting") {
				t.Errorf("launch error %v, want one naming the server", info.Err)
			}
		}
	}
	if !found {
		t.Error("the plugin is not listed")
	}
}

// TestToolListChangedWithoutRestart: a server that changes its tool list
// while it runs (notifications/tools/list_changed) has its new list in
// weir without a daemon or plugin restart, over stdio and HTTP: the new
// tool is known to registration and callable, the removed one refused.
func TestToolListChangedWithoutRestart(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			b := start(t, tr, "")
			ctx := context.Background()
			if _, ok := b.host.LookupTool("mcp.demo-grown"); ok {
				t.Fatal("grown is known before the server offers it")
			}
			if out, err := b.call(ctx, "mcp.demo-grow", `{}`, nil); err != nil || out != `"grew"` {
				t.Fatalf("grow: %s %v", out, err)
			}
			testutil.Eventually(t, 30*time.Second, func() error {
				if _, ok := b.host.LookupTool("mcp.demo-grown"); !ok {
					return errors.New("grown not known yet")
				}
				if _, ok := b.host.LookupTool("mcp.demo-fail"); ok {
					return errors.New("fail still known")
				}
				return nil
			})
			if out, err := b.call(ctx, "mcp.demo-grown", `{}`, nil); err != nil || out != `"grown"` {
				t.Fatalf("grown: %s %v", out, err)
			}
			_, err := b.call(ctx, "mcp.demo-fail", `{}`, nil)
			if tool.KindOf(err) != tool.KindUnknownTool || !strings.Contains(err.Error(), "no longer offers") {
				t.Fatalf("call of the removed tool: %v, want kind %s saying why", err, tool.KindUnknownTool)
			}
			if r := b.host.Restarts()["mcp"]; r != 0 {
				t.Errorf("the plugin restarted %d times", r)
			}
		})
	}
}
