package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/chat"
	"github.com/weirhq/weir/sdk/wire"
)

func TestToolPart(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	tests := []struct{ server, name, want string }{
		{"files", "read_file", "files-read_file"},
		{"files", "Lookup.Item", "files-lookup-item"},
		{"t", "a b/c:d", "t-a-b-c-d"},
		{"s", "__private__name", "s-_private_name"},
		{"files", long, "files-" + strings.Repeat("x", maxToolPart-hashLen-1-len("files-")) + "-"},
	}
	for _, tt := range tests {
		got, err := toolPart(tt.server, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, tt.want) || len(got) > maxToolPart {
			t.Errorf("toolPart(%q, %q) = %q, want %q (at most %d bytes)", tt.server, tt.name, got, tt.want, maxToolPart)
		}
	}
	a, _ := toolPart("s", long+"a")
	b, _ := toolPart("s", long+"b")
	if a == b || len(a) != maxToolPart {
		t.Errorf("two long names differing at their end map to %q and %q", a, b)
	}
	if _, err := toolPart("s", strings.Repeat("y", maxMCPName+1)); err == nil {
		t.Error("a name over the MCP limit was mapped")
	}
}

// TestToolPartsCanBeShownToAModel: every part the mapping makes is a tool
// name an agent can offer a model (sdk/chat's mapping reads it back), and
// a valid weir tool name.
func TestToolPartsCanBeShownToAModel(t *testing.T) {
	t.Parallel()
	names := []string{"read_file", "Lookup.Item", "__x__", "a..b", "_", "-", "x_", "ÄÖ", "a/b\\c", strings.Repeat("Z_.", 40)}
	for _, srv := range []string{"a", "my_server", "s0"} {
		for _, n := range names {
			part, err := toolPart(srv, n)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := wire.SplitToolName("mcp." + part); err != nil {
				t.Errorf("%s/%q: %q is not a weir tool name: %v", srv, n, part, err)
			}
			m, err := chat.ProviderToolName("mcp." + part)
			if err != nil || len(m) > chat.MaxProviderToolName || chat.UnmapToolName(m) != "mcp."+part {
				t.Errorf("%s/%q: mcp.%s cannot be shown to a model: %q %v", srv, n, part, m, err)
			}
		}
	}
}

func TestNameCollisionRefused(t *testing.T) {
	t.Parallel()
	n := nameTable{}
	if _, err := n.add("files", "Read.File"); err != nil {
		t.Fatal(err)
	}
	_, err := n.add("files", "read-file")
	if err == nil || !strings.Contains(err.Error(), `"Read.File" and "read-file"`) {
		t.Fatalf("collision: %v", err)
	}
	if n["files-read-file"] != "Read.File" {
		t.Fatalf("the table maps back to %q", n["files-read-file"])
	}
}

// TestEffectNeverGuessed covers each way a tool becomes read or
// idempotent and the ways it does not.
func TestEffectNeverGuessed(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	tests := []struct {
		name            string
		listed, trusted bool
		ann             *mcp.ToolAnnotations
		want            sdk.Effect
	}{
		{"operator lists it", true, false, nil, sdk.EffectIdempotent},
		{"operator lists a destructive tool", true, false, &mcp.ToolAnnotations{DestructiveHint: &yes}, sdk.EffectIdempotent},
		{"operator lists a trusted read-only tool", true, true, &mcp.ToolAnnotations{ReadOnlyHint: true}, sdk.EffectRead},
		{"no word at all", false, false, nil, sdk.EffectAtMostOnce},
		{"untrusted read-only", false, false, &mcp.ToolAnnotations{ReadOnlyHint: true}, sdk.EffectAtMostOnce},
		{"untrusted read-only, operator lists it", true, false, &mcp.ToolAnnotations{ReadOnlyHint: true}, sdk.EffectIdempotent},
		{"untrusted idempotent, not destructive", false, false, &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}, sdk.EffectAtMostOnce},
		{"trusted, no annotations", false, true, nil, sdk.EffectAtMostOnce},
		{"trusted read-only", false, true, &mcp.ToolAnnotations{ReadOnlyHint: true}, sdk.EffectRead},
		{"trusted idempotent, destructive unsaid (defaults to true)", false, true, &mcp.ToolAnnotations{IdempotentHint: true}, sdk.EffectAtMostOnce},
		{"trusted idempotent, destructive", false, true, &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes}, sdk.EffectAtMostOnce},
		{"trusted idempotent, explicitly not destructive", false, true, &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}, sdk.EffectIdempotent},
		{"trusted, not destructive but not idempotent", false, true, &mcp.ToolAnnotations{DestructiveHint: &no}, sdk.EffectAtMostOnce},
	}
	for _, tt := range tests {
		if got := effect(tt.listed, tt.trusted, tt.ann); got != tt.want {
			t.Errorf("%s: effect = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	env := func(k string) (string, bool) {
		if k == "TOK" {
			return "secret-token", true
		}
		return "", false
	}
	tests := []struct{ config, want string }{
		{`{}`, "name at least one MCP server"},
		{`{"servers":{"a":{}}}`, "set command (a stdio server) or url"},
		{`{"servers":{"a":{"command":["x"],"url":"http://h/mcp"}}}`, "not both"},
		{`{"servers":{"a__b":{"command":["x"]}}}`, `may not hold "__"`},
		{`{"servers":{"A":{"command":["x"]}}}`, "lower-case"},
		{`{"servers":{"a":{"command":["x"]}},"idempotent":["b-t"]}`, `"b-t" is not SERVER-TOOL`},
		{`{"servers":{"a":{"command":["x"]}},"idempotent":["a__t"]}`, `the tool is named a-t`},
		{`{"servers":{"a":{"command":["x"]}},"trust_annotations":["b"]}`, `"b" is not a server`},
		{`{"servers":{"a":{"url":"http://h/mcp","token_env":"NOPE"}}}`, "NOPE, which is not set"},
		{`{"servers":{"a":{"url":"ftp://h/mcp"}}}`, "want http(s)"},
		{`{"servers":{"a":{"command":["x"],"token_env":"TOK"}}}`, "token_env is for an HTTP server"},
		{`{"servers":{"a":{"command":["x"],"cwd":"/"}}}`, "unknown field"},
		{`{"servers":{"a":{"command":["x"]}},"verbose":true}`, `unknown key "verbose"`},
		{`{"servers":{"a":{"url":"http://h/mcp","env":["TOK"]}}}`, "env is for a stdio server"},
		{`{"servers":{"a":{"command":["x"],"env":["NOPE"]}}}`, "env names NOPE, which is not set"},
		{`{"servers":{"a":{"command":["x"],"env":["1X"]}}}`, `"1X" is not a variable name`},
	}
	for _, tt := range tests {
		_, err := parseConfig(json.RawMessage(tt.config), env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.config, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-token") {
			t.Errorf("the token leaked into an error: %v", err)
		}
	}
	c, err := parseConfig(json.RawMessage(`{"env":["TOK"],"memory_max":"64MiB","servers":{"a":{"url":"http://h/mcp","token_env":"TOK"}}}`), env)
	if err != nil || c.Servers["a"].token != "secret-token" {
		t.Fatalf("host keys and a token: %+v %v", c, err)
	}
	c, err = parseConfig(json.RawMessage(`{"servers":{"a":{"command":["x"],"env":["TOK"]},"b":{"command":["y"]}}}`), env)
	if err != nil || strings.Join(c.Servers["a"].env, ",") != "TOK=secret-token" || len(c.Servers["b"].env) != 0 {
		t.Fatalf("per-server env: %+v %v", c, err)
	}
}

func TestProgressUnits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p, tot      float64
		done, total int64
	}{{3, 10, 3, 10}, {0.5, 1, 500, 1000}, {7, 0, 7, 0}, {-1, 0, 0, 0}} {
		if d, tot := progressUnits(tt.p, tt.tot); d != tt.done || tot != tt.total {
			t.Errorf("progressUnits(%v, %v) = %d, %d", tt.p, tt.tot, d, tot)
		}
	}
}

func TestMapResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := mapResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, dir)
	if err != nil || out != "a\nb" {
		t.Fatalf("text: %v %v", out, err)
	}
	out, err = mapResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: map[string]any{"n": 1}}, dir)
	if b, _ := json.Marshal(out); err != nil || string(b) != `{"n":1}` {
		t.Fatalf("structured: %s %v", b, err)
	}
	_, err = mapResult(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "quota exceeded"}}}, dir)
	var se *sdk.Error
	if !errors.As(err, &se) || se.Code != CodeToolError || se.Kind != sdk.KindPermanent || se.Message != "quota exceeded" {
		t.Fatalf("isError: %#v", err)
	}
	out, err = mapResult(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.ImageContent{MIMEType: "image/png", Data: []byte("png")},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://x", MIMEType: "text/plain", Text: "hello"}},
	}}, dir)
	b, _ := json.Marshal(out)
	if err != nil || !strings.Contains(string(b), `"type":"image","mime_type":"image/png","uri":"file://`+dir+`/blobs/`) ||
		!strings.Contains(string(b), `{"type":"resource","mime_type":"text/plain","uri":"mem://x","text":"hello"}`) {
		t.Fatalf("references: %s %v", b, err)
	}
	// Annotations are kept, on text as on references.
	user := &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}
	out, err = mapResult(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "for you", Annotations: user},
		&mcp.ResourceLink{URI: "mem://y", Name: "y", Annotations: user},
	}}, dir)
	b, _ = json.Marshal(out)
	if want := `[{"type":"text","text":"for you","annotations":{"audience":["user"],"priority":0.5}},{"type":"resource_link","uri":"mem://y","name":"y","annotations":{"audience":["user"],"priority":0.5}}]`; err != nil || string(b) != want {
		t.Fatalf("annotations: %s %v, want %s", b, err, want)
	}
	_, err = mapResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, maxBlobBytes+1)}}}, dir)
	if !errors.As(err, &se) || se.Code != CodeBadResult {
		t.Fatalf("oversized image: %v", err)
	}
}

// TestClassify: what a failed call means, from the SDK's error and what
// the call's probe saw on the wire.
func TestClassify(t *testing.T) {
	t.Parallel()
	rejected := fmt.Errorf("calling \"tools/call\": %w: EOF", &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"})
	server := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad arguments"}
	tests := []struct {
		name string
		err  error
		p    *probe
		want failure
	}{
		{"stdio: the server's error", server, nil, failAnswered},
		{"stdio: the pipe broke", errors.New("connection closed"), nil, failUnknown},
		{"stdio: the client closing is no answer", &jsonrpc.Error{Code: codeClientClosing}, nil, failUnknown},
		{"nothing posted: the connection was known broken", rejected, &probe{}, failNotSent},
		{"the dial failed", rejected, &probe{posts: 1, dialFailed: true}, failNotSent},
		{"sent, then EOF", rejected, &probe{posts: 1}, failUnknown},
		{"session refused: 404", rejected, &probe{posts: 1, status: 404}, failSession},
		{"session refused: 400", fmt.Errorf("x: %w", server), &probe{posts: 1, status: 400}, failSession},
		{"503: not taken", rejected, &probe{posts: 1, status: 503}, failNotSent},
		{"429: not taken", rejected, &probe{posts: 1, status: 429}, failNotSent},
		{"502: a gateway may have passed it on", rejected, &probe{posts: 1, status: 502}, failUnknown},
		{"401: refused", rejected, &probe{posts: 1, status: 401}, failAnswered},
		{"200, then the server's error", server, &probe{posts: 1, status: 200}, failAnswered},
		{"200, then the stream broke", errors.New("request terminated without response"), &probe{posts: 1, status: 200}, failUnknown},
		{"200, then the SDK's code-less error", &jsonrpc.Error{Message: "request terminated without response"}, &probe{posts: 1, status: 200}, failUnknown},
	}
	for _, tt := range tests {
		if got := classify(tt.err, tt.p); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDownRetryDelay(t *testing.T) {
	t.Parallel()
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
		if got := downRetryDelay(n); got != want {
			t.Errorf("downRetryDelay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := downRetryDelay(1 << 30); got != downRetryMax {
		t.Errorf("a huge retry count waits %v", got)
	}
}

// TestKeptListRefusals: a kept list of another command or URL, or one
// that is not a list, is not used.
func TestKeptListRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := newBridge(func(string) (string, bool) { return "", false }, slog.New(slog.DiscardHandler), dir)
	s := b.newServer(&serverConfig{name: "a", URL: "http://h/mcp"})
	b.keepList(s, []*mcp.Tool{{Name: "t"}})
	if ts, ok := b.keptList(s); !ok || len(ts) != 1 || ts[0].Name != "t" {
		t.Fatalf("kept list: %v %v", ts, ok)
	}
	other := b.newServer(&serverConfig{name: "a", URL: "http://elsewhere/mcp"})
	if _, ok := b.keptList(other); ok {
		t.Error("a list kept for another URL was used")
	}
	if err := os.WriteFile(filepath.Join(dir, listsDir, "a.json"), []byte(`{"from":`+strconv.Quote(s.from())+`,"tools":[null]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.keptList(s); ok {
		t.Error("a list holding null was used")
	}
}

// TestStructuredBlobs: binary content anywhere in structuredContent is
// kept as a blob and replaced by its reference; other values pass as they
// are; data that is not base64 is the server's bad result.
func TestStructuredBlobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var v any
	if err := json.Unmarshal([]byte(`{"n":1,"items":[{"type":"audio","mimeType":"audio/wav","data":"UklGRg=="},
		{"resource":{"uri":"file:///a.bin","mimeType":"application/octet-stream","blob":"AAE="}},{"type":"text","text":"t"}]}`), &v); err != nil {
		t.Fatal(err)
	}
	out, err := mapResult(&mcp.CallToolResult{StructuredContent: v}, dir)
	b, _ := json.Marshal(out)
	if err != nil || !strings.Contains(string(b), `{"type":"audio","mime_type":"audio/wav","uri":"file://`+dir+`/blobs/`) ||
		!strings.Contains(string(b), `"resource":{"type":"resource","mime_type":"application/octet-stream","uri":"file://`) ||
		!strings.Contains(string(b), `"name":"file:///a.bin"`) || !strings.Contains(string(b), `{"text":"t","type":"text"}`) || !strings.Contains(string(b), `"n":1`) {
		t.Fatalf("structured blobs: %s %v", b, err)
	}
	_, err = mapResult(&mcp.CallToolResult{StructuredContent: map[string]any{"type": "image", "data": "not base64!"}}, dir)
	var se *sdk.Error
	if !errors.As(err, &se) || se.Code != CodeBadResult {
		t.Fatalf("bad base64: %v", err)
	}
}
