package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/internal/hostguard"
)

// Limits of the HTTP transport.
const (
	// maxTokens bounds the tokens whose servers are kept at once; beyond
	// it the least recently verified is forgotten (its next session gets
	// a new server; nothing is lost).
	maxTokens = 256
	// verifyEvery is how often a token is checked with the daemon again
	// (a reload may revoke it; every daemon request checks it anyway).
	verifyEvery = time.Minute
	// SessionIdle closes an HTTP session that sent nothing for this long.
	SessionIdle = 30 * time.Minute
)

// Handler serves the streamable HTTP transport. Every request must carry
// "Authorization: Bearer TOKEN" with a token of the daemon's TCP
// listener: dial returns a daemon client that sends it, so a token's
// owner is the caller and sees only its own runs. A session is bound to
// the token that opened it. A request on a loopback listener must name it
// by a loopback Host (hostguard, the check the console makes too: DNS
// rebinding), before its token is looked at; the SDK's own localhost
// protection stays on behind it.
//
// Each token's server reads the daemon's flows every o.Watch, so that a
// flow registered meanwhile reaches its sessions as
// notifications/tools/list_changed, as on stdio. With o.Stateless there
// are no sessions: the token is checked with the daemon at every request.
// Close stops the watches.
func Handler(dial func(token string) Daemon, o Options) *HTTPHandler {
	ctx, stop := context.WithCancel(context.Background())
	h := &HTTPHandler{dial: dial, o: o, tokens: map[string]*tokenEntry{}, ctx: ctx, stop: stop}
	h.mcp = mcp.NewStreamableHTTPHandler(h.serverFor, &mcp.StreamableHTTPOptions{
		SessionTimeout: SessionIdle, Logger: o.Logger, Stateless: o.Stateless,
		// A client that cancels a 2026-07-28 call closes its POST: the
		// call's handler stops following (the run goes on).
		PropagateRequestCancellation: true,
	})
	return h
}

// HTTPHandler serves MCP's streamable HTTP transport (see Handler).
type HTTPHandler struct {
	dial func(token string) Daemon
	o    Options
	mcp  *mcp.StreamableHTTPHandler
	ctx  context.Context // the watches' lifetime
	stop context.CancelFunc

	mu     sync.Mutex
	tokens map[string]*tokenEntry // token hash → its server
}

type tokenEntry struct {
	srv      *Server
	verified time.Time
	stop     context.CancelFunc // its watch
}

// Close stops every token's watch; sessions end with their connections.
func (h *HTTPHandler) Close() {
	h.stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, e := range h.tokens {
		e.stop()
		delete(h.tokens, k)
	}
}

// tokenKey is the hash a token is known by (never the token itself).
func tokenKey(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:12])
}

func bearerToken(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(tok)
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := hostguard.Check(r); err != nil {
		http.Error(w, hostguard.Code+": "+err.Error(), http.StatusForbidden)
		return
	}
	tok := bearerToken(r)
	if tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
		http.Error(w, "E_IDENTITY: send Authorization: Bearer TOKEN with a token of the weir daemon's TCP listener", http.StatusUnauthorized)
		return
	}
	key := tokenKey(tok)
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && !h.o.Stateless && !strings.HasPrefix(sid, key+"-") {
		// Another token's session: as if it did not exist.
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	ok, err := h.verify(r.Context(), tok, key)
	if err != nil {
		http.Error(w, apitypes.CodeStorage+": the weir daemon did not answer", http.StatusServiceUnavailable)
		return
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="weir", error="invalid_token"`)
		http.Error(w, "E_IDENTITY: the weir daemon refuses this token", http.StatusUnauthorized)
		return
	}
	h.mcp.ServeHTTP(w, r)
}

// verify checks the token with the daemon (at most every verifyEvery;
// at every request when stateless) and makes its server. ok is false
// when the daemon refuses the token.
func (h *HTTPHandler) verify(ctx context.Context, tok, key string) (ok bool, err error) {
	h.mu.Lock()
	e := h.tokens[key]
	h.mu.Unlock()
	if e != nil && !h.o.Stateless && time.Since(e.verified) < verifyEvery {
		return true, nil
	}
	d := h.dial(tok)
	if _, err := d.FlowList(ctx); err != nil {
		var ae *client.Error
		if errors.As(err, &ae) && (ae.HTTPStatus == http.StatusUnauthorized || ae.Code == apitypes.CodeIdentity) {
			return false, nil
		}
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e = h.tokens[key]; e != nil {
		e.verified = time.Now()
		return true, nil
	}
	if len(h.tokens) >= maxTokens {
		var oldest string
		for k, v := range h.tokens {
			if oldest == "" || v.verified.Before(h.tokens[oldest].verified) {
				oldest = k
			}
		}
		h.tokens[oldest].stop()
		delete(h.tokens, oldest)
	}
	o := h.o
	o.sessionID = func() string {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		return key + "-" + hex.EncodeToString(b)
	}
	srv := New(d, o)
	// Offer the flows at once (tools/list reads them again): a client
	// that calls a tool it already knows need not list first.
	_ = srv.Refresh(ctx)
	wctx, stop := context.WithCancel(h.ctx)
	go srv.watch(wctx)
	h.tokens[key] = &tokenEntry{srv: srv, verified: time.Now(), stop: stop}
	return true, nil
}

// serverFor is the SDK's getServer: the server of the request's token,
// made by verify just before.
func (h *HTTPHandler) serverFor(r *http.Request) *mcp.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.tokens[tokenKey(bearerToken(r))]; e != nil {
		return e.srv.MCP()
	}
	return nil
}
