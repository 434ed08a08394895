package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/host"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("http")) }

func server(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "yes")
		fmt.Fprintf(w, "hello %s", r.Header.Get("X-Who"))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s key=%s type=%s", r.Method, b, r.Header.Get("Idempotency-Key")+r.Header.Get("X-Key"), r.Header.Get("Content-Type"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("b", 4096)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	var unavailable atomic.Int64
	mux.HandleFunc("/503", func(w http.ResponseWriter, r *http.Request) {
		unavailable.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/404", http.NotFound)
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type answer struct {
	Status    int
	Headers   map[string][]string
	Body      string
	Truncated bool
}

func TestGetHeadPost(t *testing.T) {
	t.Parallel()
	s := server(t)
	p := plugintest.Start(t, "http", `{"max_body_bytes":1024}`)
	var a answer
	p.MustCall(t, "http.get", `{"url":"`+s.URL+`/hello","headers":{"X-Who":"ada"}}`, "", &a)
	if a.Status != 200 || a.Body != "hello ada" || a.Headers["X-Test"][0] != "yes" {
		t.Fatalf("get answered %+v", a)
	}
	a = answer{}
	p.MustCall(t, "http.head", `{"url":"`+s.URL+`/hello"}`, "", &a)
	if a.Status != 200 || a.Body != "" {
		t.Fatalf("head answered %+v", a)
	}
	a = answer{}
	p.MustCall(t, "http.post", `{"url":"`+s.URL+`/echo","body":"{}","content_type":"application/json"}`, "", &a)
	if a.Body != "POST {} key= type=application/json" {
		t.Fatalf("post answered %+v", a)
	}
	a = answer{}
	p.MustCall(t, "http.get", `{"url":"`+s.URL+`/big"}`, "", &a)
	if !a.Truncated || len(a.Body) != 1024 {
		t.Fatalf("big body: truncated %v, %d bytes", a.Truncated, len(a.Body))
	}
}

func TestIdempotencyDeclarations(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "http", "")
	for tool, want := range map[string]bool{"http.get": true, "http.head": true, "http.post": false, "http.put": false, "http.post_keyed": true, "http.put_keyed": true} {
		info, ok := p.Host.LookupTool(tool)
		if !ok || info.Idempotent != want {
			t.Errorf("%s: idempotent %v (found %v), want %v", tool, info.Idempotent, ok, want)
		}
	}
}

func TestKeyedSendsTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := server(t)
	p := plugintest.Start(t, "http", "")
	var a answer
	p.MustCall(t, "http.put_keyed", `{"url":"`+s.URL+`/echo","body":"x"}`, "logical-7", &a)
	if a.Body != "PUT x key=logical-7 type=" {
		t.Fatalf("put_keyed answered %q", a.Body)
	}
	p.MustCall(t, "http.post_keyed", `{"url":"`+s.URL+`/echo","body":"y","key_header":"X-Key"}`, "logical-8", &a)
	if a.Body != "POST y key=logical-8 type=" {
		t.Fatalf("post_keyed answered %q", a.Body)
	}
}

func TestBounds(t *testing.T) {
	t.Parallel()
	s := server(t)
	p := plugintest.Start(t, "http", `{"timeout_ms":200,"max_redirects":3}`)
	start := time.Now()
	err := p.Call("http.get", `{"url":"`+s.URL+`/slow"}`, "", nil)
	plugintest.WantKind(t, err, host.KindRetryable)
	if time.Since(start) > 5*time.Second {
		t.Fatalf("timeout of 200ms took %v", time.Since(start))
	}
	err = p.Call("http.get", `{"url":"`+s.URL+`/loop"}`, "", nil)
	plugintest.WantKind(t, err, host.KindPermanent)
	if !strings.Contains(err.Error(), "3 redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
	plugintest.WantKind(t, p.Call("http.get", `{"url":"ftp://example.com/"}`, "", nil), host.KindSchema)
}

func TestFailOnStatus(t *testing.T) {
	t.Parallel()
	s := server(t)
	p := plugintest.Start(t, "http", "")
	var a answer
	p.MustCall(t, "http.get", `{"url":"`+s.URL+`/503"}`, "", &a)
	if a.Status != 503 {
		t.Fatalf("status %d", a.Status)
	}
	plugintest.WantKind(t, p.Call("http.get", `{"url":"`+s.URL+`/503","fail_on_status":true}`, "", nil), host.KindRetryable)
	plugintest.WantKind(t, p.Call("http.get", `{"url":"`+s.URL+`/404","fail_on_status":true}`, "", nil), host.KindPermanent)
}

func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	s := server(t)
	p := plugintest.Start(t, "http", `{"allowed_hosts":["example.invalid"]}`)
	err := p.Call("http.get", `{"url":"`+s.URL+`/hello"}`, "", nil)
	plugintest.WantKind(t, err, host.KindPermanent)
	if !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("error %v", err)
	}
}

// A request carries the run's trace as its traceparent (and tracestate),
// unless the flow set a traceparent of its own; a call without a trace
// sends none.
func TestRequestsCarryTheRunsTrace(t *testing.T) {
	t.Parallel()
	seen := make(chan [2]string, 3)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- [2]string{r.Header.Get("Traceparent"), r.Header.Get("Tracestate")}
	}))
	t.Cleanup(s.Close)
	p := plugintest.Start(t, "http", "")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const ts = "congo=t61rcWkgMzE"
	const own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, c := range []struct {
		trace, state, input string
		want                [2]string
	}{
		{tp, ts, `{"url":"` + s.URL + `"}`, [2]string{tp, ts}},
		{tp, "", `{"url":"` + s.URL + `","headers":{"traceparent":"` + own + `"}}`, [2]string{own, ""}},
		{"", "", `{"url":"` + s.URL + `"}`, [2]string{}},
	} {
		req := host.CallRequest{Tool: "http.get", Input: json.RawMessage(c.input), IdempotencyKey: "k", Attempt: 1, TraceParent: c.trace, TraceState: c.state}
		if _, err := p.Host.Call(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got := <-seen; got != c.want {
			t.Errorf("call with trace %q %q and input %s: the server saw %q, want %q", c.trace, c.state, c.input, got, c.want)
		}
	}
}
