package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/sdk"
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
	// CodeServerGone: the connection ended during the call (the server
	// died or hung up). Retryable for an idempotent tool; for another,
	// permanent: the call may or may not have had its effect.
	CodeServerGone = "E_MCP_SERVER_GONE"
	// CodeUnavailable: the server could not be (re)started or reached
	// before the call was sent. Retryable: nothing was done.
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

	servers  map[string]*server
	progress sync.Map // progress token (string) → func(done, total int64)
	seq      atomic.Uint64
}

func newBridge(lookupEnv func(string) (string, bool), logger *slog.Logger) *bridge {
	return &bridge{lookupEnv: lookupEnv, logger: logger, servers: map[string]*server{}}
}

// server is one configured MCP server and its live session, if any.
type server struct {
	b      *bridge
	cfg    *serverConfig
	client *mcp.Client

	mu      sync.Mutex
	session *mcp.ClientSession
	dead    chan struct{} // closed when session's connection ends
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
	for _, name := range cfg.serverNames() {
		if errs[name] != nil {
			return nil, fmt.Errorf("mcp server %s: %w", name, errs[name])
		}
	}
	return b.makeTools(cfg, lists)
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
			idem := idempotent(listed[part], trusted[srv], t.Annotations)
			delete(listed, part)
			s, mcpName := b.servers[srv], t.Name
			out = append(out, sdk.Tool{
				Name:         "mcp." + part,
				Description:  description(srv, t),
				Idempotent:   idem,
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

// idempotent decides whether weir may retry calls of a tool. It is never
// guessed: the operator listed it, or the server is trusted and its
// annotations say read-only, or idempotent and explicitly not destructive
// (destructiveHint defaults to true when absent).
func idempotent(listed, trusted bool, a *mcp.ToolAnnotations) bool {
	if listed {
		return true
	}
	if !trusted || a == nil {
		return false
	}
	if a.ReadOnlyHint {
		return true
	}
	return a.IdempotentHint && a.DestructiveHint != nil && !*a.DestructiveHint
}

func description(srv string, t *mcp.Tool) string {
	d := t.Description
	if d == "" {
		d = t.Title
	}
	if len(d) > maxDescription {
		d = d[:maxDescription] + "…"
	}
	return d + " (MCP server " + srv + ", tool " + strconv.Quote(t.Name) + ")"
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
	s.client = mcp.NewClient(&mcp.Implementation{Name: "weir", Version: sdk.Version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
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
		cmd.Stderr = os.Stderr // weir's plugin log
		setProcAttr(cmd)
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	hc := &http.Client{Transport: http.DefaultTransport}
	if s.cfg.token != "" {
		hc.Transport = bearer{token: s.cfg.token, next: http.DefaultTransport}
	}
	return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, DisableStandaloneSSE: true}
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

// call makes one tool call on the server and maps its answer.
func (s *server) call(ctx context.Context, name string, idem bool, call *sdk.Call) (any, error) {
	cs, err := s.connected(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, sdk.Retryable(sdk.WithCode(fmt.Errorf("mcp server %s is unavailable: %v", s.cfg.name, err), CodeUnavailable))
	}
	var args any = json.RawMessage(call.Input)
	if len(call.Input) == 0 {
		args = map[string]any{}
	}
	params := &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{}}
	if call.IdempotencyKey != "" {
		params.Meta[MetaIdempotencyKey] = call.IdempotencyKey
	}
	tok := "weir-" + strconv.FormatUint(s.b.seq.Add(1), 10)
	params.SetProgressToken(tok)
	s.b.progress.Store(tok, call.Progress)
	defer s.b.progress.Delete(tok)

	// Cancelling ctx (weir cancels the call, or its deadline passes)
	// makes the SDK send notifications/cancelled to the server.
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return nil, sdk.WithCode(fmt.Errorf("mcp server %s refused tool %q: %s", s.cfg.name, name, rpc.Message), CodeServerError)
		}
		s.drop(cs)
		gone := fmt.Errorf("mcp server %s: the connection ended during the call of %q: %v", s.cfg.name, name, err)
		if idem {
			return nil, sdk.Retryable(sdk.WithCode(gone, CodeServerGone))
		}
		return nil, sdk.WithCode(fmt.Errorf("%w; the tool is not idempotent, so whether it had its effect is unknown", gone), CodeServerGone)
	}
	return mapResult(res, call.StateDir)
}
