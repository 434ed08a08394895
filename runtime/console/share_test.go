package console

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api"
)

// signInDirect signs in with token through the console's handler and
// returns the session cookie.
func (b *bundle) signInDirect(t *testing.T, token string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	b.cons.ServeHTTP(rec, req)
	return rec
}

// sessionOf asks GET /session with cookie and returns the status.
func (b *bundle) sessionOf(cookie *http.Cookie) int {
	req := httptest.NewRequest("GET", "/session", nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	b.cons.ServeHTTP(rec, req)
	return rec.Code
}

// TestSignInFloodEndsNobodyElsesSession: 10,000 sign-ins by one owner end
// only that owner's oldest sessions (it keeps MaxSessionsPerOwner, the
// newest), never another owner's.
func TestSignInFloodEndsNobodyElsesSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bob := b.browser(t)
	b.signIn(t, bob, bobToken)
	first := b.signInDirect(t, aliceToken).Result().Cookies()[0]
	var last *http.Cookie
	for i := range 10000 {
		rec := b.signInDirect(t, aliceToken)
		if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 {
			t.Fatalf("alice's sign-in %d: %d %s", i, rec.Code, rec.Body)
		}
		last = rec.Result().Cookies()[0]
	}
	if resp, body := b.do(t, bob, "GET", "/session", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"owner":"bob"`) {
		t.Fatalf("bob's session after alice's 10,000 sign-ins: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do(t, bob, "GET", "/v1/runs", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's API through the console: %d %s", resp.StatusCode, body)
	}
	if code := b.sessionOf(last); code != http.StatusOK {
		t.Errorf("alice's newest session: %d", code)
	}
	if code := b.sessionOf(first); code != http.StatusUnauthorized {
		t.Errorf("alice's first session after 10,000 more: %d, want it ended", code)
	}
	b.cons.mu.Lock()
	n, alice, total := len(b.cons.byOwner["bob"]), len(b.cons.byOwner["alice"]), len(b.cons.sessions)
	b.cons.mu.Unlock()
	if n != 1 || alice != MaxSessionsPerOwner || total != MaxSessionsPerOwner+1 {
		t.Errorf("sessions kept: bob %d, alice %d, all %d; want 1, %d, %d", n, alice, total, MaxSessionsPerOwner, MaxSessionsPerOwner+1)
	}
}

// TestSessionsFullRefusesSignIn: with MaxSessions sessions held by many
// owners, a new owner's sign-in is refused (503 E_SESSIONS_FULL) and
// every session stays; once some have expired, a sign-in is kept again.
func TestSessionsFullRefusesSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	b.cons.now = func() time.Time { return now }
	bob := b.signInDirect(t, bobToken).Result().Cookies()[0]
	for i := range MaxSessions - 1 {
		// Owners of their own, at most MaxSessionsPerOwner sessions each,
		// expiring in the order they came.
		s := &session{id: fmt.Sprintf("s%05d", i), owner: fmt.Sprintf("o%d", i/MaxSessionsPerOwner), expires: now.Add(time.Duration(i+1) * time.Second)}
		if !b.cons.addSession(s) {
			t.Fatalf("session %d refused below MaxSessions", i)
		}
	}
	rec := b.signInDirect(t, aliceToken)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"code":"`+CodeSessionsFull+`"`) ||
		!strings.Contains(rec.Body.String(), "10000 sessions") || len(rec.Result().Cookies()) > 0 {
		t.Fatalf("a sign-in with the console full: %d %s", rec.Code, rec.Body)
	}
	if code := b.sessionOf(bob); code != http.StatusOK {
		t.Fatalf("bob's session after a refused sign-in: %d", code)
	}
	if len(b.cons.sessions) != MaxSessions {
		t.Fatalf("%d sessions after the refusal, want %d", len(b.cons.sessions), MaxSessions)
	}
	now = now.Add(2 * time.Second) // s00000 and s00001 have expired
	if rec := b.signInDirect(t, aliceToken); rec.Code != http.StatusSeeOther {
		t.Fatalf("a sign-in once sessions expired: %d %s", rec.Code, rec.Body)
	}
	if code := b.sessionOf(bob); code != http.StatusOK {
		t.Fatalf("bob's session after the expired were dropped: %d", code)
	}
	if len(b.cons.sessions) != MaxSessions-1 {
		t.Fatalf("%d sessions, want %d (two expired, one added)", len(b.cons.sessions), MaxSessions-1)
	}
}

// openStream sends GET path with token on a connection of its own and
// returns the status, the body's first bytes (a refusal's JSON) and the
// connection, left open.
func openStream(t *testing.T, addr, path, token string) (int, string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, token)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error(), c
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, resp.Header.Get("Content-Type"), c
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(body), c
}

// TestStreamsOfOneOwnerLeaveOthersIn: alice opens 64 run-list streams
// over TCP from the same address as bob. They take alice's own stream
// share (the ones past it are refused E_TOO_MANY_STREAMS), not the
// address's connections: bob's API (a request, a stream) and his console
// session work, and so do alice's short requests.
func TestStreamsOfOneOwnerLeaveOthersIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := api.NewHTTPServer(b.cons.api, api.ConnContext, api.HTTPLimits{})
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(api.LimitListener(ln, api.HTTPLimits{}, os.Getuid(), nil)) }()
	t.Cleanup(func() { _ = hs.Close(); <-done })
	addr := ln.Addr().String()

	open, refused := 0, 0
	for i := range 64 {
		code, what, _ := openStream(t, addr, "/v1/runs/stream", aliceToken)
		switch {
		case code == http.StatusOK && what == "text/event-stream":
			open++
		case code == http.StatusTooManyRequests && strings.HasPrefix(what, "5 ") && strings.Contains(what, api.CodeTooManyStreams) &&
			strings.Contains(what, "max_streams_per_owner"):
			refused++
		default:
			t.Fatalf("alice's stream %d: %d %s", i, code, what)
		}
	}
	if open != api.DefaultMaxStreamsPerOwner || refused != 64-open {
		t.Fatalf("alice's 64 streams: %d open, %d refused; want %d open", open, refused, api.DefaultMaxStreamsPerOwner)
	}
	tcp := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(tcp.CloseIdleConnections)
	get := func(token, path string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := tcp.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(bobToken, "/v1/runs"); code != http.StatusOK {
		t.Errorf("bob's GET /v1/runs while alice streams: %d %s", code, body)
	}
	if code, body := get(aliceToken, "/v1/runs"); code != http.StatusOK {
		t.Errorf("alice's own short request beside her streams: %d %s", code, body)
	}
	if code, what, _ := openStream(t, addr, "/v1/runs/stream", bobToken); code != http.StatusOK {
		t.Errorf("bob's stream while alice streams: %d %s", code, what)
	}
	// The console serves on the same API server: bob's session works;
	// alice's stream through it meets her share.
	bob := b.browser(t)
	b.signIn(t, bob, bobToken)
	if resp, body := b.do(t, bob, "GET", "/v1/runs", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("bob's console while alice streams: %d %s", resp.StatusCode, body)
	}
	alice := b.browser(t)
	b.signIn(t, alice, aliceToken)
	if resp, body := b.do(t, alice, "GET", "/v1/runs/stream", ""); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, api.CodeTooManyStreams) {
		t.Errorf("alice's console stream past her share: %d %s", resp.StatusCode, body)
	}
}
