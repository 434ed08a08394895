package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirhq/weir/sdk/wire"
)

// progressInterval bounds how often progress crosses the wire per call.
const progressInterval = 50 * time.Millisecond

// Invoke runs tool on call exactly as Serve runs it for weir — panics
// recovered, errors encoded as the wire carries them — sending each
// progress report to progress (which may be nil). It is what sdktest
// runs a tool with; a plugin's main needs only Serve.
func Invoke(ctx context.Context, tool Tool, call *Call, progress func(done, total int64)) *wire.CallResult {
	return InvokeWatched(ctx, tool, call, progress, nil)
}

// InvokeWatched is Invoke for a call whose partial results someone
// watches: each non-empty Call.Partial goes to partial (which may be nil:
// not watched, Partial does nothing).
func InvokeWatched(ctx context.Context, tool Tool, call *Call, progress func(done, total int64), partial func(delta string)) *wire.CallResult {
	call.progress, call.partial = progress, partial
	return runTool(ctx, tool, call)
}

// Serve serves tools to weir and returns when weir stops the plugin. It is
// meant to be the whole of a plugin's main. A mistake in the declarations
// (bad name, tools of different plugins, duplicate name, missing Run, schema
// that does not compile) is printed to stderr and the process exits with
// status 1, so that it shows up on the first `weir plugin install`.
func Serve(tools ...Tool) {
	serve(newServer(tools))
}

// Options declares a plugin whose manifest depends on its config.
type Options struct {
	// Name is the plugin's name, the part before the dot of its tool
	// names. Required when Tools may return no tool (a plugin installs
	// without config, so a plugin whose tools all come from its config
	// has none then).
	Name string
	// ConfigSchema is the JSON schema of the plugin's config section.
	// weir checks the section against it at `weir config check` and at
	// start and refuses unknown keys and wrong types with their file:line.
	// Empty: undeclared, any section is passed as is.
	ConfigSchema string
	// Tools produces the plugin's tools from its config section (JSON;
	// nil when the daemon's config has no section for the plugin). It is
	// called once, at launch; weir caches the manifest it yields by the
	// binary's checksum and the section's hash. An error stops the
	// plugin with the error on stderr.
	Tools func(config json.RawMessage) ([]Tool, error)
	// Changes, when set, lets the tool list change after launch: each
	// Publish on it replaces the whole list, and weir (protocol
	// revision 2) swaps the plugin's tools without a restart. A
	// revision-1 host keeps the list of the launch.
	Changes *ToolChanges
}

// ToolChanges carries a plugin's tool list after launch (Options.Changes):
// the latest list published wins, so a plugin never waits for weir.
type ToolChanges struct {
	mu    sync.Mutex
	tools []Tool
	gen   uint64        // counts Publish calls; 0: the launch's list
	wake  chan struct{} // closed at the next Publish
}

// NewToolChanges returns a ToolChanges with nothing published yet.
func NewToolChanges() *ToolChanges { return &ToolChanges{wake: make(chan struct{})} }

// Publish replaces the plugin's tool list with tools. A list Serve would
// refuse (see CheckTools) is refused here and changes nothing; so is one
// with a tool of another plugin, when the list is applied.
func (c *ToolChanges) Publish(tools ...Tool) error {
	if err := CheckTools(tools...); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tools = append([]Tool(nil), tools...)
	c.gen++
	close(c.wake)
	c.wake = make(chan struct{})
	return nil
}

func (c *ToolChanges) latest() ([]Tool, uint64, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tools, c.gen, c.wake
}

// ServeWith is Serve for a plugin that declares a config schema or
// produces its tools from its config.
func ServeWith(o Options) {
	serve(newServerWith(o))
}

func serve(srv *server, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "weir plugin:", err)
		os.Exit(1)
	}
	// Both loggers write JSON lines to the process's real stderr, which
	// the host reads line by line: the tools' slog records (time, level,
	// msg, attributes) and go-plugin's own hclog records. They must be
	// built before plugin.Serve redirects os.Stderr.
	level := logLevel(os.Getenv(wire.EnvLogLevel))
	srv.logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.VersionedPlugins(srv),
		Logger: hclog.New(&hclog.LoggerOptions{
			Output:     os.Stderr,
			Level:      hclog.LevelFromString(level.String()),
			JSONFormat: true,
		}),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			// The host bounds what it sends; the plugin trusts it.
			opts = append(opts, grpc.MaxRecvMsgSize(math.MaxInt32))
			return grpc.NewServer(opts...)
		},
	})
}

// logLevel reads the plugin log level weir passes in its environment:
// trace, debug, info, warn or error (any case); anything else is info.
func logLevel(s string) slog.Level {
	if strings.EqualFold(s, "trace") {
		return slog.LevelDebug
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// server implements the wire protocol over a set of tools.
type server struct {
	wire.UnimplementedPluginServer
	name, configSchema string
	changes            *ToolChanges
	// mu guards applying a published list; decl is the list in force.
	mu       sync.Mutex
	decl     atomic.Pointer[declared]
	answered atomic.Uint64 // the generation Manifest last answered
	stateDir string
	config   json.RawMessage
	logger   *slog.Logger
	calls    callTable
	progress chan queued[*wire.ProgressEvent]
	partials chan queued[*wire.PartialResult]
	// version is the protocol revision the host asked for in Manifest
	// (0 before it asked): what a call's error may say depends on it.
	version atomic.Uint32
}

func newServer(tools []Tool) (*server, error) {
	if len(tools) == 0 {
		return nil, errors.New("sdk.Serve needs at least one tool")
	}
	return newServerWith(Options{Tools: func(json.RawMessage) ([]Tool, error) { return tools, nil }})
}

func newServerWith(o Options) (*server, error) {
	if o.Tools == nil {
		return nil, errors.New("sdk.ServeWith needs Options.Tools")
	}
	if o.Name != "" {
		if err := wire.CheckPluginName(o.Name); err != nil {
			return nil, err
		}
	}
	if o.ConfigSchema != "" {
		if _, err := wire.CompileSchema(o.ConfigSchema); err != nil {
			return nil, fmt.Errorf("ConfigSchema: %w", err)
		}
	}
	s := &server{
		name:         o.Name,
		configSchema: o.ConfigSchema,
		changes:      o.Changes,
		stateDir:     os.Getenv(wire.EnvStateDir),
		logger:       slog.New(slog.DiscardHandler),
		progress:     make(chan queued[*wire.ProgressEvent], streamQueue),
		partials:     make(chan queued[*wire.PartialResult], streamQueue),
	}
	if c := os.Getenv(wire.EnvConfig); c != "" {
		if !json.Valid([]byte(c)) {
			return nil, fmt.Errorf("%s is not JSON", wire.EnvConfig)
		}
		s.config = json.RawMessage(c)
	}
	tools, err := o.Tools(s.config)
	if err != nil {
		return nil, err
	}
	if len(tools) == 0 && o.Name == "" {
		return nil, errors.New("no tools: a plugin whose tools come from its config needs Options.Name")
	}
	d, err := s.declare(tools, 0)
	if err != nil {
		return nil, err
	}
	s.decl.Store(d)
	return s, nil
}

// declared is one generation of the plugin's tool list and its manifest.
type declared struct {
	gen      uint64
	tools    map[string]Tool
	manifest *wire.ManifestResponse
}

// declare checks tools and makes their manifest.
func (s *server) declare(tools []Tool, gen uint64) (*declared, error) {
	if err := CheckTools(tools...); err != nil {
		return nil, err
	}
	d := &declared{gen: gen, tools: map[string]Tool{}, manifest: &wire.ManifestResponse{
		ProtocolVersion: wire.ProtocolVersion, SdkVersion: Version, ConfigSchema: s.configSchema, PluginName: s.name,
	}}
	for _, t := range tools {
		if p, _, _ := wire.SplitToolName(t.Name); s.name != "" && p != s.name {
			return nil, fmt.Errorf("tool %q does not belong to plugin %q", t.Name, s.name)
		}
		var models []*wire.ModelSpec
		for _, m := range t.Models {
			models = append(models, &wire.ModelSpec{Alias: m.Alias, MaxTokens: m.MaxTokens, InputCost: m.InputCost, OutputCost: m.OutputCost,
				MaxConcurrent: m.MaxConcurrent, RequestsPerMinute: m.RequestsPerMinute, TokensPerMinute: m.TokensPerMinute})
		}
		d.tools[t.Name] = t
		class, _ := t.class() // CheckTools refused a tool without one
		var timeout *durationpb.Duration
		if t.Timeout > 0 {
			timeout = durationpb.New(t.Timeout)
		}
		d.manifest.Tools = append(d.manifest.Tools, &wire.ToolSpec{
			Name:           t.Name,
			Description:    t.Description,
			Idempotent:     class != EffectAtMostOnce,
			Cost:           t.Cost,
			InputSchema:    t.InputSchema,
			OutputSchema:   t.OutputSchema,
			Contract:       t.Contract,
			Models:         models,
			Effect:         wireEffect[class],
			DefaultTimeout: timeout,
			Reconcile:      t.Reconcile != nil,
		})
	}
	return d, nil
}

// wireEffect is each effect class as the wire spells it.
var wireEffect = map[Effect]wire.Effect{
	EffectRead:       wire.Effect_EFFECT_READ,
	EffectIdempotent: wire.Effect_EFFECT_IDEMPOTENT,
	EffectAtMostOnce: wire.Effect_EFFECT_AT_MOST_ONCE,
}

// current is the tool list in force, the latest one published if it is
// newer (a list the server refuses is logged and skipped).
func (s *server) current() *declared {
	d := s.decl.Load()
	if s.changes == nil {
		return d
	}
	tools, gen, _ := s.changes.latest()
	if gen <= d.gen {
		return d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d = s.decl.Load(); gen <= d.gen {
		return d
	}
	next, err := s.declare(tools, gen)
	if err != nil {
		s.logger.Error("published tool list refused; the previous one stays", "error", err)
		next = &declared{gen: gen, tools: d.tools, manifest: d.manifest}
	}
	s.decl.Store(next)
	return next
}

// CheckTools reports the first mistake in a set of tool declarations that
// Serve would refuse: a bad or duplicate name, tools of different plugins,
// a missing Run, a negative Cost, a Timeout outside 0..wire.MaxToolTimeout,
// an unknown Effect or one Idempotent contradicts, a Reconcile probe on a
// read tool, a schema that does not compile, or a
// NewTool whose types and schema disagree. Call it
// from a test to find these before building the plugin.
func CheckTools(tools ...Tool) error {
	seen := map[string]bool{}
	plug := ""
	for _, t := range tools {
		p, _, err := wire.SplitToolName(t.Name)
		if err != nil {
			return err
		}
		if plug == "" {
			plug = p
		} else if p != plug {
			return fmt.Errorf("tool %q belongs to plugin %q, but %q came first: one binary serves one plugin", t.Name, p, plug)
		}
		if seen[t.Name] {
			return fmt.Errorf("tool %q is declared twice", t.Name)
		}
		seen[t.Name] = true
		if t.declErr != nil {
			return fmt.Errorf("tool %q: %w", t.Name, t.declErr)
		}
		if t.Run == nil {
			return fmt.Errorf("tool %q has no Run", t.Name)
		}
		if t.Cost < 0 {
			return fmt.Errorf("tool %q has a negative Cost", t.Name)
		}
		class, err := t.class()
		if err != nil {
			return fmt.Errorf("tool %q: %w", t.Name, err)
		}
		if class == EffectRead && t.Reconcile != nil {
			return fmt.Errorf("tool %q is EffectRead and has a Reconcile probe: a read has no effect to reconcile", t.Name)
		}
		if t.Timeout < 0 || t.Timeout > wire.MaxToolTimeout {
			return fmt.Errorf("tool %q: Timeout %v is outside 0..%v", t.Name, t.Timeout, wire.MaxToolTimeout)
		}
		if _, err := wire.CompileSchema(t.InputSchema); err != nil {
			return fmt.Errorf("tool %q: InputSchema: %w", t.Name, err)
		}
		if _, err := wire.CompileSchema(t.OutputSchema); err != nil {
			return fmt.Errorf("tool %q: OutputSchema: %w", t.Name, err)
		}
	}
	return nil
}

// Manifest answers in the revision the handshake negotiated: a
// revision-1 host reads the same message and skips the fields it does not
// know.
func (s *server) Manifest(_ context.Context, req *wire.ManifestRequest) (*wire.ManifestResponse, error) {
	v := req.GetProtocolVersion()
	if !wire.SpeaksVersion(v) {
		return nil, status.Errorf(codes.FailedPrecondition, "plugin speaks protocol %d to %d, host %d", wire.MinProtocolVersion, wire.ProtocolVersion, v)
	}
	d := s.current()
	m := proto.Clone(d.manifest).(*wire.ManifestResponse)
	m.ProtocolVersion = v
	s.version.Store(v)
	s.answered.Store(d.gen)
	return m, nil
}

// WatchManifest sends the whole manifest each time the tool list changes
// after the one Manifest answered (revision 2). A plugin whose list cannot
// change answers Unimplemented: the host has nothing to watch.
func (s *server) WatchManifest(_ *wire.WatchManifestRequest, stream wire.Plugin_WatchManifestServer) error {
	if s.changes == nil {
		return status.Error(codes.Unimplemented, "this plugin's tool list does not change after launch")
	}
	sent := s.answered.Load()
	var last *wire.ManifestResponse // the manifest last sent on this stream
	for {
		_, _, wake := s.changes.latest()
		if d := s.current(); d.gen > sent && d.manifest == last {
			sent = d.gen // a refused list: nothing changed
		} else if d.gen > sent {
			m := proto.Clone(d.manifest).(*wire.ManifestResponse)
			if v := s.version.Load(); v != 0 {
				m.ProtocolVersion = v
			}
			if err := stream.Send(&wire.ManifestChanged{Manifest: m}); err != nil {
				return err
			}
			sent, last = d.gen, d.manifest
			continue
		}
		select {
		case <-wake:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// traceFields are the log fields of a call's traceparent: the trace and
// the span (the calling node visit's) that its log lines belong to, so a
// collector joins the plugin's lines to the run's trace. None for a
// malformed one.
func traceFields(traceparent string) []any {
	p := strings.Split(traceparent, "-")
	if len(p) != 4 || len(p[1]) != 32 || len(p[2]) != 16 {
		return nil
	}
	return []any{"trace_id", p[1], "span_id", p[2]}
}

func (s *server) Call(ctx context.Context, req *wire.CallRequest) (*wire.CallResult, error) {
	tool, ok := s.current().tools[req.GetTool()]
	if !ok {
		return errorResult(wire.KindPermanent, fmt.Sprintf("this plugin has no tool %q", req.GetTool())), nil
	}
	// The RPC's context ends only if the host gives up on the connection;
	// the host cancels a call with Cancel, which cancels this context.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d := req.GetDeadlineUnixNano(); d != 0 {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, time.Unix(0, d))
		defer cancelDeadline()
	}
	id := req.GetCallId()
	if id != 0 {
		s.calls.start(id, cancel)
		defer s.calls.end(id)
	}
	call := &Call{
		Tool:           req.GetTool(),
		RunID:          req.GetRunId(),
		Node:           req.GetNode(),
		Attempt:        int(req.GetAttempt()),
		IdempotencyKey: req.GetIdempotencyKey(),
		Input:          json.RawMessage(req.GetInput()),
		StateDir:       s.stateDir,
		Config:         s.config,
		TraceParent:    req.GetTrace().GetTraceparent(),
		TraceState:     req.GetTrace().GetTracestate(),
		ModelAdmitted:  req.GetModelAdmitted(),
		logger:         s.logger.With(append([]any{"tool", req.GetTool()}, traceFields(req.GetTrace().GetTraceparent())...)...),
	}
	if d := req.GetDeadlineUnixNano(); d != 0 {
		call.Deadline = time.Unix(0, d)
	}
	var cp *callProgress
	if req.GetWantProgress() {
		cp = newCallProgress()
		pt := &progressThrottle{interval: progressInterval, send: func(done, total int64) {
			offer(s.progress, &wire.ProgressEvent{CallId: id, Done: done, Total: total}, cp)
		}}
		call.progress = pt.report
	}
	var pp *callProgress
	if req.GetWantPartials() {
		pp = newCallProgress()
		call.partial = pp.numbered(func(seq uint64, delta string) {
			offer(s.partials, &wire.PartialResult{CallId: id, Seq: seq, Delta: []byte(delta)}, pp)
		})
	}
	res := runTool(ctx, tool, call)
	if e := res.GetError(); e != nil && s.version.Load() < 2 && (e.Kind == wire.KindUnknown || e.Kind == wire.KindNotSent) {
		// A revision-1 host knows neither kind. Retryable says the most
		// either may: that host retries only an idempotent tool, which
		// is what an unknown outcome allows.
		e.Kind = wire.KindRetryable
	}
	if cp != nil {
		res.ProgressSent = cp.flush()
	}
	if pp != nil {
		// The last pieces, then the end (the last piece's number), go
		// before the result: the host waits for the end.
		offer(s.partials, &wire.PartialResult{CallId: id, Seq: pp.end()}, pp)
		pp.flush()
	}
	return res, nil
}

// streamQueue bounds the reports (or pieces) of all calls waiting for the
// Progress (or Partials) stream; past it they are dropped.
const streamQueue = 256

// queued is one report or piece waiting for its stream.
type queued[T any] struct {
	ev T
	cp *callProgress
}

// offer queues ev for its stream, or drops it when the queue is full:
// display only, it never blocks the tool.
func offer[T any](q chan queued[T], ev T, cp *callProgress) {
	cp.queued.Add(1)
	select {
	case q <- queued[T]{ev: ev, cp: cp}:
	default:
		cp.queued.Add(-1)
	}
}

// callProgress tracks one call's reports (or pieces), so that its result
// is sent only after them.
type callProgress struct {
	queued, handled, sent atomic.Int64
	signal                chan struct{} // a report was handled

	// mu orders a call's pieces: seq counts them from 1, before the queue
	// (a dropped piece leaves a gap); none is sent once ended.
	mu    sync.Mutex
	seq   uint64
	ended bool
}

// numbered returns the Call's partial function: send is given each piece
// with its number, in order, until end.
func (cp *callProgress) numbered(send func(seq uint64, delta string)) func(string) {
	return func(delta string) {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		if cp.ended {
			return
		}
		cp.seq++
		send(cp.seq, delta)
	}
}

// end makes the call's partial function do nothing (the call returned)
// and returns the number of its last piece.
func (cp *callProgress) end() uint64 {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.ended = true
	return cp.seq
}

func newCallProgress() *callProgress { return &callProgress{signal: make(chan struct{}, 1)} }

// flushTimeout bounds how long a result waits for its progress reports:
// they are display only.
const flushTimeout = 100 * time.Millisecond

// flush waits until the call's queued reports are on the wire and returns
// how many were sent.
func (cp *callProgress) flush() int64 {
	if cp.queued.Load() != cp.handled.Load() {
		timer := time.NewTimer(flushTimeout)
		defer timer.Stop()
		for cp.queued.Load() != cp.handled.Load() {
			select {
			case <-cp.signal:
			case <-timer.C:
				return cp.sent.Load()
			}
		}
	}
	return cp.sent.Load()
}

func (s *server) Cancel(_ context.Context, req *wire.CancelRequest) (*wire.CancelResponse, error) {
	return &wire.CancelResponse{Running: s.calls.cancel(req.GetCallId())}, nil
}

func (s *server) Progress(_ *wire.ProgressRequest, stream wire.Plugin_ProgressServer) error {
	return pump(stream.Context(), s.progress, stream.Send)
}

// Partials sends the pieces of every call made with want_partials
// (revision 2), in the order the tool made them.
func (s *server) Partials(_ *wire.PartialsRequest, stream wire.Plugin_PartialsServer) error {
	return pump(stream.Context(), s.partials, stream.Send)
}

// pump sends what q holds on a stream until the host closes it, counting
// each item against its call.
func pump[T any](ctx context.Context, q chan queued[T], send func(T) error) error {
	for {
		select {
		case it := <-q:
			err := send(it.ev)
			if err == nil {
				it.cp.sent.Add(1)
			}
			it.cp.handled.Add(1)
			select {
			case it.cp.signal <- struct{}{}:
			default:
			}
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// callTable maps running calls to their cancel functions, and remembers
// cancels that arrived before their call (the Cancel RPC can overtake the
// Call RPC).
type callTable struct {
	mu      sync.Mutex
	running map[uint64]context.CancelFunc
	early   map[uint64]time.Time
}

// earlyCancelTTL bounds how long a cancel for a call not yet seen is kept:
// long enough for any call in flight to arrive, short enough that cancels
// of calls that had already finished do not pile up.
const earlyCancelTTL = time.Minute

func (t *callTable) start(id uint64, cancel context.CancelFunc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running == nil {
		t.running = map[uint64]context.CancelFunc{}
	}
	t.running[id] = cancel
	if _, ok := t.early[id]; ok {
		delete(t.early, id)
		cancel()
	}
}

func (t *callTable) end(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, id)
}

func (t *callTable) cancel(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.running[id]; ok {
		c()
		return true
	}
	now := time.Now()
	if t.early == nil {
		t.early = map[uint64]time.Time{}
	}
	for k, at := range t.early {
		if now.Sub(at) > earlyCancelTTL {
			delete(t.early, k)
		}
	}
	t.early[id] = now
	return false
}

// runTool runs one call and turns what Run returned into a CallResult.
func runTool(ctx context.Context, tool Tool, call *Call) (res *wire.CallResult) {
	defer func() {
		if r := recover(); r != nil {
			call.Logger().Error("tool panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res = errorResult(wire.KindPermanent, fmt.Sprintf("tool %s panicked: %v", tool.Name, r))
		}
	}()
	out, err := tool.Run(ctx, call)
	if err != nil {
		return toolError(ctx, tool.Name, err)
	}
	res, err = encodeOutput(out)
	if err != nil {
		return errorResult(wire.KindPermanent, fmt.Sprintf("tool %s returned output that is not JSON: %v", tool.Name, err))
	}
	return res
}

// encodeOutput turns what Run returned (a value, or a Result carrying one
// and its cost) into a CallResult.
func encodeOutput(out any) (*wire.CallResult, error) {
	res := &wire.CallResult{}
	switch r := out.(type) {
	case Result:
		out, res.HasCost, res.Cost = r.Output, true, r.Cost
	case *Result:
		if r != nil {
			out, res.HasCost, res.Cost = r.Output, true, r.Cost
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	res.Output = b
	return res, nil
}

// toolError turns an error Run returned into the wire's ToolError: its kind,
// code and retry-after come from the outermost *Error in its chain.
func toolError(ctx context.Context, name string, err error) *wire.CallResult {
	te := &wire.ToolError{Kind: wire.KindPermanent, Message: err.Error()}
	var e *Error
	if errors.As(err, &e) {
		te.Code = e.Code
		te.InputTokens, te.OutputTokens = max(e.InputTokens, 0), max(e.OutputTokens, 0)
		switch e.Kind {
		case KindRetryable:
			te.Kind = wire.KindRetryable
			if d := min(e.RetryAfter, wire.MaxRetryAfter); d > 0 {
				te.RetryAfter = durationpb.New(d)
			}
		case KindUnknown, KindNotSent:
			te.Kind = e.Kind
		}
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		te.Kind, te.RetryAfter = wire.KindCancelled, nil
	}
	if cerr := wire.CheckErrorCode(te.Code); cerr != nil {
		// The code is the tool's mistake, not the call's: say so rather
		// than send what the host would refuse as a protocol violation.
		return errorResult(wire.KindPermanent, fmt.Sprintf("tool %s returned a malformed error code: %v; the error was: %s", name, cerr, te.Message))
	}
	return &wire.CallResult{Error: te}
}

func errorResult(kind, msg string) *wire.CallResult {
	return &wire.CallResult{Error: &wire.ToolError{Kind: kind, Message: msg}}
}
