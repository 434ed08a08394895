package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/internal/hostguard"
)

// Limits of the console's sessions and sign-in.
const (
	// SessionTTL is how long a session lasts after sign-in; then the
	// person signs in again.
	SessionTTL = 12 * time.Hour
	// MaxSessions bounds the sessions kept in memory, everyone's
	// together. A sign-in beyond it is refused (503 E_SESSIONS_FULL)
	// rather than ending another owner's session; expired sessions are
	// dropped first.
	MaxSessions = 10000
	// MaxSessionsPerOwner bounds one owner's sessions: signing in beyond
	// it ends that owner's oldest session, nobody else's. With it, filling
	// MaxSessions takes MaxSessions/MaxSessionsPerOwner owners.
	MaxSessionsPerOwner = 32
	// MaxSignInBody bounds the sign-in form.
	MaxSignInBody = 4 << 10
	// SignInBurst wrong sign-ins are allowed from one source address,
	// then one more per SignInInterval: a token of 16 or more random
	// characters cannot be guessed at 6 a minute. A sign-in past the
	// limit, right or wrong, is refused with 429 and Retry-After before
	// its token is looked at.
	SignInBurst    = 10
	SignInInterval = 10 * time.Second
	// SignInGlobalBurst and SignInGlobalInterval bound the wrong sign-ins
	// of all addresses together, for guesses spread over many addresses:
	// a wrong token names no owner, so no per-owner count can see them.
	// Spending it stops new sign-ins only; sessions and the API's tokens
	// work on.
	SignInGlobalBurst    = 100
	SignInGlobalInterval = time.Second
	// maxSignInSources bounds the addresses whose wrong sign-ins are
	// remembered; beyond it, those whose allowance is full are forgotten.
	maxSignInSources = 10000
)

// Names a page and a test rely on.
const (
	// CookieName is the session cookie's name.
	CookieName = "weir_session"
	// CSRFHeader carries the session's CSRF token on every
	// state-changing request.
	CSRFHeader = "X-Weir-CSRF"
	// CodeCSRF refuses a state-changing request without the session's
	// CSRF token, or from another origin.
	CodeCSRF = "E_CSRF"
	// CodeSignIn refuses a request that needs a session and has none.
	CodeSignIn = "E_SIGN_IN"
	// CodeSignInLimit refuses a sign-in past the wrong sign-ins allowed
	// (429, with Retry-After).
	CodeSignInLimit = "E_SIGN_IN_LIMIT"
	// CodeSessionsFull refuses a sign-in while the console holds
	// MaxSessions sessions (503): the sessions of others are not ended to
	// make room.
	CodeSessionsFull = "E_SESSIONS_FULL"
)

//go:embed assets
var assets embed.FS

// Console is the console's HTTP handler. Serve it on its own listener.
type Console struct {
	api http.Handler
	log hclog.Logger
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]*session
	byOwner  map[string][]*session // each owner's sessions, oldest first
	failed   signInLimit
}

type session struct {
	id      string
	token   string // the bearer token signed in with; the API checks it on every request
	owner   string
	csrf    string
	expires time.Time
	// ended ends with the session (sign-out, or the owner's newer
	// sign-ins ending it), and with it the session's requests in flight:
	// a page's streams do not outlive the session they were opened in.
	ended context.Context
	end   context.CancelFunc
}

// newSession is a session of owner, signed in with token, until expires.
func newSession(token, owner string, expires time.Time) *session {
	s := &session{id: randomHex(), token: token, owner: owner, csrf: randomHex(), expires: expires}
	s.ended, s.end = context.WithCancel(context.Background())
	return s
}

// New returns a console over the API server apiHandler.
func New(apiHandler http.Handler, log hclog.Logger) *Console {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Console{api: apiHandler, log: log, now: time.Now, sessions: map[string]*session{}, byOwner: map[string][]*session{}}
}

// The pages: each serves the same document, whose script draws the page
// its path names.
var pages = []string{"/runs", "/runs/{id}", "/flows", "/flows/{name}", "/deadletters", "/schedules", "/events", "/status"}

// ServeHTTP routes the console's requests.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := hostguard.Check(r); err != nil {
		writeError(w, http.StatusForbidden, hostguard.Code, err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	path := r.URL.Path
	switch {
	case strings.HasPrefix(path, "/"+apitypes.Version+"/"):
		c.proxy(w, r)
	case strings.HasPrefix(path, "/assets/"):
		c.asset(w, r)
	case path == "/signin":
		c.signIn(w, r)
	case path == "/signout":
		c.signOut(w, r)
	case path == "/session":
		c.sessionInfo(w, r)
	case path == "/":
		http.Redirect(w, r, "/runs", http.StatusSeeOther)
	case isPage(path):
		c.page(w, r)
	default:
		http.NotFound(w, r)
	}
}

func isPage(path string) bool {
	for _, p := range pages {
		prefix, param := strings.CutSuffix(p, "{id}")
		if !param {
			prefix, param = strings.CutSuffix(p, "{name}")
		}
		if param {
			if rest, ok := strings.CutPrefix(path, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

func (c *Console) asset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	sub, _ := fs.Sub(assets, "assets")
	w.Header().Set("Cache-Control", "no-cache")
	http.StripPrefix("/assets/", http.FileServer(http.FS(sub))).ServeHTTP(w, r)
}

// page serves the console's document to a signed-in person, and sends
// anyone else to the sign-in.
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if c.session(r) == nil {
		http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	c.document(w, "app.html")
}

func (c *Console) document(w http.ResponseWriter, name string) {
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// session returns the request's live session, or nil.
func (c *Console) session(r *http.Request) *session {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s == nil {
		return nil
	}
	if !c.now().Before(s.expires) {
		c.dropLocked(s)
		return nil
	}
	return s
}

// sameOrigin refuses a request a browser says comes from another site:
// its Origin (sent with every cross-origin and every POST request) must be
// the console's own, and its Sec-Fetch-Site, when sent, same-origin.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkCSRF admits a state-changing request only with the session's CSRF
// token (header, or the form field csrf) from the console's own origin.
func checkCSRF(r *http.Request, s *session, formToken string) bool {
	if !sameOrigin(r) {
		return false
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		got = formToken
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg, "class": apitypes.ClassProtocol})
}

// proxy hands an API request of a page to the API server as the session's
// bearer token: the API establishes the caller and applies its ownership
// rules exactly as for any TCP client. The request ends if the session
// does: a run's stream (and the model turns' text it sends) stops at
// sign-out, not at its own end.
func (c *Console) proxy(w http.ResponseWriter, r *http.Request) {
	s := c.session(r)
	if s == nil {
		writeError(w, http.StatusUnauthorized, CodeSignIn, "sign in to the console first")
		return
	}
	if !safeMethod(r.Method) && !checkCSRF(r, s, "") {
		writeError(w, http.StatusForbidden, CodeCSRF, "this request needs the session's CSRF token in the "+CSRFHeader+" header, from the console's own pages")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if s.ended != nil {
		defer context.AfterFunc(s.ended, cancel)()
	}
	r2 := r.Clone(api.BearerContext(ctx))
	r2.Header.Del("Cookie")
	r2.Header.Set("Authorization", "Bearer "+s.token)
	c.api.ServeHTTP(w, r2)
}

// signIn serves the sign-in form (GET) and turns a token into a session
// (POST).
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.document(w, "signin.html")
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !sameOrigin(r) { // a sign-in forged by another site would sign the victim in as the forger
		writeError(w, http.StatusForbidden, CodeCSRF, "sign in from the console's own page")
		return
	}
	src := sourceOf(r)
	if wait := c.failed.wait(src, c.now()); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.log.Warn("console sign-in refused: too many wrong sign-ins", "remote", r.RemoteAddr)
		writeError(w, http.StatusTooManyRequests, CodeSignInLimit,
			fmt.Sprintf("too many wrong sign-ins from this address or from everyone; try again in %d s", secs))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxSignInBody)
	if err := r.ParseForm(); err != nil {
		http.Redirect(w, r, "/signin?error=form", http.StatusSeeOther)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	owner, ok := c.ownerOf(r, token)
	if !ok {
		c.failed.fail(src, c.now())
		c.log.Warn("console sign-in refused", "remote", r.RemoteAddr)
		http.Redirect(w, r, "/signin?error=token", http.StatusSeeOther)
		return
	}
	s := newSession(token, owner, c.now().Add(SessionTTL))
	if !c.addSession(s) {
		c.log.Warn("console sign-in refused: the console holds the most sessions it keeps", "owner", owner, "sessions", MaxSessions)
		writeError(w, http.StatusServiceUnavailable, CodeSessionsFull,
			fmt.Sprintf("the console already holds %d sessions, the most it keeps; sign-ins are refused until some end (sign out elsewhere, or ask the operator)", MaxSessions))
		return
	}
	c.log.Info("console sign-in", "owner", owner, "remote", r.RemoteAddr)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, Expires: s.expires})
	http.Redirect(w, r, localPath(r.PostForm.Get("next")), http.StatusSeeOther)
}

// localPath is next if it is a clean absolute path of the console (with a
// query, perhaps), else "/runs". Browsers strip tab, newline and carriage
// return from a URL and read a backslash as a slash, so "/\t/evil.example"
// is "//evil.example" to them, another site: any such byte, white space
// and other controls included, refuses next, and what is left must parse
// as a path with no scheme, host or user, not starting "//".
func localPath(next string) string {
	const fallback = "/runs"
	for i := 0; i < len(next); i++ {
		if b := next[i]; b <= ' ' || b == 0x7f || b == '\\' {
			return fallback
		}
	}
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return fallback
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return fallback
	}
	return next
}

// sourceOf is the address a sign-in comes from, without its port.
func sourceOf(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// signInLimit counts wrong sign-ins in token buckets: one per source
// address and one for everyone.
type signInLimit struct {
	mu      sync.Mutex
	sources map[string]*bucket
	all     bucket
}

type bucket struct {
	spent float64 // tokens spent, regained with time
	at    time.Time
}

// regain gives back what the time since b.at regains at one per interval.
func (b *bucket) regain(now time.Time, interval time.Duration) {
	if d := now.Sub(b.at); d > 0 {
		b.spent = max(0, b.spent-float64(d)/float64(interval))
	}
	b.at = now
}

// waitFor is how long until b allows one more, 0 if it does now.
func (b *bucket) waitFor(burst int, interval time.Duration) time.Duration {
	if over := b.spent - float64(burst-1); over > 0 {
		return time.Duration(over * float64(interval))
	}
	return 0
}

// wait is how long src must wait before its next sign-in is looked at.
func (l *signInLimit) wait(src string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.regain(now, SignInGlobalInterval)
	w := l.all.waitFor(SignInGlobalBurst, SignInGlobalInterval)
	if b := l.sources[src]; b != nil {
		b.regain(now, SignInInterval)
		w = max(w, b.waitFor(SignInBurst, SignInInterval))
	}
	return w
}

// fail counts a wrong sign-in of src.
func (l *signInLimit) fail(src string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources == nil {
		l.sources = map[string]*bucket{}
	}
	b := l.sources[src]
	if b == nil {
		if len(l.sources) >= maxSignInSources {
			for k, o := range l.sources {
				if o.regain(now, SignInInterval); o.spent == 0 {
					delete(l.sources, k)
				}
			}
		}
		b = &bucket{at: now}
		l.sources[src] = b
	}
	b.regain(now, SignInInterval)
	b.spent++
	l.all.regain(now, SignInGlobalInterval)
	l.all.spent++
}

// ownerOf asks the API who token is: the API is the one judge of tokens,
// and a token removed by a config reload stops working at once.
func (c *Console) ownerOf(r *http.Request, token string) (string, bool) {
	if token == "" || len(token) > 1024 {
		return "", false
	}
	probe, err := http.NewRequestWithContext(api.BearerContext(r.Context()), http.MethodGet, "/"+apitypes.Version+"/health", nil)
	if err != nil {
		return "", false
	}
	probe.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	c.api.ServeHTTP(rec, probe)
	if rec.Code != http.StatusOK && rec.Code != http.StatusServiceUnavailable {
		return "", false
	}
	var st apitypes.Status
	if json.Unmarshal(rec.Body.Bytes(), &st) != nil || st.Caller == nil || st.Caller.Owner == "" {
		return "", false
	}
	return st.Caller.Owner, true
}

// addSession keeps s: it ends the oldest session of s's owner when the
// owner has MaxSessionsPerOwner, and refuses s (false) when the console
// holds MaxSessions sessions of others, once the expired ones are gone.
func (c *Console) addSession(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if own := c.byOwner[s.owner]; len(own) >= MaxSessionsPerOwner {
		c.dropLocked(own[0])
	}
	if len(c.sessions) >= MaxSessions {
		now := c.now()
		for _, o := range c.sessions {
			if !now.Before(o.expires) {
				c.dropLocked(o)
			}
		}
		if len(c.sessions) >= MaxSessions {
			return false
		}
	}
	c.sessions[s.id] = s
	c.byOwner[s.owner] = append(c.byOwner[s.owner], s)
	return true
}

// dropLocked ends session s.
func (c *Console) dropLocked(s *session) {
	if c.sessions[s.id] != s {
		return
	}
	delete(c.sessions, s.id)
	if s.end != nil {
		s.end()
	}
	own := c.byOwner[s.owner]
	for i, o := range own {
		if o == s {
			own = append(own[:i:i], own[i+1:]...)
			break
		}
	}
	if len(own) == 0 {
		delete(c.byOwner, s.owner)
	} else {
		c.byOwner[s.owner] = own
	}
}

// signOut ends the session (POST, with its CSRF token).
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s := c.session(r)
	if s == nil {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxSignInBody)
	_ = r.ParseForm()
	if !checkCSRF(r, s, r.PostForm.Get("csrf")) {
		writeError(w, http.StatusForbidden, CodeCSRF, "sign out from the console's own page")
		return
	}
	c.mu.Lock()
	c.dropLocked(s)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// SessionInfo answers GET /session: who is signed in, and the CSRF token
// the page sends with its state-changing requests. Another site cannot
// read it: the answer carries no CORS header.
type SessionInfo struct {
	Owner string `json:"owner"`
	CSRF  string `json:"csrf"`
}

func (c *Console) sessionInfo(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s := c.session(r)
	if s == nil {
		writeError(w, http.StatusUnauthorized, CodeSignIn, "sign in to the console first")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(SessionInfo{Owner: s.owner, CSRF: s.csrf})
}

func randomHex() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(errors.New("console: no randomness: " + err.Error()))
	}
	return hex.EncodeToString(b[:])
}

// Deadlines of the console's HTTP server. Requests end within
// WriteTimeout, except the streams (a run's events, the run list), which
// set their own bound through http.ResponseController.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 2 * time.Minute
)

// NewServer returns the HTTP server to serve c on: its deadlines set, and
// each connection marked for bearer identification (api.ConnContext), so
// that only the session's token says who a request is from; its streams
// end when it shuts down. A tls block
// shared with the tcp listener will set TLSConfig here.
func NewServer(c *Console) *http.Server {
	s := &http.Server{Handler: c, ConnContext: api.ConnContext,
		ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout, WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout}
	api.EndStreamsOnShutdown(s)
	return s
}
