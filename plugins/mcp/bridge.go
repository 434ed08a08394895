package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/dedupe"
	"github.com/weirhq/weir/sdk/wire"
)

// Limits of what the bridge takes from a server.
const (
	// connectTimeout bounds connecting to every server and listing its
	// tools at launch (in parallel); weir's host gives a launch 10s.
	connectTimeout = 8 * time.Second
	// maxToolsPerServer is the most tools one server may offer.
	maxToolsPerServer = 256
	// maxSchemaBytes bounds one tool's input or output schema.
	maxSchemaBytes = 64 << 10
	// maxDescription bounds a tool's description; longer ones are cut.
	maxDescription = 4 << 10
	// maxErrorText bounds the text of an isError result kept in the error.
	maxErrorText = 4 << 10
)

// Error codes the bridge gives its tools' failures (sdk.Error.Code).
const (
	// CodeToolError: the server answered isError: true. Permanent: the
	// call completed, with an error.
	CodeToolError = "E_MCP_TOOL_ERROR"
	// CodeServerError: the server answered a JSON-RPC error (bad
	// arguments, a tool it no longer offers). Permanent.
	CodeServerError = "E_MCP_SERVER_ERROR"
	// CodeServerGone: the call was sent and the connection ended before
	// its answer (the server died or hung up). Kind unknown: weir retries
	// an idempotent tool with the same key; another tool's call ends as
	// an unknown outcome.
	CodeServerGone = "E_MCP_SERVER_GONE"
	// CodeUnavailable: the server could not be (re)started or reached, or
	// refused the call before reading it (HTTP 429 or 503, or a session it
	// no longer knows, twice). Kind not_sent: nothing was done, and weir
	// may retry it whatever the tool.
	CodeUnavailable = "E_MCP_UNAVAILABLE"
	// CodeBadResult: the server's answer cannot be made a weir output.
	CodeBadResult = "E_MCP_BAD_RESULT"
)

// MetaIdempotencyKey is the _meta key under which each call carries weir's
// idempotency key (the same on every retry of one logical call), for a
// server that can dedupe on it.
const MetaIdempotencyKey = "weir/idempotency_key"

// bridge holds the connections to the configured servers.
type bridge struct {
	lookupEnv func(string) (string, bool)
	logger    *slog.Logger
	// stateDir is the plugin's state directory ("" for none), where each
	// server's last tool list is kept.
	stateDir string

	servers  map[string]*server
	progress sync.Map // progress token (string) → func(done, total int64)
	seq      atomic.Uint64

	// changes carries the plugin's tool list after launch (nil: the
	// list stays the launch's). listMu guards cfg and lists, each
	// server's list in force.
	changes  *sdk.ToolChanges
	healthMu sync.Mutex // one writeHealth at a time
	listMu   sync.Mutex
	cfg      *config
	lists    map[string][]*mcp.Tool
}

func newBridge(lookupEnv func(string) (string, bool), logger *slog.Logger, stateDir string) *bridge {
	return &bridge{lookupEnv: lookupEnv, logger: logger, stateDir: stateDir, servers: map[string]*server{}, changes: sdk.NewToolChanges()}
}

// server is one configured MCP server and its live session, if any.
type server struct {
	b      *bridge
	cfg    *serverConfig
	client *mcp.Client
	// pooled carries an HTTP server's requests, fresh an at-most-once
	// tool's calls (see watch); nil for a stdio server.
	pooled, fresh *http.Transport

	mu      sync.Mutex
	session *mcp.ClientSession
	dead    chan struct{} // closed when session's connection ends

	// down is why the server cannot be reached, nil once it answers,
	// and downSince since when; watching says watchDown retries it.
	// wasDown says its tools were served from its kept list, marked so,
	// until a fresh list is published.
	downMu    sync.Mutex
	down      error
	downSince time.Time
	watching  bool
	wasDown   atomic.Bool
	// connects counts the sessions made: a later one is a reconnection,
	// after which the server's list is read again (it may have restarted
	// with other tools).
	connects int
}

// up records that the server answered.
func (s *server) up() {
	s.downMu.Lock()
	was := s.down != nil
	s.down = nil
	s.downMu.Unlock()
	if was {
		s.b.writeHealth()
	}
}

// markDown records that the server could not be reached (err), since when,
// and has it retried in the background until it answers.
func (s *server) markDown(err error) {
	s.downMu.Lock()
	if s.down == nil {
		s.downSince = time.Now()
	}
	s.down = err
	start := !s.watching
	s.watching = true
	s.downMu.Unlock()
	s.b.writeHealth()
	if start {
		go s.watchDown()
	}
}

// maxHealthError bounds a down server's error in the health file.
const maxHealthError = 512

// writeHealth writes the servers the plugin cannot reach now to its state
// directory's wire.HealthFile, for weir status. A failure to write is
// logged: the file is a report, the calls do not depend on it.
func (b *bridge) writeHealth() {
	if b.stateDir == "" {
		return
	}
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	h := wire.Health{Down: []wire.DownServer{}, Updated: time.Now().UTC()}
	names := make([]string, 0, len(b.servers))
	for n := range b.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := b.servers[n]
		s.downMu.Lock()
		if s.down != nil {
			h.Down = append(h.Down, wire.DownServer{Name: n, Since: s.downSince.UTC(), Error: escape.Cut(s.down.Error(), maxHealthError)})
		}
		s.downMu.Unlock()
	}
	data, err := json.Marshal(h)
	if err == nil {
		err = dedupe.WriteFileAtomic(filepath.Join(b.stateDir, wire.HealthFile), data, 0o600)
	}
	if err != nil {
		b.logger.Warn("could not write the servers' health", "error", err)
	}
}

// tools is the plugin's Options.Tools: it connects to every server, lists
// their tools and maps them. No config: no tools (the plugin installs so).
func (b *bridge) tools(raw json.RawMessage) ([]sdk.Tool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	cfg, err := parseConfig(raw, b.lookupEnv)
	if err != nil {
		return nil, err
	}
	for name, sc := range cfg.Servers {
		b.servers[name] = b.newServer(sc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	lists := make(map[string][]*mcp.Tool, len(cfg.Servers))
	errs := make(map[string]error, len(cfg.Servers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, s := range b.servers {
		wg.Go(func() {
			ts, err := s.listTools(ctx)
			mu.Lock()
			defer mu.Unlock()
			lists[name], errs[name] = ts, err
		})
	}
	wg.Wait()
	// Each server's tools stand alone: one that cannot be reached serves
	// the tools of its last list (calls fail not_sent until it answers)
	// and is retried in the background. Only when no server gave a list,
	// fresh or kept, does the launch fail.
	var firstErr error
	reached := 0
	for _, name := range cfg.serverNames() {
		s := b.servers[name]
		if errs[name] == nil {
			reached++
			b.keepList(s, lists[name])
			continue
		}
		err := fmt.Errorf("mcp server %s: %w", name, errs[name])
		if firstErr == nil {
			firstErr = err
		}
		s.wasDown.Store(true)
		kept, ok := b.keptList(s)
		if ok {
			reached++
			lists[name] = kept
			b.logger.Error("mcp server unreachable at launch; serving the tools of its last list, calls fail as not sent until it answers", "server", name, "error", escape.Cut(err.Error(), maxErrorText))
		} else {
			b.logger.Error("mcp server unreachable at launch and no earlier tool list is kept: its tools are unknown until it answers", "server", name, "error", escape.Cut(err.Error(), maxErrorText))
		}
	}
	if reached == 0 {
		return nil, firstErr
	}
	// Marked down (and retried) only once the launch stands: a failed
	// launch leaves nothing running.
	for _, name := range cfg.serverNames() {
		if errs[name] != nil {
			b.servers[name].markDown(fmt.Errorf("mcp server %s: %w", name, errs[name]))
		}
	}
	b.writeHealth()
	b.listMu.Lock()
	defer b.listMu.Unlock()
	b.cfg, b.lists = cfg, lists
	return b.makeTools(cfg, lists)
}

// relist reads server s's tool list again (it said the list changed, or
// it answers again after a restart) and, if the list differs from the
// one in force, publishes the plugin's new tools.
func (s *server) relist(why string) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	ts, err := s.listTools(ctx)
	if err != nil {
		s.b.logger.Warn("could not read the server's tool list again", "server", s.cfg.name, "why", why, "error", escape.Cut(err.Error(), maxErrorText))
		s.markDown(fmt.Errorf("mcp server %s: %w", s.cfg.name, err))
		return
	}
	s.up()
	s.b.updateList(s, ts, why)
}

// updateList puts ts in force as server s's list and, if it changed,
// publishes the plugin's tools made from every server's list: weir
// (protocol revision 2) swaps them without relaunching the plugin.
func (b *bridge) updateList(s *server, ts []*mcp.Tool, why string) {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	if b.cfg == nil {
		return // still launching: the launch's list is being made
	}
	b.keepList(s, ts)
	// A server served from its kept list has its tools marked so: they
	// are published again, unmarked, even when the list is the same.
	wasDown := s.wasDown.Swap(false)
	if old, ok := b.lists[s.cfg.name]; ok && sameTools(old, ts) && !wasDown {
		return
	}
	lists := make(map[string][]*mcp.Tool, len(b.lists))
	for k, v := range b.lists {
		lists[k] = v
	}
	lists[s.cfg.name] = ts
	tools, err := b.makeTools(b.cfg, lists)
	if err == nil && b.changes != nil {
		err = b.changes.Publish(tools...)
	}
	if err != nil {
		b.logger.Error("the server's new tool list cannot be served; the previous one stays", "server", s.cfg.name, "error", escape.Cut(err.Error(), maxErrorText))
		return
	}
	b.lists = lists
	b.logger.Info("mcp server's tool list changed; weir is told", "server", s.cfg.name, "why", why, "tools", len(ts))
}

// listsDir is where each server's last tool list is kept, under the
// plugin's state directory: servers/NAME.json.
const listsDir = "servers"

// keptListFile is a kept tool list with what it was listed from: a list
// of another command or URL is not used.
type keptListFile struct {
	From  string      `json:"from"`
	Tools []*mcp.Tool `json:"tools"`
}

func (s *server) from() string {
	b, _ := json.Marshal([]any{s.cfg.Command, s.cfg.URL})
	return string(b)
}

// keepList keeps ts as server s's last list; a failure to write is logged
// (the list is a convenience for a later launch).
func (b *bridge) keepList(s *server, ts []*mcp.Tool) {
	if b.stateDir == "" {
		return
	}
	data, err := json.Marshal(keptListFile{From: s.from(), Tools: ts})
	if err == nil {
		dir := filepath.Join(b.stateDir, listsDir)
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = dedupe.WriteFileAtomic(filepath.Join(dir, s.cfg.name+".json"), data, 0o600)
		}
	}
	if err != nil {
		b.logger.Warn("could not keep the server's tool list", "server", s.cfg.name, "error", err)
	}
}

// keptList reads server s's last list, if one is kept for its command or
// URL and is within the bounds of a fresh one.
func (b *bridge) keptList(s *server) ([]*mcp.Tool, bool) {
	if b.stateDir == "" {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(b.stateDir, listsDir, s.cfg.name+".json"))
	if err != nil || len(data) > maxKeptListBytes {
		return nil, false
	}
	var f keptListFile
	if json.Unmarshal(data, &f) != nil || f.From != s.from() || len(f.Tools) > maxToolsPerServer {
		return nil, false
	}
	for _, t := range f.Tools {
		if t == nil {
			return nil, false
		}
	}
	return f.Tools, true
}

// maxKeptListBytes bounds a kept list's file: 256 tools of two 64 KiB
// schemas and a description, with room.
const maxKeptListBytes = maxToolsPerServer * (2*maxSchemaBytes + maxDescription + 1024)

// downRetry bounds the background retries of a server that was down at
// launch: the wait before retry n (from 0) is downRetryBase·2^n, at most
// downRetryMax.
const (
	downRetryBase = time.Second
	downRetryMax  = time.Minute
)

// downRetryDelay is the wait before background retry n of a down server.
func downRetryDelay(n int) time.Duration {
	if n >= 6 {
		return downRetryMax
	}
	return min(downRetryBase<<n, downRetryMax)
}

// watchDown retries a server that was down at launch, with backoff,
// until it answers (here or to a call): then it reads its list again and
// publishes it if it changed (weir swaps the plugin's tools).
func (s *server) watchDown() {
	for n := 0; ; n++ {
		time.Sleep(downRetryDelay(n))
		s.downMu.Lock()
		if s.down == nil {
			// It answered a call meanwhile.
			s.watching = false
			s.downMu.Unlock()
			s.b.logger.Info("mcp server answers again", "server", s.cfg.name)
			s.relist("it answers again")
			return
		}
		s.downMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		ts, err := s.listTools(ctx)
		cancel()
		if err != nil {
			s.markDown(fmt.Errorf("mcp server %s: %w", s.cfg.name, err))
			continue
		}
		s.downMu.Lock()
		s.down, s.watching = nil, false
		s.downMu.Unlock()
		s.b.writeHealth()
		s.b.logger.Info("mcp server answers again", "server", s.cfg.name)
		s.b.updateList(s, ts, "it answers again")
		return
	}
}

func sameTools(a, b []*mcp.Tool) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// downErr is why the server is down, nil when it is up.
func (s *server) downErr() error {
	s.downMu.Lock()
	defer s.downMu.Unlock()
	return s.down
}

// makeTools maps the servers' tool lists to weir tools: names (refusing
// collisions), descriptions, schemas, idempotency.
func (b *bridge) makeTools(cfg *config, lists map[string][]*mcp.Tool) ([]sdk.Tool, error) {
	listed := map[string]bool{}
	for _, p := range cfg.Idempotent {
		listed[p] = true
	}
	trusted := map[string]bool{}
	for _, n := range cfg.TrustAnnotations {
		trusted[n] = true
	}
	names := nameTable{}
	var out []sdk.Tool
	for _, srv := range cfg.serverNames() {
		ts := lists[srv]
		if len(ts) > maxToolsPerServer {
			return nil, fmt.Errorf("mcp server %s offers %d tools, at most %d", srv, len(ts), maxToolsPerServer)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
		for _, t := range ts {
			part, err := names.add(srv, t.Name)
			if err != nil {
				return nil, err
			}
			in, err := schemaText(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("mcp server %s, tool %q: input schema: %w", srv, t.Name, err)
			}
			outSchema, err := schemaText(t.OutputSchema)
			if err != nil {
				return nil, fmt.Errorf("mcp server %s, tool %q: output schema: %w", srv, t.Name, err)
			}
			if _, err := wire.CompileSchema(in); err != nil {
				// weir checks input against the schema; one it cannot
				// compile would make the tool uncallable. The server
				// still checks its own.
				b.logger.Warn("input schema not usable by weir; input is checked by the server only", "server", srv, "tool", t.Name, "error", err)
				in = `{"type":"object"}`
			}
			if _, err := wire.CompileSchema(outSchema); err != nil {
				outSchema = ""
			}
			class := effect(listed[part], trusted[srv], t.Annotations)
			idem := class != sdk.EffectAtMostOnce
			delete(listed, part)
			s, mcpName := b.servers[srv], t.Name
			out = append(out, sdk.Tool{
				Name:         "mcp." + part,
				Description:  description(srv, t, b.servers[srv].downErr() != nil),
				Effect:       class,
				InputSchema:  in,
				OutputSchema: outSchema,
				Run: func(ctx context.Context, call *sdk.Call) (any, error) {
					return s.call(ctx, mcpName, idem, call)
				},
			})
		}
	}
	for p := range listed {
		// The operator's word names a tool the server no longer offers:
		// harmless (nothing becomes retryable), but worth saying.
		b.logger.Warn("idempotent lists a tool its server does not offer", "tool", p)
	}
	return out, nil
}

// effect decides a tool's effect class: whether weir may repeat or retry
// its calls. It is never guessed, since MCP's annotations are hints any
// server may give: a tool is read only when its server is trusted and its
// annotations say read-only; it is idempotent when the operator listed it,
// or when its server is trusted and its annotations say idempotent and
// explicitly not destructive (destructiveHint defaults to true when
// absent). Everything else is at most once.
func effect(listed, trusted bool, a *mcp.ToolAnnotations) sdk.Effect {
	switch {
	case trusted && a != nil && a.ReadOnlyHint:
		return sdk.EffectRead
	case listed:
		return sdk.EffectIdempotent
	case trusted && a != nil && a.IdempotentHint && a.DestructiveHint != nil && !*a.DestructiveHint:
		return sdk.EffectIdempotent
	}
	return sdk.EffectAtMostOnce
}

// description is a tool's description: the server's, cut, and where it
// comes from. down marks a tool of a server that was unreachable at
// launch, known from its last list.
func description(srv string, t *mcp.Tool, down bool) string {
	d := t.Description
	if d == "" {
		d = t.Title
	}
	d = escape.Cut(d, maxDescription)
	d += " (MCP server " + srv + ", tool " + strconv.Quote(t.Name)
	if down {
		d += "; the server was unreachable when the plugin started: known from its last tool list"
	}
	return d + ")"
}

// schemaText is a tool's schema as JSON text, "" for none.
func schemaText(s any) (string, error) {
	if s == nil {
		return "", nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	if string(b) == "null" {
		return "", nil
	}
	if len(b) > maxSchemaBytes {
		return "", fmt.Errorf("%d bytes, at most %d", len(b), maxSchemaBytes)
	}
	return string(b), nil
}

func (b *bridge) newServer(sc *serverConfig) *server {
	s := &server{b: b, cfg: sc}
	if sc.URL != "" {
		s.pooled = http.DefaultTransport.(*http.Transport).Clone()
		s.fresh = http.DefaultTransport.(*http.Transport).Clone()
		s.fresh.DisableKeepAlives = true
	}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "weir", Version: sdk.Version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		// A server that says its tool list changed is listed again in the
		// background: the handler runs on the session's own goroutine.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			go s.relist("the server said its tool list changed")
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			tok, _ := req.Params.ProgressToken.(string)
			if f, ok := b.progress.Load(tok); ok {
				done, total := progressUnits(req.Params.Progress, req.Params.Total)
				f.(func(int64, int64))(done, total)
			}
		},
	})
	return s
}

// progressUnits turns MCP's progress (floats, total 0 when unknown) into
// weir's whole units: fractions are kept to a thousandth.
func progressUnits(progress, total float64) (int64, int64) {
	if progress != float64(int64(progress)) || total != float64(int64(total)) {
		progress, total = progress*1000, total*1000
	}
	if progress < 0 {
		progress = 0
	}
	if total < 0 {
		total = 0
	}
	return int64(progress), int64(total)
}

// transport makes a fresh connection's transport: the command started
// anew for a stdio server, an HTTP client for the others.
func (s *server) transport() mcp.Transport {
	if len(s.cfg.Command) > 0 {
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Env = append([]string{}, s.cfg.env...) // never nil: nil would inherit everything
		cmd.Stderr = os.Stderr                     // weir's plugin log
		setProcAttr(cmd)
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	var pooled, fresh http.RoundTripper = s.pooled, s.fresh
	if s.cfg.token != "" {
		pooled, fresh = bearer{token: s.cfg.token, next: pooled}, bearer{token: s.cfg.token, next: fresh}
	}
	hc := &http.Client{Transport: watch{pooled: pooled, fresh: fresh}}
	// The standalone SSE stream carries what the server says unasked:
	// notifications/tools/list_changed.
	return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}
}

// probe records what became of one call's requests on the wire, for an
// HTTP server: the SDK's errors do not tell a request that never left
// from one whose answer was lost (both wrap "rejected by transport"), nor
// a session the server refused from a tool's error. It rides on the
// call's context, which the SDK passes to every request of the call.
type probe struct {
	// fresh sends the call on a connection of its own (see watch).
	fresh bool

	mu         sync.Mutex
	posts      int  // POSTs the call made
	dialFailed bool // the first one never connected
	status     int  // the first one's HTTP status, 0 if it had no answer
}

type probeKey struct{}

func (p *probe) note(resp *http.Response, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	if p.posts > 1 {
		return
	}
	var op *net.OpError
	switch {
	case err != nil && errors.As(err, &op) && op.Op == "dial":
		p.dialFailed = true
	case err == nil:
		p.status = resp.StatusCode
	}
}

// watch notes each POST's fate in the probe its context carries. A call
// whose probe says fresh (an at-most-once tool's) goes on a new
// connection: a kept-alive one the server closed meanwhile (it restarted)
// fails with an EOF that cannot be told from a server that died running
// the call, while a new connection that cannot be made is a call that was
// never sent.
type watch struct{ pooled, fresh http.RoundTripper }

func (w watch) RoundTrip(r *http.Request) (*http.Response, error) {
	p, _ := r.Context().Value(probeKey{}).(*probe)
	rt := w.pooled
	if p != nil && p.fresh {
		rt = w.fresh
	}
	resp, err := rt.RoundTrip(r)
	if p != nil && r.Method == http.MethodPost {
		p.note(resp, err)
	}
	return resp, err
}

// failure is what a failed call means for weir.
type failure int

const (
	// failAnswered: the server answered with an error; the call is done.
	failAnswered failure = iota
	// failSession: the server refused the session (HTTP 404 or 400, as
	// the streamable HTTP transport says a server does for a session it
	// no longer knows: it restarted). Nothing ran; a new session may
	// take the call.
	failSession
	// failNotSent: the call never reached the server, or the server said
	// it did not take it (429, 503).
	failNotSent
	// failUnknown: the call was sent and no answer came back.
	failUnknown
)

// JSON-RPC codes the go-sdk gives failures of its own, not the server's
// (its internal jsonrpc2: ErrClientClosing, ErrServerClosing, ErrRejected).
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// classify decides what a failed call means. p is the call's probe, nil
// for a stdio server (a pipe either delivers or breaks: a broken one is
// an unknown outcome).
func classify(err error, p *probe) failure {
	var rpc *jsonrpc.Error
	// A JSON-RPC error always has a code; the SDK's synthetic ones (a
	// stream that ended without the call's answer) may have none.
	answered := errors.As(err, &rpc) && rpc.Code != 0 && rpc.Code != codeRejected && rpc.Code != codeClientClosing && rpc.Code != codeServerClosing
	if p == nil {
		if answered {
			return failAnswered
		}
		return failUnknown
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.posts == 0 || p.dialFailed:
		// The SDK refused to write on a connection it knew broken, or
		// could not connect: nothing left.
		return failNotSent
	case p.status == http.StatusNotFound || p.status == http.StatusBadRequest:
		return failSession
	case p.status == http.StatusTooManyRequests || p.status == http.StatusServiceUnavailable:
		return failNotSent
	case p.status == http.StatusBadGateway || p.status == http.StatusGatewayTimeout:
		// A gateway may have passed the call on before it failed.
		return failUnknown
	case p.status != 0 && (p.status < 200 || p.status > 299):
		return failAnswered // refused at the HTTP level (401, 403, 413, ...)
	case answered:
		return failAnswered
	}
	return failUnknown
}

// bearer adds the server's token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// connected returns the live session, connecting (a stdio server is
// started again) when there is none or the last one ended: a server that
// died is restarted on the next call.
func (s *server) connected(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		select {
		case <-s.dead:
			s.session.Close()
			s.session = nil
		default:
			return s.session, nil
		}
	}
	if s.pooled != nil {
		// A new session: the last one ended, and so may have the server
		// behind the connections kept alive for it.
		s.pooled.CloseIdleConnections()
	}
	cs, err := s.client.Connect(ctx, s.transport(), nil)
	if err != nil {
		return nil, err
	}
	dead := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(dead)
	}()
	s.session, s.dead = cs, dead
	if s.connects++; s.connects > 1 {
		go s.relist("a new session (the server restarted?)")
	}
	return cs, nil
}

// drop closes cs if it is still the live session, so that the next call
// reconnects.
func (s *server) drop(cs *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == cs {
		s.session.Close()
		s.session = nil
	}
}

func (s *server) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	cs, err := s.connected(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		if len(out) == maxToolsPerServer {
			return nil, fmt.Errorf("it offers more than %d tools", maxToolsPerServer)
		}
		out = append(out, t)
	}
	return out, nil
}

// call makes one tool call on the server and maps its answer. A session
// the server refused (it restarted) is replaced by a new one and the call
// made once more: the server ran nothing the first time.
func (s *server) call(ctx context.Context, name string, idem bool, call *sdk.Call) (any, error) {
	var args any = json.RawMessage(call.Input)
	if len(call.Input) == 0 {
		args = map[string]any{}
	}
	params := &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{}}
	if call.IdempotencyKey != "" {
		params.Meta[MetaIdempotencyKey] = call.IdempotencyKey
	}
	if call.TraceParent != "" {
		// The run's trace, where SEP-414 puts it: the server's spans join.
		params.Meta["traceparent"] = call.TraceParent
		if call.TraceState != "" {
			params.Meta["tracestate"] = call.TraceState
		}
	}
	tok := "weir-" + strconv.FormatUint(s.b.seq.Add(1), 10)
	params.SetProgressToken(tok)
	s.b.progress.Store(tok, call.Progress)
	defer s.b.progress.Delete(tok)

	for try := 1; ; try++ {
		cs, err := s.connected(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, s.unavailable(err)
		}
		var p *probe
		callCtx := ctx
		if s.cfg.URL != "" {
			p = &probe{fresh: !idem}
			callCtx = context.WithValue(ctx, probeKey{}, p)
		}
		// Cancelling ctx (weir cancels the call, or its deadline passes)
		// makes the SDK send notifications/cancelled to the server.
		res, err := cs.CallTool(callCtx, params)
		if err == nil {
			s.up()
			return mapResult(res, call.StateDir)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch classify(err, p) {
		case failAnswered:
			s.up()
			var rpc *jsonrpc.Error
			msg := err.Error()
			if errors.As(err, &rpc) && rpc.Code != codeRejected {
				msg = rpc.Message
			}
			return nil, sdk.WithCode(fmt.Errorf("mcp server %s refused tool %q: %s", s.cfg.name, name, escape.Cut(msg, maxErrorText)), CodeServerError)
		case failSession:
			s.drop(cs)
			if try == 1 {
				s.b.logger.Info("the server refused the session (it restarted?); calling again on a new one", "server", s.cfg.name, "tool", name)
				continue
			}
			return nil, sdk.NotSent(sdk.WithCode(fmt.Errorf("mcp server %s refused the session twice, the second time a new one, for %q (%s); the call was not run", s.cfg.name, name, escape.Cut(err.Error(), maxErrorText)), CodeUnavailable))
		case failNotSent:
			s.drop(cs)
			return nil, s.unavailable(err)
		}
		s.drop(cs)
		gone := fmt.Errorf("mcp server %s: the connection ended during the call of %q, after it was sent: %s", s.cfg.name, name, escape.Cut(err.Error(), maxErrorText))
		if !idem {
			gone = fmt.Errorf("%w; the tool is not idempotent, so whether it had its effect is unknown", gone)
		}
		return nil, sdk.Unknown(sdk.WithCode(gone, CodeServerGone))
	}
}

// unavailable is the error of a call that could not be sent; the server
// is marked down until it answers.
func (s *server) unavailable(err error) error {
	s.markDown(fmt.Errorf("mcp server %s: %w", s.cfg.name, err))
	return sdk.NotSent(sdk.WithCode(fmt.Errorf("mcp server %s is unavailable, the call was not sent: %s", s.cfg.name, escape.Cut(err.Error(), maxErrorText)), CodeUnavailable))
}
