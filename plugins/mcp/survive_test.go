package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
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
			b.srv.kill()
			te := toolErr(t, "the call the server died in", <-errc, tool.KindUnknown, CodeServerGone)
			if !strings.Contains(te.Message, "after it was sent") {
				t.Errorf("message %q", te.Message)
			}
			b.srv.restart()
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
	b.srv.kill()
	_, err := b.call(ctx, "mcp.demo-append", `{"line":"while down"}`, nil)
	toolErr(t, "a call while the server is down", err, tool.KindNotSent, CodeUnavailable)

	b.srv.restart()
	if out, err := b.call(ctx, "mcp.demo-append", `{"line":"two"}`, nil); err != nil || out != `"2 lines"` {
		t.Fatalf("first call after the restart: %s %v", out, err)
	}
	if l := b.journalLines(t); strings.Join(l, ",") != "one,two" {
		t.Errorf("journal %q, want each call once and nothing of the call made while down", l)
	}
}
