package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk/wire"
)

// Config configures a Host. Zero values take the documented defaults.
type Config struct {
	// PluginsDir holds the plugin binaries, their pins and the manifest
	// cache (see Install). Required.
	PluginsDir string
	// DataDir is weir's data directory; each plugin's state directory is
	// DataDir/plugin-state/NAME, passed to it as WEIR_PLUGIN_STATE.
	// Required.
	DataDir string
	// Logger receives the host's own records and every plugin's log lines,
	// under "plugin.NAME". Default: discard.
	Logger hclog.Logger
	// PluginConfig holds each plugin's section of the daemon's
	// configuration, by plugin name; the plugin receives it as JSON in
	// WEIR_PLUGIN_CONFIG.
	PluginConfig map[string]json.RawMessage
	// PluginEnv names, by plugin name, the variables of weir's environment
	// passed to that plugin alone (a block's env, docs/design.md §11). Only names:
	// the values are read at each launch and never logged.
	PluginEnv map[string][]string
	// PluginMemoryMax caps, by plugin name, the plugin process's data
	// segment in bytes (RLIMIT_DATA; a block's memory_max). 0: no cap.
	PluginMemoryMax map[string]int64
	// MaxMessageBytes bounds a call's input and a plugin's answer.
	// Default 4 MiB.
	MaxMessageBytes int
	// DefaultTimeout is the deadline of a call whose request has none.
	// Default 60s.
	DefaultTimeout time.Duration
	// PerPluginConcurrency bounds the calls in flight to one plugin.
	// Default 8.
	PerPluginConcurrency int
	// CancelGrace is how long a plugin has to acknowledge a cancellation
	// (the caller's, or the deadline) before it is considered hung and
	// killed. Call returns at most this long after its deadline.
	// Default 1s.
	CancelGrace time.Duration
	// RestartBackoff is the wait before relaunching a plugin that crashed;
	// it doubles with each consecutive crash up to MaxRestartBackoff and
	// resets after a successful call. Defaults 100ms and 30s.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// StartTimeout bounds a plugin's launch and handshake. Default 10s.
	StartTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = defaultMaxMessageBytes
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 60 * time.Second
	}
	if c.PerPluginConcurrency <= 0 {
		c.PerPluginConcurrency = 8
	}
	if c.CancelGrace <= 0 {
		c.CancelGrace = time.Second
	}
	if c.RestartBackoff <= 0 {
		c.RestartBackoff = 100 * time.Millisecond
	}
	if c.MaxRestartBackoff <= 0 {
		c.MaxRestartBackoff = 30 * time.Second
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = defaultStartTimeout
	}
}

// CallRequest is one tool call (the type lives in package tool, which the
// engine shares without importing the host).
type CallRequest = tool.CallRequest

// CallResult is a successful call.
type CallResult = tool.CallResult

// Host launches plugins and makes tool calls. It is safe for concurrent
// use. Plugins are launched on first use (or at New when their manifest is
// not cached yet) and run until Close.
type Host struct {
	cfg     Config
	logger  hclog.Logger
	catalog *Catalog
	plugins map[string]*pluginState
	tools   map[string]*toolState

	mu      sync.RWMutex // guards closed against Call's calls.Add
	closed  bool
	done    chan struct{}
	calls   sync.WaitGroup // calls in flight
	reaper  sync.WaitGroup // background clean-up of retired instances
	callSeq atomic.Uint64  // call ids, unique per host and so per instance
}

type toolState struct {
	m      ToolManifest
	schema *wire.Schema
	plugin *pluginState
	// serial is a one-slot semaphore for a non-idempotent tool: one call
	// in flight across all callers. nil for idempotent tools.
	serial chan struct{}
}

type pluginState struct {
	h     *Host
	name  string
	path  string
	sum   []byte
	slots chan struct{} // Config.PerPluginConcurrency

	crashes atomic.Int64 // consecutive crashes, reset by a successful call

	mu        sync.Mutex
	inst      *instance
	launching chan struct{} // closed when the launch in progress ends
	notBefore time.Time     // restart backoff
	launches  int64
}

// New reads the plugins directory and returns a Host over the pinned
// plugins. Plugins whose manifest is not cached are launched now to fetch
// it, and so are plugins given a config section or env (their tools may
// come from it and from what they find at launch, such as an MCP server's
// tool list: registration must see what they declare now); the others are
// launched on first call. A plugin that cannot be read
// is logged and its tools are unknown; New fails only if the directory's
// pins cannot be read.
func New(cfg Config) (*Host, error) {
	if cfg.PluginsDir == "" || cfg.DataDir == "" {
		return nil, errors.New("host: Config needs PluginsDir and DataDir")
	}
	cfg.setDefaults()
	// Plugins run in their state directory: their own path must not be
	// relative to weir's working directory.
	var err error
	if cfg.PluginsDir, err = filepath.Abs(cfg.PluginsDir); err != nil {
		return nil, err
	}
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, err
	}
	h := &Host{
		cfg:     cfg,
		logger:  cfg.Logger,
		plugins: map[string]*pluginState{},
		tools:   map[string]*toolState{},
		done:    make(chan struct{}),
	}
	launched := map[string]*instance{}
	cat, err := loadCatalog(cfg.PluginsDir, cfg.PluginConfig, cfg.PluginEnv, true, func(name string, sum []byte) (*PluginManifest, error) {
		inst, err := launch(h.spec(name, sum))
		if err != nil {
			h.logger.Warn("plugin launch at start failed", "plugin", name, "error", err)
			return nil, err
		}
		launched[name] = inst
		return inst.manifest, nil
	})
	if err != nil {
		return nil, err
	}
	h.catalog = cat
	for _, info := range cat.plugins {
		if info.Err != nil {
			h.logger.Error("plugin unavailable", "plugin", info.Name, "error", info.Err)
			continue
		}
		sum, _ := decodeSum(info.SHA256)
		p := &pluginState{
			h:     h,
			name:  info.Name,
			path:  info.Path,
			sum:   sum,
			slots: make(chan struct{}, cfg.PerPluginConcurrency),
		}
		if inst := launched[info.Name]; inst != nil {
			p.inst, p.launches = inst, 1
		}
		h.plugins[info.Name] = p
		for _, tm := range info.Manifest.Tools {
			schema, err := wire.CompileSchema(string(tm.InputSchema))
			if err != nil {
				h.logger.Error("tool unavailable: bad input schema", "tool", tm.Name, "error", err)
				continue
			}
			t := &toolState{m: tm, schema: schema, plugin: p}
			if !tm.Idempotent {
				t.serial = make(chan struct{}, 1)
			}
			h.tools[tm.Name] = t
		}
	}
	return h, nil
}

func (h *Host) spec(name string, sum []byte) launchSpec {
	return launchSpec{
		name:         name,
		path:         filepath.Join(h.cfg.PluginsDir, name),
		sum:          sum,
		stateDir:     stateDir(h.cfg.DataDir, name),
		config:       h.cfg.PluginConfig[name],
		env:          h.cfg.PluginEnv[name],
		memoryMax:    h.cfg.PluginMemoryMax[name],
		logger:       h.logger,
		maxMsg:       h.cfg.MaxMessageBytes,
		startTimeout: h.cfg.StartTimeout,
	}
}

// LookupTool returns the tool named name; Host implements flows.Catalog.
func (h *Host) LookupTool(name string) (flows.ToolInfo, bool) {
	t, ok := h.tools[name]
	if !ok {
		return flows.ToolInfo{}, false
	}
	return toolInfo(t.m), true
}

var _ flows.Catalog = (*Host)(nil)

// Plugins returns every pinned plugin with the manifest this host uses
// (the one for its config section), sorted by name.
func (h *Host) Plugins() []PluginInfo { return h.catalog.Plugins() }

// Tools returns every callable tool, sorted by name.
func (h *Host) Tools() []ToolManifest {
	out := make([]ToolManifest, 0, len(h.tools))
	for _, t := range h.tools {
		out = append(out, t.m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Restarts returns, per plugin, how many times it was relaunched after its
// first launch (crashes, hangs killed at their deadline).
func (h *Host) Restarts() map[string]int64 {
	out := make(map[string]int64, len(h.plugins))
	for name, p := range h.plugins {
		p.mu.Lock()
		if p.launches > 1 {
			out[name] = p.launches - 1
		} else {
			out[name] = 0
		}
		p.mu.Unlock()
	}
	return out
}

// Close kills every plugin process, fails the calls in flight with
// KindCancelled, and returns when everything the Host started has ended.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.done)
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range h.plugins {
		p.mu.Lock()
		inst := p.inst
		p.inst = nil
		p.mu.Unlock()
		if inst != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				inst.stop()
			}()
		}
	}
	wg.Wait()
	h.calls.Wait()
	h.reaper.Wait()
	return nil
}

func (h *Host) isClosed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// Call makes one tool call: it validates the input, waits for the tool's
// turn (serialized if the tool is not idempotent, else one of the plugin's
// slots), launches the plugin if needed, and returns its answer. Every
// failure is a *ToolError.
func (h *Host) Call(ctx context.Context, req CallRequest) (*CallResult, error) {
	t, ok := h.tools[req.Tool]
	if !ok {
		return nil, toolErrorf(KindUnknownTool, req.Tool, "no installed plugin provides this tool")
	}
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return nil, toolErrorf(KindCancelled, req.Tool, "the plugin host is closed")
	}
	h.calls.Add(1)
	h.mu.RUnlock()
	defer h.calls.Done()

	input := req.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	if len(input) > h.cfg.MaxMessageBytes {
		return nil, toolErrorf(KindTooLarge, req.Tool, "input of %d bytes exceeds the limit of %d", len(input), h.cfg.MaxMessageBytes)
	}
	if err := t.schema.Validate(input); err != nil {
		return nil, toolErrorf(KindSchema, req.Tool, "input refused: %v", err)
	}
	deadline := req.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(h.cfg.DefaultTimeout)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	if t.serial != nil {
		if err := h.acquire(ctx, t.serial); err != nil {
			return nil, h.stopped(ctx, req.Tool)
		}
		defer func() { <-t.serial }()
	}
	p := t.plugin
	if err := h.acquire(ctx, p.slots); err != nil {
		return nil, h.stopped(ctx, req.Tool)
	}
	defer func() { <-p.slots }()

	for tries := 0; ; tries++ {
		inst, err := p.instance(ctx)
		if err != nil {
			return nil, err
		}
		if _, ok := inst.manifest.Tool(req.Tool); !ok {
			return nil, toolErrorf(KindUnknownTool, req.Tool, "plugin %s no longer declares this tool (its manifest changed at launch)", p.name)
		}
		res, err := h.run(ctx, t, inst, input, req)
		var nd notDelivered
		if errors.As(err, &nd) && tries == 0 {
			// The process died while idle and go-plugin had not noticed
			// yet: the call never left, so one new process may take it.
			continue
		}
		if errors.As(err, &nd) {
			return nil, nd.ToolError
		}
		return res, err
	}
}

// notDelivered is a call that failed before it reached the plugin: the
// connection could not even be made, so the tool never ran.
type notDelivered struct{ *ToolError }

// neverSent reports whether a Call RPC's error says the request never
// left: gRPC could not dial the plugin's socket.
func neverSent(err error) bool {
	s := status.Convert(err)
	return s.Code() == codes.Unavailable && strings.Contains(strings.ToLower(s.Message()), "error while dialing")
}

func (h *Host) acquire(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.done:
		return errors.New("closed")
	}
}

// stopped explains why a call ended before its answer: the host closed,
// the deadline passed, or the caller cancelled.
func (h *Host) stopped(ctx context.Context, tool string) *ToolError {
	switch {
	case h.isClosed():
		return toolErrorf(KindCancelled, tool, "the plugin host is closed")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return toolErrorf(KindDeadline, tool, "deadline exceeded")
	default:
		return toolErrorf(KindCancelled, tool, "cancelled by the caller")
	}
}

// instance returns the plugin's running instance, launching it if needed;
// after a crash it waits out the restart backoff (or fails at once if the
// backoff ends after the call's deadline).
func (p *pluginState) instance(ctx context.Context) (*instance, error) {
	h := p.h
	for {
		p.mu.Lock()
		if p.inst != nil {
			inst := p.inst
			p.mu.Unlock()
			if inst.client.Exited() {
				// It died while idle (killed, OOM, its own bug): nothing
				// was dispatched to it, so a new process takes the call.
				p.retire(inst, false, "the plugin process exited while idle")
				continue
			}
			return inst, nil
		}
		if ch := p.launching; ch != nil {
			p.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
			case <-h.done:
			}
			return nil, h.stopped(ctx, p.name)
		}
		if wait := time.Until(p.notBefore); wait > 0 {
			p.mu.Unlock()
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return nil, toolErrorf(KindCrashed, p.name, "plugin crashed; it restarts in %v, after this call's deadline", wait.Round(time.Millisecond))
			}
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
				continue
			case <-ctx.Done():
			case <-h.done:
			}
			timer.Stop()
			return nil, h.stopped(ctx, p.name)
		}
		ch := make(chan struct{})
		p.launching = ch
		p.mu.Unlock()

		inst, err := launch(h.spec(p.name, p.sum))

		p.mu.Lock()
		p.launching = nil
		close(ch)
		if err != nil {
			if KindOf(err) == KindCrashed {
				p.backoffLocked()
			}
			p.mu.Unlock()
			return nil, err
		}
		if h.isClosed() {
			p.mu.Unlock()
			inst.kill()
			return nil, toolErrorf(KindCancelled, p.name, "the plugin host is closed")
		}
		p.launches++
		p.inst = inst
		p.mu.Unlock()
		h.noteManifest(p.name, inst.manifest)
		return inst, nil
	}
}

// noteManifest caches the manifest a launch answered. A manifest that
// differs from the cached one (a config-dependent tool list changed: an
// MCP server's tools, say) replaces it, so the next start registers what
// the plugin declares now; this host keeps its tool set, and a call of a
// tool the plugin no longer declares fails as an unknown tool.
func (h *Host) noteManifest(name string, m *PluginManifest) {
	cached := readManifestCache(h.cfg.PluginsDir, name, m.SHA256, m.ConfigHash)
	if cached != nil && sameManifest(cached, m) {
		return
	}
	if cached != nil {
		h.logger.Warn("plugin manifest changed at launch; the new tool list applies at the next start", "plugin", name)
	}
	_ = writeManifestCache(h.cfg.PluginsDir, m) // best effort: a cache
}

// backoffLocked records one more consecutive crash and sets when the next
// launch may happen. p.mu is held.
func (p *pluginState) backoffLocked() {
	n := p.crashes.Add(1)
	d := p.h.cfg.RestartBackoff
	for i := int64(1); i < n && d < p.h.cfg.MaxRestartBackoff; i++ {
		d *= 2
	}
	d = min(d, p.h.cfg.MaxRestartBackoff)
	p.notBefore = time.Now().Add(d)
}

// retire takes a broken instance out of service: nothing of it runs once
// retire returns (SIGKILL), so a serialized tool's next call cannot overlap
// with it. crashed counts it toward the restart backoff.
func (p *pluginState) retire(inst *instance, crashed bool, why string) {
	inst.retireOnce.Do(func() {
		p.mu.Lock()
		if p.inst == inst {
			p.inst = nil
		}
		if crashed {
			p.backoffLocked()
		}
		p.mu.Unlock()
		p.h.logger.Warn("plugin process retired", "plugin", p.name, "pid", inst.pid(), "reason", why)
		if inst.cmd.Process != nil {
			_ = inst.cmd.Process.Kill()
		}
		p.h.reaper.Add(1)
		go func() {
			defer p.h.reaper.Done()
			inst.client.Kill()
			inst.endProgress()
		}()
	})
}

// run makes the call on inst. On cancellation or deadline it sends Cancel
// and waits up to CancelGrace for the plugin's answer before killing it:
// until then the call (and the tool's serial slot) is held, because the
// plugin may still be performing it.
func (h *Host) run(ctx context.Context, t *toolState, inst *instance, input []byte, req CallRequest) (*CallResult, error) {
	p := t.plugin
	id := h.callSeq.Add(1)
	call := &wire.CallRequest{
		Tool:           req.Tool,
		Input:          input,
		RunId:          req.RunID,
		Node:           req.Node,
		Attempt:        int32(req.Attempt),
		IdempotencyKey: req.IdempotencyKey,
		CallId:         id,
		WantProgress:   req.Progress != nil,
	}
	if dl, ok := ctx.Deadline(); ok {
		call.DeadlineUnixNano = dl.UnixNano()
	}
	var watch *progressWatch
	if req.Progress != nil {
		watch = newProgressWatch(req.Progress)
		inst.watchers.Store(id, watch)
		defer inst.watchers.Delete(id)
	}

	var (
		mu        sync.Mutex
		finished  bool
		killed    bool
		killTimer *time.Timer
	)
	watchDone := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		defer close(watchDone)
		reason := wire.ReasonCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = wire.ReasonDeadline
		}
		mu.Lock()
		if finished {
			mu.Unlock()
			return
		}
		killTimer = time.AfterFunc(h.cfg.CancelGrace, func() {
			mu.Lock()
			if finished {
				mu.Unlock()
				return
			}
			killed = true
			mu.Unlock()
			p.retire(inst, true, fmt.Sprintf("hung: %s did not acknowledge %s within %v", req.Tool, reason, h.cfg.CancelGrace))
		})
		mu.Unlock()
		cctx, cancel := context.WithTimeout(context.Background(), h.cfg.CancelGrace)
		defer cancel()
		_, _ = inst.rpc.Cancel(cctx, &wire.CancelRequest{CallId: id, Reason: reason})
	})

	res, err := inst.rpc.Call(context.Background(), call)
	if watch != nil {
		watch.close(res.GetProgressSent())
	}

	if !stopWatch() {
		<-watchDone // the cancel was sent or is being sent; it ends quickly now
	}
	mu.Lock()
	finished = true
	if killTimer != nil {
		killTimer.Stop()
	}
	wasKilled := killed
	mu.Unlock()
	if err != nil {
		if wasKilled {
			e := h.stopped(ctx, req.Tool)
			e.Message += fmt.Sprintf("; the plugin did not stop within %v and was killed", h.cfg.CancelGrace)
			return nil, e
		}
		return nil, h.transportError(ctx, t, inst, err)
	}
	// A call that finished despite a cancellation did happen: its result
	// stands.
	return h.result(ctx, t, res)
}

// resultError turns the tool's ToolError into the host's, refusing a kind,
// code or retry-after the protocol does not allow.
func (h *Host) resultError(ctx context.Context, t *toolState, e *wire.ToolError) *ToolError {
	te := &ToolError{Tool: t.m.Name, Message: e.GetMessage(), Code: e.GetCode()}
	switch e.GetKind() {
	case wire.KindRetryable:
		te.Kind = KindRetryable
	case wire.KindPermanent:
		te.Kind = KindPermanent
	case wire.KindCancelled:
		te.Kind = KindCancelled
		if dl, ok := ctx.Deadline(); errors.Is(ctx.Err(), context.DeadlineExceeded) || (ok && !time.Now().Before(dl)) {
			te.Kind = KindDeadline
		}
	default:
		return toolErrorf(KindProtocol, t.m.Name, "plugin reported an unknown error kind %q: %s", e.GetKind(), e.GetMessage())
	}
	if err := wire.CheckErrorCode(te.Code); err != nil {
		return toolErrorf(KindProtocol, t.m.Name, "plugin reported a bad error code: %v: %s", err, e.GetMessage())
	}
	if ra := e.GetRetryAfter(); ra != nil {
		d := ra.AsDuration()
		switch {
		case ra.CheckValid() != nil || d < 0 || d > wire.MaxRetryAfter:
			return toolErrorf(KindProtocol, t.m.Name, "plugin reported a retry-after of %v, outside 0..%v: %s", d, wire.MaxRetryAfter, e.GetMessage())
		case e.GetKind() != wire.KindRetryable:
			return toolErrorf(KindProtocol, t.m.Name, "plugin reported a retry-after on a %s error: %s", e.GetKind(), e.GetMessage())
		}
		te.RetryAfter = d
	}
	return te
}

// transportError classifies a failure of the Call RPC itself; a call that
// never reached the plugin is a notDelivered.
func (h *Host) transportError(ctx context.Context, t *toolState, inst *instance, err error) error {
	if h.isClosed() {
		return toolErrorf(KindCancelled, t.m.Name, "the plugin host is closed")
	}
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return toolErrorf(KindTooLarge, t.m.Name, "the plugin's answer exceeds the limit of %d bytes: %v", h.cfg.MaxMessageBytes, status.Convert(err).Message())
	case codes.Unimplemented, codes.InvalidArgument, codes.FailedPrecondition:
		return toolErrorf(KindProtocol, t.m.Name, "%v", status.Convert(err).Message())
	}
	if neverSent(err) {
		t.plugin.retire(inst, false, fmt.Sprintf("unreachable before %s was sent: %v", t.m.Name, err))
		return notDelivered{toolErrorf(KindCrashed, t.m.Name, "the plugin process could not be reached (%v); the call was not sent", status.Convert(err).Message())}
	}
	// The connection is gone: the process died or is unreachable. Either
	// way the instance is done; the outcome of the call is unknown.
	t.plugin.retire(inst, true, fmt.Sprintf("connection lost during %s: %v", t.m.Name, err))
	return toolErrorf(KindCrashed, t.m.Name, "the plugin process exited or was lost during the call (%v); it restarts on next use", status.Convert(err).Message())
}

func (h *Host) result(ctx context.Context, t *toolState, r *wire.CallResult) (*CallResult, error) {
	if e := r.GetError(); e != nil {
		return nil, h.resultError(ctx, t, e)
	}
	out := r.GetOutput()
	if !json.Valid(out) {
		return nil, toolErrorf(KindProtocol, t.m.Name, "plugin answered output that is not JSON")
	}
	res := &CallResult{Output: out, Cost: t.m.Cost}
	if r.GetHasCost() {
		if r.GetCost() < 0 {
			return nil, toolErrorf(KindProtocol, t.m.Name, "plugin reported a negative cost")
		}
		res.Cost, res.CostReported = r.GetCost(), true
	}
	if t.plugin.crashes.Load() != 0 {
		t.plugin.crashes.Store(0)
	}
	return res, nil
}
