package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/tool/tooltest"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
)

type bundle struct {
	eng     *engine.Engine
	cons    *Console
	console *httptest.Server
}

// setup serves a console over a real API server and engine (in-memory
// store), with alice's and bob's tokens.
func setup(t *testing.T) *bundle {
	t.Helper()
	tools, err := tooltest.New("")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Config{Store: memstore.New(), Tools: tools, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Register(context.Background(), []engine.SourceFile{{Path: "w.star", Src: `flow(name = "gate", nodes = [wait("ok")])`}})
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %v %v", err, res)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(eng, nil, api.WithTokens(api.NewTokens(map[string]string{aliceToken: "alice", bobToken: "bob"})))
	cs := httptest.NewUnstartedServer(nil)
	cons := New(srv, nil)
	cs.Config = NewServer(cons)
	cs.Start()
	t.Cleanup(func() {
		cs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(ctx)
	})
	return &bundle{eng: eng, cons: cons, console: cs}
}

// browser is an HTTP client that keeps cookies and does not follow
// redirects, so the tests see them.
func (b *bundle) browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (b *bundle) do(t *testing.T, c *http.Client, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.console.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

// signIn signs c in with token and returns the session's CSRF token.
func (b *bundle) signIn(t *testing.T, c *http.Client, token string) string {
	t.Helper()
	resp, _ := b.do(t, c, "POST", "/signin", url.Values{"token": {token}, "next": {"/runs"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", b.console.URL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs" {
		t.Fatalf("sign-in answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body := b.do(t, c, "GET", "/session", "")
	var si SessionInfo
	if err := json.Unmarshal([]byte(body), &si); err != nil || si.CSRF == "" {
		t.Fatalf("session %s: %v", body, err)
	}
	return si.CSRF
}

// TestSignInCookie: a good token becomes an HttpOnly, SameSite=Strict
// session cookie; a wrong token, a sign-in from another origin and a page
// without a session get none and are sent to the sign-in; next cannot
// point off the console.
func TestSignInCookie(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.browser(t)
	resp, _ := b.do(t, c, "GET", "/runs/run_x", "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next=%2Fruns%2Frun_x" {
		t.Errorf("a page without a session: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	form := "Content-Type"
	resp, _ = b.do(t, c, "POST", "/signin", "token=wrong-token-0123456789", form, "application/x-www-form-urlencoded")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?error=token" || len(resp.Cookies()) > 0 {
		t.Errorf("a wrong token: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	resp, _ = b.do(t, c, "POST", "/signin", "token="+aliceToken, form, "application/x-www-form-urlencoded", "Origin", "http://evil.example")
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) > 0 {
		t.Errorf("a sign-in from another origin: %d %v", resp.StatusCode, resp.Cookies())
	}
	resp, _ = b.do(t, c, "POST", "/signin", "token="+aliceToken+"&next=//evil.example/x", form, "application/x-www-form-urlencoded")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs" {
		t.Errorf("next off the console: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ck := resp.Cookies()
	if len(ck) != 1 || ck[0].Name != CookieName || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/" || len(ck[0].Value) != 64 {
		t.Fatalf("session cookie %+v", ck)
	}
	resp, body := b.do(t, c, "GET", "/runs", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<main id="main">`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("a page with a session: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do(t, c, "GET", "/assets/app.js", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, "X-Weir-CSRF") {
		t.Errorf("app.js: %d", resp.StatusCode)
	}
}

// TestCSRFAndOwnership: state-changing API requests through the console
// need the session's CSRF token from the console's own origin; with it
// they act as the session's owner, and another owner's run answers like a
// missing one. Sign-out ends the session.
func TestCSRFAndOwnership(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, bob := b.browser(t), b.browser(t)
	csrf := b.signIn(t, alice, aliceToken)
	bobCSRF := b.signIn(t, bob, bobToken)

	start := `{"flow": "gate"}`
	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"no token", nil},
		{"a forged token", []string{CSRFHeader, "forged"}},
		{"bob's token", []string{CSRFHeader, bobCSRF}},
		{"another origin", []string{CSRFHeader, csrf, "Origin", "http://evil.example"}},
		{"a cross-site fetch", []string{CSRFHeader, csrf, "Sec-Fetch-Site", "cross-site"}},
	} {
		resp, body := b.do(t, alice, "POST", "/v1/runs", start, tc.hdr...)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, CodeCSRF) {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
	}
	if runs, _ := b.eng.List(context.Background(), "alice", store.RunListParams{}); len(runs) != 0 {
		t.Fatalf("refused starts made %d runs", len(runs))
	}
	resp, body := b.do(t, alice, "POST", "/v1/runs", start, CSRFHeader, csrf, "Origin", b.console.URL)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a start with the CSRF token: %d %s", resp.StatusCode, body)
	}
	var sr apitypes.StartResult
	_ = json.Unmarshal([]byte(body), &sr)

	_, mine := b.do(t, alice, "GET", "/v1/runs/"+sr.RunID, "")
	if !strings.Contains(mine, `"owner":"alice"`) {
		t.Errorf("alice's run: %s", mine)
	}
	respTheirs, theirs := b.do(t, bob, "GET", "/v1/runs/"+sr.RunID, "")
	respMissing, missing := b.do(t, bob, "GET", "/v1/runs/run_missing", "")
	if respTheirs.StatusCode != http.StatusNotFound || respMissing.StatusCode != http.StatusNotFound ||
		strings.ReplaceAll(theirs, sr.RunID, "X") != strings.ReplaceAll(missing, "run_missing", "X") {
		t.Errorf("another owner's run %d %s; a missing one %d %s", respTheirs.StatusCode, theirs, respMissing.StatusCode, missing)
	}
	if resp, body := b.do(t, bob, "POST", "/v1/runs/"+sr.RunID+"/cancel", "", CSRFHeader, bobCSRF); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob cancels alice's run: %d %s", resp.StatusCode, body)
	}

	// Sign-out needs the CSRF token too, then the session is gone.
	if resp, _ := b.do(t, alice, "POST", "/signout", "csrf=forged", "Content-Type", "application/x-www-form-urlencoded"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token: %d", resp.StatusCode)
	}
	if resp, _ := b.do(t, alice, "POST", "/signout", "csrf="+csrf, "Content-Type", "application/x-www-form-urlencoded"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-out: %d", resp.StatusCode)
	}
	if resp, body := b.do(t, alice, "GET", "/v1/runs", ""); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, CodeSignIn) {
		t.Errorf("the API after sign-out: %d %s", resp.StatusCode, body)
	}
}

// next after a sign-in is followed only if it is a clean absolute path of
// the console: a browser strips tab and newline from a URL and reads a
// backslash as a slash, so "/\t/evil.example" was "//evil.example" to it.
func TestSignInNextStaysOnConsole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for next, want := range map[string]string{
		"/\t/evil.example":       "/runs",
		"/\n/evil.example":       "/runs",
		"/\r/evil.example":       "/runs",
		"\t//evil.example":       "/runs",
		"/ /evil.example":        "/runs",
		"/\\evil.example":        "/runs",
		"\\\\evil.example":       "/runs",
		"//evil.example/x":       "/runs",
		"/\x00/evil.example":     "/runs",
		"/\x7f/evil.example":     "/runs",
		"https://evil.example/":  "/runs",
		"javascript:alert(1)":    "/runs",
		"runs":                   "/runs",
		"":                       "/runs",
		"/runs/run_x":            "/runs/run_x",
		"/runs?phase=failed&x=1": "/runs?phase=failed&x=1",
		"/%09/evil.example":      "/%09/evil.example", // an escaped tab is a path segment of the console
		"/flows/a:b":             "/flows/a:b",
	} {
		c := b.browser(t)
		resp, _ := b.do(t, c, "POST", "/signin", url.Values{"token": {aliceToken}, "next": {next}}.Encode(),
			"Content-Type", "application/x-www-form-urlencoded")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("next %q: %d to %q, want %q", next, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}

// A request to the console on its loopback listener must name it by a
// loopback Host: a DNS-rebound page on evil.example reaches 127.0.0.1 with
// "Host: evil.example" and is refused before anything is served.
func TestConsoleRefusesForeignHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	port := strings.TrimPrefix(b.console.URL, "http://127.0.0.1")
	for host, want := range map[string]int{
		"evil.example" + port:    http.StatusForbidden,
		"evil.example":           http.StatusForbidden,
		"127.0.0.1.evil.example": http.StatusForbidden,
		"localhost.evil":         http.StatusForbidden,
		"127.0.0.1" + port:       http.StatusSeeOther,
		"localhost" + port:       http.StatusSeeOther,
		"LOCALHOST" + port:       http.StatusSeeOther,
		"[::1]" + port:           http.StatusSeeOther,
		"127.1.2.3":              http.StatusSeeOther,
	} {
		for _, path := range []string{"/runs", "/signin"} {
			req, err := http.NewRequest("POST", b.console.URL+path, strings.NewReader("token="+aliceToken))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := b.browser(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			w := want
			if path == "/runs" && want != http.StatusForbidden {
				w = http.StatusMethodNotAllowed // served: the page takes GET
			}
			if resp.StatusCode != w || (w == http.StatusForbidden && (!strings.Contains(string(body), `"code":"E_HOST"`) || len(resp.Cookies()) > 0)) {
				t.Errorf("%s with Host %q: %d %s, want %d", path, host, resp.StatusCode, body, w)
			}
		}
	}
}

// Wrong sign-ins are limited per source address (SignInBurst, then one
// per SignInInterval) and for everyone together (SignInGlobalBurst):
// past the limit a sign-in, right or wrong, is refused with 429
// E_SIGN_IN_LIMIT and Retry-After before its token is looked at; another
// address, and sessions already open, are unaffected. The console's clock
// is the test's.
func TestSignInRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	now := time.Now() // the start of the fake clock: the cookie jar drops cookies that expired in wall time
	b.cons.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	signIn := func(from, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = from
		rec := httptest.NewRecorder()
		b.cons.ServeHTTP(rec, req)
		return rec
	}
	wrong := func(i int) string { return fmt.Sprintf("wrong-token-%012d", i) }
	limited := func(rec *httptest.ResponseRecorder, retry string) bool {
		return rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == retry &&
			strings.Contains(rec.Body.String(), `"code":"E_SIGN_IN_LIMIT"`) && len(rec.Result().Cookies()) == 0
	}
	// The finding: 300 wrong tokens at once from one address.
	refused := 0
	for i := range 300 {
		rec := signIn("192.0.2.1:4000", wrong(i))
		switch {
		case limited(rec, "10"):
			refused++
		case rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/signin?error=token":
			t.Fatalf("wrong sign-in %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	if refused != 300-SignInBurst {
		t.Fatalf("%d of 300 wrong sign-ins were looked at, want %d", 300-refused, SignInBurst)
	}
	if rec := signIn("192.0.2.1:4001", aliceToken); !limited(rec, "10") {
		t.Fatalf("the right token past the limit: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if rec := signIn("192.0.2.2:4000", aliceToken); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/runs" {
		t.Fatalf("another address: %d %s", rec.Code, rec.Body)
	}
	advance(SignInInterval - time.Second)
	if rec := signIn("192.0.2.1:4000", aliceToken); !limited(rec, "1") {
		t.Fatalf("a second early: %d %v", rec.Code, rec.Header())
	}
	advance(time.Second)
	if rec := signIn("192.0.2.1:4000", wrong(0)); rec.Code != http.StatusSeeOther {
		t.Fatalf("one more after SignInInterval: %d", rec.Code)
	}
	if rec := signIn("192.0.2.1:4000", aliceToken); !limited(rec, "10") {
		t.Fatalf("that one spent: %d", rec.Code)
	}
	advance(SignInInterval)
	if rec := signIn("192.0.2.1:4000", aliceToken); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/runs" {
		t.Fatalf("the right token once allowed: %d %s", rec.Code, rec.Body)
	}

	// Spread over many addresses, the guesses meet the global limit.
	advance(time.Hour)
	c := b.browser(t)
	b.signIn(t, c, bobToken)
	for i := range SignInGlobalBurst {
		if rec := signIn(fmt.Sprintf("198.51.100.%d:1", i), wrong(i)); rec.Code != http.StatusSeeOther {
			t.Fatalf("spread wrong sign-in %d: %d", i, rec.Code)
		}
	}
	if rec := signIn("203.0.113.9:1", aliceToken); !limited(rec, "1") {
		t.Fatalf("past the global limit: %d %v", rec.Code, rec.Header())
	}
	if resp, body := b.do(t, c, "GET", "/session", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"owner":"bob"`) {
		t.Fatalf("an open session past the limit: %d %s", resp.StatusCode, body)
	}
	advance(SignInGlobalInterval)
	if rec := signIn("203.0.113.9:1", aliceToken); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/runs" {
		t.Fatalf("after SignInGlobalInterval: %d %s", rec.Code, rec.Body)
	}
}

// TestForkThroughTheConsole: the run page's fork and lineage go through
// the console as every API request does: a fork needs the session's
// CSRF token and is refused whole without it, is made as the session's
// owner (another owner's run answers like a missing one), and its
// refusal reaches the page with the API's code and message.
func TestForkThroughTheConsole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, bob := b.browser(t), b.browser(t)
	csrf := b.signIn(t, alice, aliceToken)
	bobCSRF := b.signIn(t, bob, bobToken)
	own := []string{CSRFHeader, csrf, "Origin", b.console.URL}
	resp, body := b.do(t, alice, "POST", "/v1/runs", `{"flow": "gate"}`, own...)
	var sr apitypes.StartResult
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(body), &sr) != nil {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, body := b.do(t, alice, "POST", "/v1/runs/"+sr.RunID+"/waits/ok@1/approve", `{}`, own...)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("approve: %d %s", resp.StatusCode, body)
		}
		return nil
	})
	lineage := func() []apitypes.Run {
		t.Helper()
		resp, body := b.do(t, alice, "GET", "/v1/runs/"+sr.RunID+"/lineage", "")
		var runs []apitypes.Run
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &runs) != nil {
			t.Fatalf("lineage: %d %s", resp.StatusCode, body)
		}
		return runs
	}
	fork := `{"from": "ok@1", "reason": "again"}`
	if resp, body := b.do(t, alice, "POST", "/v1/runs/"+sr.RunID+"/fork", fork); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, CodeCSRF) {
		t.Errorf("a fork without the CSRF token: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do(t, bob, "POST", "/v1/runs/"+sr.RunID+"/fork", fork, CSRFHeader, bobCSRF); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob forks alice's run: %d %s", resp.StatusCode, body)
	}
	if runs := lineage(); len(runs) != 1 {
		t.Fatalf("refused forks made runs: %+v", runs)
	}
	resp, body = b.do(t, alice, "POST", "/v1/runs/"+sr.RunID+"/fork", `{"from": "nowhere@1"}`, own...)
	var refusal struct{ Code, Message string }
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &refusal) != nil || refusal.Code != apitypes.CodeForkPoint ||
		!strings.Contains(refusal.Message, "nowhere") {
		t.Errorf("a fork from no node: %d %s", resp.StatusCode, body)
	}

	resp, body = b.do(t, alice, "POST", "/v1/runs/"+sr.RunID+"/fork", fork, own...)
	var fr apitypes.ForkResult
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(body), &fr) != nil || fr.ForkedFrom.RunID != sr.RunID {
		t.Fatalf("a fork with the CSRF token: %d %s", resp.StatusCode, body)
	}
	runs := lineage()
	if len(runs) != 2 || runs[0].ID != sr.RunID || runs[1].ID != fr.RunID || runs[1].Owner != "alice" ||
		runs[1].ForkedFrom == nil || *runs[1].ForkedFrom != (apitypes.ForkRef{RunID: sr.RunID, Node: "ok", Visit: 1}) {
		t.Errorf("lineage after the fork: %+v", runs)
	}
}

// TestSignOutEndsTheSessionsStreams: a page's run stream (asked for the
// model turns' text too) and its run-list stream end when their session
// signs out, though the run goes on; another session of the same owner
// keeps its own.
func TestSignOutEndsTheSessionsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	page, other := b.browser(t), b.browser(t)
	csrf := b.signIn(t, page, aliceToken)
	b.signIn(t, other, aliceToken)
	res, err := b.eng.Submit(context.Background(), engine.StartRequest{Owner: "alice", Flow: "gate"})
	if err != nil {
		t.Fatal(err)
	}
	// open starts a stream of c and returns it once its first message
	// came, and a channel closed when it ends.
	open := func(c *http.Client, path string) chan struct{} {
		t.Helper()
		resp, err := c.Get(b.console.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		r := bufio.NewReader(resp.Body)
		if line, err := r.ReadString('\n'); resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(line, "id: ") && !strings.HasPrefix(line, "event: ") {
			t.Fatalf("%s: %d %q %v", path, resp.StatusCode, line, err)
		}
		ended := make(chan struct{})
		go func() { defer close(ended); _, _ = io.Copy(io.Discard, r) }()
		return ended
	}
	run := open(page, "/v1/runs/"+res.RunID+"/stream?deltas=1")
	list := open(page, "/v1/runs/stream")
	kept := open(other, "/v1/runs/"+res.RunID+"/stream?deltas=1")
	if resp, _ := b.do(t, page, "POST", "/signout", "csrf="+csrf, "Content-Type", "application/x-www-form-urlencoded"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	for name, ended := range map[string]chan struct{}{"the run's stream": run, "the run list's stream": list} {
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s goes on after its session signed out", name)
		}
	}
	select {
	case <-kept:
		t.Fatal("the other session's stream ended with the signed-out one")
	default:
	}
	if r, err := b.eng.Get(context.Background(), "alice", res.RunID); err != nil || r.Phase.Terminal() {
		t.Fatalf("the run after sign-out: %+v %v", r, err)
	}
}
