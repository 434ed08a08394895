package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/owner"
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
	// DefaultTimeout is the deadline of a call whose request has none
	// and whose tool declares no default timeout of its own. Default 60s.
	DefaultTimeout time.Duration
	// PerPluginConcurrency bounds the calls in flight to one plugin.
	// Default 8. The slots are shared between the owners of the calls
	// (owner.From of a call's ctx): a call that finds none free waits in
	// its owner's line, and a slot that frees goes to the owner holding
	// fewest, so one owner's slow calls cannot hold every slot while
	// another owner's wait; an owner alone gets them all.
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
	// PingInterval is how often a plugin with calls in flight is asked
	// whether it still answers (gRPC's health check, which go-plugin
	// serves in every plugin, of any protocol revision); PingTimeout is
	// how long it has to answer before it is considered hung: killed,
	// its calls in flight failed as a crash does, and relaunched on next
	// use. A hung plugin otherwise holds every caller's calls until their
	// deadlines. Defaults 5s and 3s; SetPing changes them.
	PingInterval time.Duration
	PingTimeout  time.Duration
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
	if c.PingInterval <= 0 {
		c.PingInterval = defaultPingInterval
	}
	if c.PingTimeout <= 0 {
		c.PingTimeout = defaultPingTimeout
	}
}

// Defaults of the health ping (Config.PingInterval, PingTimeout).
const (
	defaultPingInterval = 5 * time.Second
	defaultPingTimeout  = 3 * time.Second
)

// CallRequest is one tool call (the type lives in package tool, which the
// engine shares without importing the host).
type CallRequest = tool.CallRequest

// CallResult is a successful call.
type CallResult = tool.CallResult

// Host launches plugins and makes tool calls. It is safe for concurrent
// use. Plugins are launched on first use (or at New when their manifest is
// not cached yet) and run until Close, or until Rescan finds them replaced
// or removed.
type Host struct {
	cfg    Config
	logger hclog.Logger
	// set is the plugins and tools in service; Rescan swaps it whole, so
	// a call resolves its tool in one consistent set.
	set atomic.Pointer[toolSet]

	mu      sync.RWMutex // guards closed against Call's calls.Add, and retired
	closed  bool
	retired []*pluginState // taken out of service by Rescan, maybe still draining
	// rescan is held (a value sent) by one change of the set at a time:
	// Rescan, or a plugin's new manifest (a channel, so that the latter
	// can give up when its instance stops).
	rescan  chan struct{}
	done    chan struct{}
	calls   sync.WaitGroup // calls in flight
	reaper  sync.WaitGroup // background clean-up of retired instances
	callSeq atomic.Uint64  // call ids, unique per host and so per instance

	// pingInterval and pingTimeout are the health ping's, as durations;
	// SetPing changes them for the pings to come.
	pingInterval, pingTimeout atomic.Int64
}

// toolSet is one generation of the installed plugins: the catalog they
// were read from and the tools they provide.
type toolSet struct {
	catalog *Catalog
	plugins map[string]*pluginState
	tools   map[string]*toolState
	// gone says why a tool a plugin declared earlier in this host's life
	// is no longer offered (its tool list changed after launch).
	gone map[string]string
}

type toolState struct {
	m      ToolManifest
	schema *wire.Schema
	plugin *pluginState
	// serial is the one slot of a non-idempotent tool: one call in
	// flight across all callers, the owners taking turns. nil for
	// idempotent tools.
	serial *owner.Slots
}

type pluginState struct {
	h     *Host
	name  string
	path  string
	sum   []byte
	slots *owner.Slots // Config.PerPluginConcurrency, shared between owners

	crashes atomic.Int64 // consecutive crashes, reset by a successful call

	mu        sync.Mutex
	inst      *instance
	launching chan struct{} // closed when the launch in progress ends
	notBefore time.Time     // restart backoff
	launches  int64
	// active counts the calls that hold this plugin; retired says Rescan
	// replaced or removed it: it takes no new call, and its process is
	// stopped when the last active call ends.
	active  int
	retired bool
}

// errRetired: the plugin was replaced or removed before the call reached
// it; the call resolves its tool again in the set now in service.
var errRetired = errors.New("plugin retired")

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
		cfg:    cfg,
		logger: cfg.Logger,
		done:   make(chan struct{}),
		rescan: make(chan struct{}, 1),
	}
	h.SetPing(cfg.PingInterval, cfg.PingTimeout)
	// A plugin launched now may send a new manifest before the set is
	// stored: manifestChanged waits for it.
	h.rescan <- struct{}{}
	defer func() { <-h.rescan }()
	set, _, err := h.build(nil)
	if err != nil {
		return nil, err
	}
	h.set.Store(set)
	return h, nil
}

// build reads the plugins directory into a new toolSet. A plugin of prev
// whose pinned checksum is unchanged is carried over with its running
// process; any other is new. What a rescan changed is returned beside it.
func (h *Host) build(prev *toolSet) (*toolSet, *RescanResult, error) {
	launched := map[string]*instance{}
	// At start, a configured plugin is launched even when its manifest is
	// cached (its tools may have changed); a rescan launches only what it
	// has no manifest for.
	cat, err := loadCatalog(h.cfg.PluginsDir, h.cfg.PluginConfig, h.cfg.PluginEnv, prev == nil, func(name string, sum []byte) (*PluginManifest, error) {
		inst, err := launch(h.spec(name, sum))
		if err != nil {
			h.logger.Warn("plugin launch failed", "plugin", name, "error", err)
			return nil, err
		}
		launched[name] = inst
		return inst.manifest, nil
	})
	if err != nil {
		return nil, nil, err
	}
	set := &toolSet{catalog: cat, plugins: map[string]*pluginState{}, tools: map[string]*toolState{}}
	res := &RescanResult{}
	for _, info := range cat.plugins {
		if info.Err != nil {
			h.logger.Error("plugin unavailable", "plugin", info.Name, "error", info.Err)
			res.Unavailable = append(res.Unavailable, PluginProblem{Name: info.Name, Error: info.Err.Error()})
			continue
		}
		var old *pluginState
		if prev != nil {
			old = prev.plugins[info.Name]
		}
		p := old
		switch {
		case old != nil && encodeSum(old.sum) == info.SHA256:
			if inst := launched[info.Name]; inst != nil {
				// Its manifest was fetched again; the process in
				// service stays.
				h.reap(inst.stop)
			}
		default:
			sum, _ := decodeSum(info.SHA256)
			p = &pluginState{
				h:     h,
				name:  info.Name,
				path:  info.Path,
				sum:   sum,
				slots: owner.NewSlots(h.cfg.PerPluginConcurrency),
			}
			if inst := launched[info.Name]; inst != nil {
				p.inst, p.launches = inst, 1
			}
			if old != nil {
				res.Upgraded = append(res.Upgraded, info.Name)
			} else if prev != nil {
				res.Added = append(res.Added, info.Name)
			}
		}
		set.plugins[info.Name] = p
		for _, tm := range info.Manifest.Tools {
			schema, err := wire.CompileSchema(string(tm.InputSchema))
			if err != nil {
				h.logger.Error("tool unavailable: bad input schema", "tool", tm.Name, "error", err)
				continue
			}
			t := &toolState{m: tm, schema: schema, plugin: p}
			if !tm.Idempotent {
				// One call in flight across all callers, across an
				// upgrade too: a call on the old process holds the same
				// slot as the new one's.
				if was := prev.tool(tm.Name); was != nil && was.serial != nil {
					t.serial = was.serial
				} else {
					t.serial = owner.NewSlots(1)
				}
			}
			set.tools[tm.Name] = t
		}
		res.Tools += len(info.Manifest.Tools)
	}
	if prev != nil {
		for name := range prev.plugins {
			if _, ok := set.plugins[name]; !ok {
				res.Removed = append(res.Removed, name)
			}
		}
		sort.Strings(res.Removed)
	}
	return set, res, nil
}

func (s *toolSet) tool(name string) *toolState {
	if s == nil {
		return nil
	}
	return s.tools[name]
}

// RescanResult says what a Rescan changed, by plugin name.
type RescanResult struct {
	Added    []string
	Upgraded []string
	Removed  []string
	// Unavailable are pinned plugins that could not be read; they provide
	// no tools.
	Unavailable []PluginProblem
	// Tools counts the tools in service after the rescan.
	Tools int
}

// PluginProblem is a plugin that could not be read, and why.
type PluginProblem struct {
	Name  string
	Error string
}

// Rescan re-reads the plugins directory (pins and manifests, as New does)
// and puts what it finds in service for new calls: a newly installed
// plugin's tools become known, a reinstalled plugin's new build serves the
// next calls, and a removed plugin's tools become unknown. Calls already in
// flight finish on the process they started on; that process is stopped
// when its last call ends. A plugin whose pin did not change keeps its
// process. It fails only if the pins cannot be read, and then changes
// nothing.
func (h *Host) Rescan() (*RescanResult, error) {
	h.rescan <- struct{}{}
	defer func() { <-h.rescan }()
	prev := h.set.Load()
	next, res, err := h.build(prev)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		for _, p := range next.plugins {
			if prev.plugins[p.name] != p && p.inst != nil {
				p.inst.stop()
			}
		}
		return nil, errors.New("the plugin host is closed")
	}
	h.set.Store(next)
	for name, p := range prev.plugins {
		if next.plugins[name] != p {
			h.retired = append(h.retired, p)
			p.withdraw()
		}
	}
	h.retired = slices.DeleteFunc(h.retired, (*pluginState).drained)
	h.mu.Unlock()
	if len(res.Added)+len(res.Upgraded)+len(res.Removed) > 0 {
		h.logger.Info("plugins rescanned", "added", res.Added, "upgraded", res.Upgraded, "removed", res.Removed, "tools", res.Tools)
	}
	return res, nil
}

// reap runs stop in the background; Close waits for it. h.mu or a call in
// flight is held, so Close has not reached its wait yet.
func (h *Host) reap(stop func()) {
	h.reaper.Add(1)
	go func() {
		defer h.reaper.Done()
		stop()
	}()
}

// enter holds the plugin for one call, unless it was retired.
func (p *pluginState) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired {
		return false
	}
	p.active++
	return true
}

// leave ends a call's hold; the last call of a retired plugin stops its
// process.
func (p *pluginState) leave() {
	p.mu.Lock()
	p.active--
	var inst *instance
	if p.retired && p.active == 0 {
		inst, p.inst = p.inst, nil
	}
	p.mu.Unlock()
	if inst != nil {
		p.h.reap(inst.stop)
	}
}

// withdraw takes the plugin out of service (Rescan, h.mu held): no new
// call enters, and its process stops now if no call holds it, else when
// the last one leaves.
func (p *pluginState) withdraw() {
	p.mu.Lock()
	p.retired = true
	var inst *instance
	if p.active == 0 {
		inst, p.inst = p.inst, nil
	}
	p.mu.Unlock()
	if inst != nil {
		p.h.reap(inst.stop)
	}
}

// drained reports whether a retired plugin has no call and no process left.
func (p *pluginState) drained() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active == 0 && p.inst == nil && p.launching == nil
}

func (h *Host) spec(name string, sum []byte) launchSpec {
	return launchSpec{
		name:            name,
		path:            filepath.Join(h.cfg.PluginsDir, name),
		sum:             sum,
		stateDir:        stateDir(h.cfg.DataDir, name),
		config:          h.cfg.PluginConfig[name],
		env:             h.cfg.PluginEnv[name],
		memoryMax:       h.cfg.PluginMemoryMax[name],
		logger:          h.logger,
		maxMsg:          h.cfg.MaxMessageBytes,
		startTimeout:    h.cfg.StartTimeout,
		manifestChanged: func(inst *instance) { h.manifestChanged(inst, name) },
	}
}

// LookupTool returns the tool named name; Host implements flows.Catalog.
func (h *Host) LookupTool(name string) (flows.ToolInfo, bool) {
	t, ok := h.set.Load().tools[name]
	if !ok {
		return flows.ToolInfo{}, false
	}
	return toolInfo(t.m), true
}

var (
	_ flows.Catalog    = (*Host)(nil)
	_ flows.ToolLister = (*Host)(nil)
)

// Plugins returns every pinned plugin with the manifest this host uses
// (the one for its config section), sorted by name.
func (h *Host) Plugins() []PluginInfo { return h.set.Load().catalog.Plugins() }

// Names returns the callable tools' names, sorted, so that an unknown
// tool's diagnostic can suggest one (flows.ToolLister).
func (h *Host) Names() []string {
	tools := h.set.Load().tools
	out := make([]string, 0, len(tools))
	for name := range tools {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Tools returns every callable tool, sorted by name.
func (h *Host) Tools() []ToolManifest {
	tools := h.set.Load().tools
	out := make([]ToolManifest, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ToolPins maps every callable tool to the hex SHA-256 of the pinned
// plugin binary that declares it: what a daemon reports to its fleet's
// roll (engine.ToolPinner).
func (h *Host) ToolPins() map[string]string {
	tools := h.set.Load().tools
	out := make(map[string]string, len(tools))
	for name, t := range tools {
		out[name] = encodeSum(t.plugin.sum)
	}
	return out
}

// Restarts returns, per plugin, how many times it was relaunched after its
// first launch (crashes, hangs killed at their deadline).
func (h *Host) Restarts() map[string]int64 {
	plugins := h.set.Load().plugins
	out := make(map[string]int64, len(plugins))
	for name, p := range plugins {
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
	plugins := slices.Collect(maps.Values(h.set.Load().plugins))
	plugins = append(plugins, h.retired...)
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range plugins {
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

// enter admits one call or probe of tool: the host is open (it waits for
// the call on Close), the input is at most MaxMessageBytes ("" is {}), and
// ctx carries the deadline — the request's, else the tool's own default
// (revision 2), else DefaultTimeout. done ends it.
func (h *Host) enter(ctx context.Context, toolName string, input json.RawMessage, deadline time.Time) (json.RawMessage, context.Context, func(), error) {
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return nil, nil, nil, toolErrorf(KindCancelled, toolName, "the plugin host is closed")
	}
	h.calls.Add(1)
	h.mu.RUnlock()
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	if len(input) > h.cfg.MaxMessageBytes {
		h.calls.Done()
		return nil, nil, nil, toolErrorf(KindTooLarge, toolName, "input of %d bytes exceeds the limit of %d", len(input), h.cfg.MaxMessageBytes)
	}
	if deadline.IsZero() {
		timeout := h.cfg.DefaultTimeout
		if t, ok := h.set.Load().tools[toolName]; ok && t.m.Timeout > 0 {
			timeout = t.m.Timeout
		}
		deadline = time.Now().Add(timeout)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	return input, ctx, func() { cancel(); h.calls.Done() }, nil
}

// Call makes one tool call: it validates the input, waits for the tool's
// turn (serialized if the tool is not idempotent, else one of the plugin's
// slots), launches the plugin if needed, and returns its answer. Every
// failure is a *ToolError.
func (h *Host) Call(ctx context.Context, req CallRequest) (*CallResult, error) {
	input, ctx, done, err := h.enter(ctx, req.Tool, req.Input, req.Deadline)
	if err != nil {
		return nil, err
	}
	defer done()
	for {
		// The set in service may change under a call that has not reached
		// its plugin yet (Rescan): it then resolves the tool again.
		set := h.set.Load()
		t, ok := set.tools[req.Tool]
		if !ok && set.gone[req.Tool] != "" {
			return nil, toolErrorf(KindUnknownTool, req.Tool, "%s", set.gone[req.Tool])
		}
		if !ok {
			return nil, toolErrorf(KindUnknownTool, req.Tool, "no installed plugin provides this tool")
		}
		if !t.plugin.enter() {
			continue
		}
		res, err := h.callOn(ctx, t, input, req)
		t.plugin.leave()
		if err != errRetired {
			return res, err
		}
	}
}

// callOn makes the call on t's plugin, which the caller holds (enter).
func (h *Host) callOn(ctx context.Context, t *toolState, input []byte, req CallRequest) (*CallResult, error) {
	if err := t.schema.Validate(input); err != nil {
		return nil, toolErrorf(KindSchema, req.Tool, "input refused: %v", err)
	}
	who := owner.From(ctx)
	if t.serial != nil {
		if err := t.serial.Acquire(ctx, who, h.done); err != nil {
			return nil, h.stopped(ctx, req.Tool)
		}
		defer t.serial.Release(who)
	}
	p := t.plugin
	if err := p.slots.Acquire(ctx, who, h.done); err != nil {
		return nil, h.stopped(ctx, req.Tool)
	}
	defer p.slots.Release(who)

	for tries := 0; ; tries++ {
		inst, err := p.instance(ctx)
		if err != nil {
			return nil, notSent(err)
		}
		if _, ok := inst.declared().Tool(req.Tool); !ok {
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

// notSent is a failure to get a process for a call — a launch that
// failed, a restart still in its backoff — as the call's error: the call
// was never sent, so KindCrashed (whose outcome an at-most-once call
// cannot know) becomes KindNotSent, which any tool may be called again
// after (DESIGN §12).
func notSent(err error) error {
	var te *ToolError
	if errors.As(err, &te) && te.Kind == KindCrashed {
		c := *te
		c.Kind = KindNotSent
		return &c
	}
	return err
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
		if p.retired {
			// Replaced or removed while this call waited: the new
			// build, if any, takes it.
			p.mu.Unlock()
			return nil, errRetired
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
		if inst.manifest.ProtocolVersion >= 2 {
			// Relaunched (a crash, say): a revision-2 plugin's tools
			// are what it declares now.
			h.manifestChanged(inst, p.name)
		} else {
			h.noteManifest(p.name, inst.manifest)
		}
		return inst, nil
	}
}

// noteManifest caches the manifest a launch answered. A manifest that
// differs from the cached one (a config-dependent tool list changed: an
// MCP server's tools, say) replaces it, so the next rescan or start registers what
// the plugin declares now; this host keeps its tool set, and a call of a
// tool the plugin no longer declares fails as an unknown tool.
func (h *Host) noteManifest(name string, m *PluginManifest) {
	cached := readManifestCache(h.cfg.PluginsDir, name, m.SHA256, m.ConfigHash)
	if cached != nil && sameManifest(cached, m) {
		return
	}
	if cached != nil {
		h.logger.Warn("plugin manifest changed at launch; the new tool list applies at the next rescan or start", "plugin", name)
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
		inst.killGroup()
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
	inst.inFlight.Add(1)
	defer inst.inFlight.Add(-1)
	inst.watchOnce.Do(func() {
		h.reaper.Add(1) // a call in flight: Close has not reached its wait
		go h.watchHealth(p, inst)
	})
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
	if inst.manifest.ProtocolVersion >= 2 {
		call.ModelAdmitted = req.ModelAdmitted
	}
	if dl, ok := ctx.Deadline(); ok {
		call.DeadlineUnixNano = dl.UnixNano()
	}
	if req.TraceParent != "" && inst.manifest.ProtocolVersion >= 2 {
		call.Trace = &wire.TraceContext{Traceparent: req.TraceParent, Tracestate: req.TraceState}
	}
	var stopPartials func(answered bool)
	call.WantPartials, stopPartials = inst.watchPartials(id, req.Partials)
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
	stopPartials(err == nil)
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
	return h.result(ctx, t, inst.manifest.ProtocolVersion, res)
}

// resultError turns the tool's ToolError into the host's, refusing a kind,
// code or retry-after the protocol does not allow. rev is the protocol
// revision the plugin speaks: "unknown" and "not_sent" are revision 2's.
func (h *Host) resultError(ctx context.Context, t *toolState, rev int, e *wire.ToolError) *ToolError {
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
	case wire.KindUnknown, wire.KindNotSent:
		if rev < 2 {
			return toolErrorf(KindProtocol, t.m.Name, "plugin of protocol revision %d reported the revision-2 error kind %q: %s", rev, e.GetKind(), e.GetMessage())
		}
		te.Kind = Kind(e.GetKind())
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
	if in, out := e.GetInputTokens(), e.GetOutputTokens(); rev >= 2 && in >= 0 && out >= 0 {
		te.InputTokens, te.OutputTokens = in, out
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
		return notDelivered{toolErrorf(KindNotSent, t.m.Name, "the plugin process could not be reached (%v); the call was not sent", status.Convert(err).Message())}
	}
	if why := inst.hung.Load(); why != nil {
		// watchHealth killed it: the call's outcome is unknown, as after
		// a crash.
		return toolErrorf(KindCrashed, t.m.Name, "%s; it restarts on next use", *why)
	}
	// The connection is gone: the process died or is unreachable. Either
	// way the instance is done; the outcome of the call is unknown.
	t.plugin.retire(inst, true, fmt.Sprintf("connection lost during %s: %v", t.m.Name, err))
	return toolErrorf(KindCrashed, t.m.Name, "the plugin process exited or was lost during the call (%v); it restarts on next use", status.Convert(err).Message())
}

func (h *Host) result(ctx context.Context, t *toolState, rev int, r *wire.CallResult) (*CallResult, error) {
	if e := r.GetError(); e != nil {
		return nil, h.resultError(ctx, t, rev, e)
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

// SetPing sets the health ping's interval and timeout (see
// Config.PingInterval); zero or negative values take the defaults. Pings
// already waiting keep the values they started with.
func (h *Host) SetPing(interval, timeout time.Duration) {
	if interval <= 0 {
		interval = defaultPingInterval
	}
	if timeout <= 0 {
		timeout = defaultPingTimeout
	}
	h.pingInterval.Store(int64(interval))
	h.pingTimeout.Store(int64(timeout))
}

// watchHealth pings inst every ping interval while it has calls in flight,
// from its first call until it ends. A plugin that does not answer within
// the ping timeout is hung (stopped, deadlocked, swapped out): it is
// retired like a crashed one, which fails its calls in flight with
// KindCrashed, so an idempotent call is retried on a new process and an
// at-most-once call ends as a crash. The ping is gRPC's health check on
// the plugin's connection: it is answered on a stream of its own, never
// behind the plugin's calls.
func (h *Host) watchHealth(p *pluginState, inst *instance) {
	defer h.reaper.Done()
	for {
		timer := time.NewTimer(time.Duration(h.pingInterval.Load()))
		select {
		case <-timer.C:
		case <-inst.ended:
			timer.Stop()
			return
		}
		if inst.inFlight.Load() == 0 {
			continue
		}
		timeout := time.Duration(h.pingTimeout.Load())
		if err := inst.ping(timeout); err != nil {
			select {
			case <-inst.ended:
				return // it ended meanwhile: the ping failed for that
			default:
			}
			why := fmt.Sprintf("the plugin did not answer its health ping within %v and was killed", timeout)
			inst.hung.Store(&why)
			p.retire(inst, true, fmt.Sprintf("hung: no answer to the health ping within %v (%v)", timeout, err))
			return
		}
	}
}
