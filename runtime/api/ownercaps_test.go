package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine"
)

// TestOwnerCapsCount: each owner's count stops at the limit and goes on
// when one is given back; owners are counted apart.
func TestOwnerCapsCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
		takes []string // owners, in order
		gives []string // given back after the takes
		then  string   // taken last
		want  []bool   // the takes' answers, then the last
	}{
		{"within", 2, []string{"a", "a"}, nil, "b", []bool{true, true, true}},
		{"over", 2, []string{"a", "a", "a"}, nil, "a", []bool{true, true, false, false}},
		{"others apart", 1, []string{"a", "b", "a"}, nil, "c", []bool{true, true, false, true}},
		{"given back", 1, []string{"a", "a"}, []string{"a"}, "a", []bool{true, false, true}},
		{"given back by another", 1, []string{"a", "b"}, []string{"b"}, "a", []bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newOwnerCaps(HTTPLimits{MaxRequestsPerOwner: tc.limit})
			var got []bool
			for _, o := range tc.takes {
				_, ok := c.take(c.requests, o, c.maxRequests)
				got = append(got, ok)
			}
			for _, o := range tc.gives {
				c.give(c.requests, o)
			}
			_, ok := c.take(c.requests, tc.then, c.maxRequests)
			got = append(got, ok)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("answers %v, want %v", got, tc.want)
			}
		})
	}
	c := newOwnerCaps(HTTPLimits{})
	if c.maxRequests != DefaultMaxRequestsPerOwner || c.maxStreams != DefaultMaxStreamsPerOwner {
		t.Fatalf("defaults %d, %d", c.maxRequests, c.maxStreams)
	}
	c.take(c.streams, "a", 1)
	c.give(c.streams, "a")
	if len(c.streams) != 0 {
		t.Fatalf("an owner holding nothing is still in the map: %v", c.streams)
	}
}

// rawRequest sends a request's head (and part of its body) on a TCP
// connection of its own, left open.
func rawRequest(t *testing.T, addr, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c
}

func readStatus(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestRequestsPerOwner: an owner with max_requests_per_owner requests in
// progress (here a start whose body is still coming) is refused 429
// E_TOO_MANY_REQUESTS with Retry-After; another owner and the daemon's
// own user are not; the place comes back when the request ends.
func TestRequestsPerOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{}, WithHTTPLimits(HTTPLimits{MaxRequestsPerOwner: 1}))
	addr := strings.TrimPrefix(b.tcpURL, "http://")
	slow := rawRequest(t, addr, "POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+aliceToken+
		"\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"flow\":")
	testutil.Eventually(t, 30*time.Second, func() error {
		if n, _ := b.srv.caps.held("alice"); n != 1 {
			return fmt.Errorf("alice holds %d requests", n)
		}
		return nil
	})
	a := b.send(t, alice, "GET", "/v1/runs", nil)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "1" {
		t.Fatalf("alice's second request: %d %v %s", a.status, a.header, a.body)
	}
	if e := a.errorBody(t); e.Code != CodeTooManyRequests || !strings.Contains(e.Message, "alice already has 1 requests in progress") ||
		!strings.Contains(e.Message, "http.max_requests_per_owner") {
		t.Fatalf("refusal: %+v", e)
	}
	if a := b.send(t, bob, "GET", "/v1/runs", nil); a.status != http.StatusOK {
		t.Fatalf("bob beside alice's full share: %d %s", a.status, a.body)
	}
	if a := b.send(t, local, "GET", "/v1/runs", nil); a.status != http.StatusOK {
		t.Fatalf("the daemon's own user: %d %s", a.status, a.body)
	}
	if n, _ := b.srv.caps.held(b.me); n != 0 {
		t.Fatalf("the daemon's own user was counted: %d", n)
	}
	if _, err := io.WriteString(slow, `"echo"}`+"\n\n"); err != nil {
		t.Fatal(err)
	}
	resp := readStatus(t, slow)
	resp.Body.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		if a := b.send(t, alice, "GET", "/v1/runs", nil); a.status != http.StatusOK {
			return fmt.Errorf("alice once her start ended: %d %s", a.status, a.body)
		}
		return nil
	})
}

// TestStreamsPerOwner: a stream gives its request place back for a stream
// place, so an owner's streams do not take its requests; past
// max_streams_per_owner a stream (or a held wait) is refused 429
// E_TOO_MANY_STREAMS, another owner's is not, and the place comes back
// when the stream ends.
func TestStreamsPerOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{}, WithHTTPLimits(HTTPLimits{MaxRequestsPerOwner: 1, MaxStreamsPerOwner: 1}))
	addr := strings.TrimPrefix(b.tcpURL, "http://")
	stream := func(token, path string) (net.Conn, *http.Response) {
		c := rawRequest(t, addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+token+"\r\n\r\n")
		return c, readStatus(t, c)
	}
	held, resp := stream(aliceToken, "/v1/runs/stream")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's stream: %d", resp.StatusCode)
	}
	if r, s := b.srv.caps.held("alice"); r != 0 || s != 1 {
		t.Fatalf("alice holds %d requests, %d streams; want 0, 1", r, s)
	}
	if a := b.send(t, alice, "GET", "/v1/runs", nil); a.status != http.StatusOK {
		t.Fatalf("alice's request beside her stream: %d %s", a.status, a.body)
	}
	id := b.start(t, alice, "gate", `{}`, "")
	for _, path := range []string{"/v1/runs/stream", "/v1/runs/" + id + "/stream", "/v1/runs/" + id + "/wait?timeout=30s", "/v1/runs/" + id + "?wait=30s"} {
		_, resp := stream(aliceToken, path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" ||
			!strings.Contains(string(body), CodeTooManyStreams) || !strings.Contains(string(body), "http.max_streams_per_owner") {
			t.Fatalf("alice's second stream %s: %d %v %s", path, resp.StatusCode, resp.Header, body)
		}
	}
	if _, resp := stream(bobToken, "/v1/runs/stream"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's stream beside alice's full share: %d", resp.StatusCode)
	}
	held.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, s := b.srv.caps.held("alice"); s != 0 {
			return fmt.Errorf("alice still holds %d streams", s)
		}
		return nil
	})
	if _, resp := stream(aliceToken, "/v1/runs/"+id+"/stream"); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's stream once her first ended: %d", resp.StatusCode)
	}
}

// TestPerIPConnectionCap: on TCP the accept counts by IP address with
// max_conns_per_ip, not with the socket's max_conns_per_peer.
func TestPerIPConnectionCap(t *testing.T) {
	t.Parallel()
	l := HTTPLimits{MaxConnsPerPeer: 1, MaxConnsPerIP: 2}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) }), ConnContext, l)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(LimitListener(ln, l, os.Getuid(), nil)) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	addr := ln.Addr().String()
	tcp := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := tcp(), tcp()
	for i, c := range []net.Conn{a, b} {
		if code, body := get(t, c); code != http.StatusOK || body != "ok" {
			t.Fatalf("connection %d: %d %s", i, code, body)
		}
	}
	if msg := refused(t, tcp()); !strings.Contains(msg, "127.0.0.1 already has 2 connections open") || !strings.Contains(msg, "max_conns_per_ip") {
		t.Fatalf("refusal: %s", msg)
	}
}
