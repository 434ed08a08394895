package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/tool"
)

// toolErr asserts err is a tool error of kind and code.
func toolErr(t *testing.T, what string, err error, kind tool.Kind, code string) *tool.Error {
	t.Helper()
	var te *tool.Error
	if !errors.As(err, &te) || te.Kind != kind || te.Code != code {
		t.Fatalf("%s: %v, want kind %s with %s", what, err, kind, code)
	}
	return te
}

// TestHTTPServerKilledMidCall: an HTTP server killed while it runs a call
// is no answer from the server: the call's outcome is unknown (weir then
// retries an idempotent tool and ends an at-most-once one with
// E_OUTCOME_UNKNOWN), never "the server refused the tool".
func TestHTTPServerKilledMidCall(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, tool, input string
		sent              func(b *bridged, progressed bool) error // true once the server runs the call
	}{
		{"at most once", "mcp.demo-append", `{"line":"held","hold":true}`, func(b *bridged, _ bool) error {
			if l := b.journalLines(t); len(l) != 1 || l[0] != "held" {
				return fmt.Errorf("journal %q", l)
			}
			return nil
		}},
		{"idempotent", "mcp.demo-slow", `{"steps":1000000}`, func(_ *bridged, progressed bool) error {
			if !progressed {
				return errors.New("no progress yet")
			}
			return nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := start(t, "http", `,"trust_annotations":["demo"]`)
			progressed := make(chan struct{}, 1)
			errc := make(chan error, 1)
			go func() {
				_, err := b.call(context.Background(), tt.tool, tt.input, func(int64, int64) {
					select {
					case progressed <- struct{}{}:
					default:
					}
				})
				errc <- err
			}()
			seen := false
			testutil.Eventually(t, 30*time.Second, func() error {
				select {
				case <-progressed:
					seen = true
				default:
				}
				return tt.sent(b, seen)
			})
			b.srv.Kill()
			te := toolErr(t, "the call the server died in", <-errc, tool.KindUnknown, CodeServerGone)
			if !strings.Contains(te.Message, "after it was sent") {
				t.Errorf("message %q", te.Message)
			}
			b.srv.Restart()
			if out, err := b.call(context.Background(), "mcp.demo-echo", `{"text":"back"}`, nil); err != nil || out != `"back"` {
				t.Fatalf("after the restart: %s %v", out, err)
			}
		})
	}
}

// TestHTTPServerRestartBetweenCalls: a server that restarted between two
// calls refuses the plugin's old session (404); the plugin opens a new
// one and makes the call there, once: the server ran nothing the first
// time. While the server is down a call fails as not sent, and reaches
// nothing.
func TestHTTPServerRestartBetweenCalls(t *testing.T) {
	t.Parallel()
	b := start(t, "http", "")
	ctx := context.Background()
	if out, err := b.call(ctx, "mcp.demo-append", `{"line":"one"}`, nil); err != nil || out != `"1 lines"` {
		t.Fatalf("first call: %s %v", out, err)
	}
	b.srv.Kill()
	_, err := b.call(ctx, "mcp.demo-append", `{"line":"while down"}`, nil)
	toolErr(t, "a call while the server is down", err, tool.KindNotSent, CodeUnavailable)

	b.srv.Restart()
	if out, err := b.call(ctx, "mcp.demo-append", `{"line":"two"}`, nil); err != nil || out != `"2 lines"` {
		t.Fatalf("first call after the restart: %s %v", out, err)
	}
	if l := b.journalLines(t); strings.Join(l, ",") != "one,two" {
		t.Errorf("journal %q, want each call once and nothing of the call made while down", l)
	}
}

// TestOneServerDown: with two servers, one unreachable when the plugin
// launches, the other's tools stand; the down one's tools are known from
// its last list, their descriptions say the server was down, their calls
// fail as not sent (nothing reached it) and succeed once it is back. With
// no list kept, the down server's tools are unknown and the other's still
// stand.
func TestOneServerDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	upEntry, env, _ := serverBlock(t, "http", filepath.Join(dir, "up"), "")
	downEntry, _, down := serverBlock(t, "http", filepath.Join(dir, "down"), "")
	cfg, newHost := mcpHosts(t, `{"servers":{"up":`+upEntry+`,"down":`+downEntry+`}}`, env)
	data := cfg.DataDir
	ctx := context.Background()
	call := func(h *host.Host, name string) error {
		_, err := h.Call(ctx, host.CallRequest{Tool: name, Input: json.RawMessage(`{"line":"x"}`), IdempotencyKey: "k", Attempt: 1})
		return err
	}

	h1 := newHost() // both up: each list is kept
	if _, ok := h1.LookupTool("mcp.down-append"); !ok {
		t.Fatal("mcp.down-append missing while both servers are up")
	}
	h1.Close()

	down.Kill()
	h2 := newHost()
	for _, name := range []string{"mcp.up-append", "mcp.down-append", "mcp.down-echo"} {
		if _, ok := h2.LookupTool(name); !ok {
			t.Fatalf("%s unknown with server down unreachable", name)
		}
	}
	tm, _ := h2.LookupTool("mcp.down-append")
	if !strings.Contains(tm.Description, "unreachable when the plugin started") {
		t.Errorf("the down server's tool says nothing of it: %q", tm.Description)
	}
	if tm, _ := h2.LookupTool("mcp.up-append"); strings.Contains(tm.Description, "unreachable") {
		t.Errorf("the reachable server's tool is marked down: %q", tm.Description)
	}
	if err := call(h2, "mcp.up-append"); err != nil {
		t.Fatalf("the reachable server's tool: %v", err)
	}
	toolErr(t, "a call to the down server", call(h2, "mcp.down-append"), tool.KindNotSent, CodeUnavailable)
	// Status names the down server, and since when.
	hl, err := host.ReadHealth(data, "mcp")
	if err != nil || hl == nil || len(hl.Down) != 1 || hl.Down[0].Name != "down" || hl.Down[0].Since.IsZero() || hl.Down[0].Error == "" {
		t.Fatalf("health while down: %+v %v", hl, err)
	}
	if got := h2.Health()["mcp"]; got == nil || len(got.Down) != 1 {
		t.Fatalf("the host's health: %+v", got)
	}
	down.Restart()
	if err := call(h2, "mcp.down-append"); err != nil {
		t.Fatalf("the down server's tool once it is back: %v", err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if hl, err := host.ReadHealth(data, "mcp"); err != nil || hl == nil || len(hl.Down) != 0 {
			return fmt.Errorf("health once back: %+v %v", hl, err)
		}
		// Its tools are published again, no longer marked.
		if tm, _ := h2.LookupTool("mcp.down-append"); strings.Contains(tm.Description, "unreachable") {
			return fmt.Errorf("still marked: %q", tm.Description)
		}
		return nil
	})
	h2.Close()

	// No list kept (a fresh data directory): the down server's tools
	// are unknown, the other's stand.
	down.Kill()
	cfg.DataDir = t.TempDir()
	h3 := newHost()
	if _, ok := h3.LookupTool("mcp.down-append"); ok {
		t.Error("a down server's tool is known with no list kept")
	}
	if _, ok := h3.LookupTool("mcp.up-echo"); !ok {
		t.Fatal("one server down removed the other's tools")
	}
	for _, info := range h3.Plugins() {
		if info.Name == "mcp" && info.Err != nil {
			t.Errorf("the launch failed: %v", info.Err)
		}
	}
	// Once it answers, its tools are served without a restart.
	down.Restart()
	testutil.Eventually(t, time.Minute, func() error {
		if _, ok := h3.LookupTool("mcp.down-append"); !ok {
			return errors.New("the server is back but its tools are still unknown")
		}
		return nil
	})
	if r := h3.Restarts()["mcp"]; r != 0 {
		t.Errorf("the plugin restarted %d times", r)
	}
}

// TestStdioServerEnv: a stdio server is started with PATH, HOME and the
// variables its own env names, nothing else of the plugin's environment:
// not another server's token, not weir's settings, not the plugin
// protocol's keys.
func TestStdioServerEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := testutil.Program(t, "demo-mcp")
	envA, envB := filepath.Join(dir, "a.env"), filepath.Join(dir, "b.env")
	a, _ := json.Marshal([]string{bin, "-env", envA})
	b, _ := json.Marshal([]string{bin, "-env", envB})
	section := fmt.Sprintf(`{"servers":{"a":{"command":%s,"env":["DEMO_OTHER"]},"b":{"command":%s}}}`, a, b)
	_, newHost := mcpHosts(t, section, []string{"DEMO_TOKEN", "DEMO_OTHER"})
	h := newHost()
	if _, ok := h.LookupTool("mcp.a-echo"); !ok {
		t.Fatal("server a's tools are missing")
	}
	read := func(path string) map[string]string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			out[k] = v
		}
		return out
	}
	for path, want := range map[string]map[string]string{
		envA: {"DEMO_OTHER": "other-secret", "PATH": os.Getenv("PATH")},
		envB: {"PATH": os.Getenv("PATH")},
	} {
		got := read(path)
		for k := range got {
			if _, ok := want[k]; !ok && k != "HOME" {
				t.Errorf("%s: the server got %s", filepath.Base(path), k)
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", filepath.Base(path), k, got[k], v)
			}
		}
	}
}

// TestBigImageGoesToTheBlobStore: a 1 MiB image reaches the flow as a
// reference to a kept blob whichever field carries it, a content block or
// structuredContent, never as its bytes.
func TestBigImageGoesToTheBlobStore(t *testing.T) {
	t.Parallel()
	bin := testutil.Program(t, "demo-mcp")
	cmd, _ := json.Marshal([]string{bin, "-big"})
	p := plugintest.Start(t, "mcp", fmt.Sprintf(`{"servers":{"demo":{"command":%s}}}`, cmd))
	want := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0xab}, 1<<20-8)...)
	for _, tt := range []struct {
		input string
		ref   func(out json.RawMessage) (map[string]any, error)
	}{
		{`{}`, func(out json.RawMessage) (map[string]any, error) {
			var parts []map[string]any
			if err := json.Unmarshal(out, &parts); err != nil || len(parts) != 1 {
				return nil, fmt.Errorf("parts %s (%v)", out, err)
			}
			return parts[0], nil
		}},
		{`{"structured":true}`, func(out json.RawMessage) (map[string]any, error) {
			var v struct {
				Content []map[string]any `json:"content"`
			}
			if err := json.Unmarshal(out, &v); err != nil || len(v.Content) != 1 {
				return nil, fmt.Errorf("structured %s (%v)", out, err)
			}
			return v.Content[0], nil
		}},
	} {
		res, err := p.Host.Call(context.Background(), host.CallRequest{Tool: "mcp.demo-big_picture", Input: json.RawMessage(tt.input), IdempotencyKey: "k", Attempt: 1})
		if err != nil {
			t.Fatalf("%s: %v", tt.input, err)
		}
		if len(res.Output) > 4<<10 {
			t.Fatalf("%s: an output of %d bytes: the image's bytes came through", tt.input, len(res.Output))
		}
		ref, err := tt.ref(res.Output)
		if err != nil {
			t.Fatalf("%s: %v", tt.input, err)
		}
		uri, _ := ref["uri"].(string)
		got, err := os.ReadFile(strings.TrimPrefix(uri, "file://"))
		if ref["type"] != "image" || ref["mime_type"] != "image/png" || ref["size"] != float64(1<<20) || err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: reference %v, blob of %d bytes (%v)", tt.input, ref, len(got), err)
		}
	}
}

// TestHTTPServerRestartIdempotent: the first call of an idempotent tool
// after the server restarted succeeds too, though it goes on a kept-alive
// connection the old server's death closed: nothing answered, so the
// plugin may make it again on a new session (weir would, with the same
// key).
func TestHTTPServerRestartIdempotent(t *testing.T) {
	t.Parallel()
	b := start(t, "http", `,"trust_annotations":["demo"]`)
	ctx := context.Background()
	for i := range 3 {
		text := fmt.Sprintf(`{"text":"r%d"}`, i)
		if out, err := b.call(ctx, "mcp.demo-echo", text, nil); err != nil || out != fmt.Sprintf(`"r%d"`, i) {
			t.Fatalf("call %d, after %d restarts: %s %v", i, i, out, err)
		}
		b.srv.Kill()
		b.srv.Restart()
	}
}

// TestHTTPServerRestartsWithAnotherList: an HTTP server that comes back
// from a restart offering other tools is listed again on the new session,
// and weir serves the new list without relaunching the plugin.
func TestHTTPServerRestartsWithAnotherList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hide := filepath.Join(dir, "hide")
	entry, env, srv := serverBlock(t, "http", filepath.Join(dir, "journal"), hide)
	_, newHost := mcpHosts(t, `{"servers":{"demo":`+entry+`}}`, env)
	h := newHost()
	b := &bridged{host: h, srv: srv}
	ctx := context.Background()
	if _, err := b.call(ctx, "mcp.demo-echo", `{"text":"before"}`, nil); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := os.WriteFile(hide, []byte("append\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	if out, err := b.call(ctx, "mcp.demo-echo", `{"text":"after"}`, nil); err != nil || out != `"after"` {
		t.Fatalf("first call after the restart: %s %v", out, err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, ok := h.LookupTool("mcp.demo-append"); ok {
			return errors.New("append still known")
		}
		return nil
	})
	if r := h.Restarts()["mcp"]; r != 0 {
		t.Errorf("the plugin restarted %d times", r)
	}
}
