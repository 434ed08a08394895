// Command demo-mcp is a small MCP server, built with the official Go SDK,
// that weir's examples and tests bridge in with the mcp plugin. It speaks
// MCP on stdio, or with -listen ADDR the streamable HTTP transport (with
// -token T it requires "Authorization: Bearer T").
//
// Its tools cover what a bridge must handle:
//
//	echo         read-only and idempotent (annotations say so); echoes its text
//	Lookup.Item  a case-sensitive dotted name; answers structured content
//	append       non-idempotent (no annotations): appends a line to -journal;
//	             with hold=true it then blocks until cancelled, and
//	             appends "LINE cancelled" when it is; hold_once=true
//	             blocks so only when the journal held no LINE before
//	slow         reports progress steps times, then answers
//	fail         answers isError: true
//	crash        exits the process in the middle of the call
//	picture      answers an image and a resource link
//	grow         changes the tool list while the server runs: adds grown
//	             (answers "grown") and removes fail, so clients get
//	             notifications/tools/list_changed
//	big_picture  (with -big) a 1 MiB image, as a content block or in
//	             structuredContent
//
// -hide FILE names tools (one a line) the server does not offer, read at
// start, so a test can change the tool list between launches. -env FILE
// writes the server's environment to FILE at start, one KEY=value a line,
// so a test can see what a client passed it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	listen := flag.String("listen", "", "serve streamable HTTP on this address instead of stdio")
	token := flag.String("token", "", "with -listen: the bearer token clients must send")
	journal := flag.String("journal", "", "file the append tool appends to")
	hide := flag.String("hide", "", "file naming tools not to offer, one a line")
	envOut := flag.String("env", "", "file to write the server's environment to at start")
	big := flag.Bool("big", false, "also offer big_picture, a 1 MiB image")
	flag.Parse()
	if *envOut != "" {
		if err := os.WriteFile(*envOut, []byte(strings.Join(os.Environ(), "\n")+"\n"), 0o600); err != nil {
			log.Fatal(err)
		}
	}

	srv := newServer(*journal, hidden(*hide))
	if *big {
		addBig(srv)
	}
	if *listen == "" {
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var handler http.Handler = h
	if *token != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+*token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	// The address is the first line on stdout, for whoever started us.
	fmt.Printf("listening on %s\n", ln.Addr())
	log.Fatal((&http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}

func hidden(path string) map[string]bool {
	out := map[string]bool{}
	if path == "" {
		return out
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out[l] = true
		}
	}
	return out
}

type args struct {
	Text     string `json:"text"`
	Line     string `json:"line"`
	Hold     bool   `json:"hold"`
	HoldOnce bool   `json:"hold_once"`
	Steps    int    `json:"steps"`
	Key      string `json:"key"`
}

func decode(req *mcp.CallToolRequest) (args, error) {
	var a args
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return a, err
		}
	}
	return a, nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func schema(props string) any {
	return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
}

func newServer(journal string, hide map[string]bool) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "demo-mcp", Version: "1.0.0"}, nil)
	f := false
	var mu sync.Mutex
	add := func(t *mcp.Tool, h mcp.ToolHandler) {
		if !hide[t.Name] {
			srv.AddTool(t, h)
		}
	}
	add(&mcp.Tool{Name: "grow", Description: "Adds the tool grown and removes fail.", InputSchema: schema("")},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			srv.AddTool(&mcp.Tool{Name: "grown", Description: "Added by grow.", InputSchema: schema("")},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("grown"), nil })
			srv.RemoveTools("fail")
			return text("grew"), nil
		})
	add(&mcp.Tool{Name: "echo", Description: "Echoes its text.", InputSchema: schema(`"text":{"type":"string"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, err := decode(req)
			if err != nil {
				return nil, err
			}
			return text(a.Text), nil
		})
	add(&mcp.Tool{Name: "Lookup.Item", Description: "Looks an item up; answers structured content.", InputSchema: schema(`"key":{"type":"string"}`),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &f}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, err := decode(req)
			if err != nil {
				return nil, err
			}
			res := text("found " + a.Key)
			out := map[string]any{"key": a.Key, "found": true, "idempotency_key": req.Params.Meta["weir/idempotency_key"]}
			if tp, ok := req.Params.Meta["traceparent"]; ok {
				out["traceparent"] = tp // the caller's trace (SEP-414)
			}
			if ts, ok := req.Params.Meta["tracestate"]; ok {
				out["tracestate"] = ts
			}
			res.StructuredContent = out
			return res, nil
		})
	add(&mcp.Tool{Name: "append", Description: "Appends a line to the journal: not idempotent.", InputSchema: schema(`"line":{"type":"string"},"hold":{"type":"boolean"},"hold_once":{"type":"boolean"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, err := decode(req)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			first := a.HoldOnce && !hasLine(journal, a.Line)
			n, err := appendLine(journal, a.Line)
			mu.Unlock()
			if err != nil {
				return nil, err
			}
			if a.Hold || first {
				<-ctx.Done()
				mu.Lock()
				_, _ = appendLine(journal, a.Line+" cancelled")
				mu.Unlock()
				return nil, ctx.Err()
			}
			return text(fmt.Sprintf("%d lines", n)), nil
		})
	add(&mcp.Tool{Name: "slow", Description: "Reports progress, then answers.", InputSchema: schema(`"steps":{"type":"integer"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, err := decode(req)
			if err != nil {
				return nil, err
			}
			tok := req.Params.GetProgressToken()
			for i := 1; i <= a.Steps; i++ {
				if tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(a.Steps)})
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
			return text(fmt.Sprintf("%d steps", a.Steps)), nil
		})
	add(&mcp.Tool{Name: "fail", Description: "Always fails.", InputSchema: schema(``)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the ticket system refused: quota exceeded"}}}, nil
		})
	add(&mcp.Tool{Name: "crash", Description: "Exits the server mid-call.", InputSchema: schema(``)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	add(&mcp.Tool{Name: "picture", Description: "Answers an image and a resource link.", InputSchema: schema(``),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a red dot"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nred-dot")},
				&mcp.ResourceLink{URI: "file:///srv/docs/dot.txt", Name: "dot.txt", MIMEType: "text/plain"},
			}}, nil
		})
	return srv
}

// addBig adds big_picture: a 1 MiB PNG, as an image content block or,
// with structured=true, in structuredContent (as server-filesystem's
// read_media_file answers).
func addBig(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{Name: "big_picture", Description: "Answers a 1 MiB image.", InputSchema: schema(`"structured":{"type":"boolean"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Structured bool `json:"structured"`
			}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
					return nil, err
				}
			}
			img := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0xab}, 1<<20-8)...)
			if !a.Structured {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: img}}}, nil
			}
			block := map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(img)}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "an image"}},
				StructuredContent: map[string]any{"content": []any{block}}}, nil
		})
}

// hasLine reports whether the journal at path holds line.
func hasLine(path, line string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// appendLine appends line to path durably and returns the lines it holds.
func appendLine(path, line string) (int, error) {
	if path == "" {
		return 0, fmt.Errorf("no -journal")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return 0, err
	}
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n, nil
}
