package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/internal/hooks"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
	"github.com/weirhq/weir/runtime/store/storemetrics"
	"github.com/weirhq/weir/runtime/telemetry"
	"github.com/weirhq/weir/runtime/tlscert"
)

// Options say what a Daemon is built from.
type Options struct {
	// DataDir holds the embedded store (DataDir/store) and the plugins'
	// state.
	DataDir string
	// PluginsDir is where the pinned plugins are installed.
	PluginsDir string
	// SocketPath is the Unix socket Serve listens on.
	SocketPath string
	// StoreURL names a PostgreSQL store; "" is the embedded one.
	StoreURL string
	// Shared shares the PostgreSQL store with a fleet of daemons.
	Shared bool
	// Config is the daemon's settings (nil: the defaults).
	Config *config.Config
	// Pinned names the settings the command line holds whatever the
	// file says (shown in the config view).
	Pinned []string
	// Load reads the config again for a reload, with what is pinned and
	// notes for the log; nil when there is no file to reload.
	Load func() (cfg *config.Config, pinned, notes []string, err error)
	// Logger is the daemon's log.
	Logger hclog.Logger
	// Embedded builds the engine a command runs in its own process
	// (weir exec): the engine's defaults with only the plugin blocks of
	// Config, no config version recorded, no disk watermark, no metrics;
	// Serve is not for it.
	Embedded bool
}

// Daemon is a built daemon: its parts, started, and what the API asks of
// the daemon itself (it implements api.Daemon).
type Daemon struct {
	opts Options
	log  hclog.Logger

	// Store is the store the engine uses (timed for metrics when
	// serving); Host, Sandbox and Engine are the other parts.
	Store   store.Store
	Host    *host.Host
	Sandbox *sandbox.Pool
	Engine  *engine.Engine
	raw     store.Store // the store itself, closed last but for the sandbox
	// Traces exports finished runs' traces (nil: tracing off); it is
	// shut down, flushing what it holds, after the engine stops.
	Traces *Traces

	srv     *api.Server
	hooks   *hooks.Handler // the config's hook blocks, served by srv
	servers []*http.Server
	served  chan error
	// tcpCert is the TCP listener's certificate (nil without TLS), read
	// again on every reload.
	tcpCert *tlscert.Cert

	mu   sync.Mutex // serialises reloads
	cur  *config.Config
	info apitypes.ConfigInfo
}

var _ api.Daemon = (*Daemon)(nil)

// StoreDir is where the embedded store lives under a data directory.
func StoreDir(dataDir string) string { return filepath.Join(dataDir, "store") }

// Open builds the parts in order — the store, the plugin host, the
// sandbox, the engine — and starts the engine, recovery included. What
// it opened is closed again if a later part fails.
func Open(ctx context.Context, o Options) (*Daemon, error) {
	cfg := o.Config
	if cfg == nil {
		cfg = config.Default()
	}
	d := &Daemon{opts: o, log: o.Logger, cur: cfg}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	var minFree int64
	if !o.Embedded {
		// The embedded store keeps half the disk watermark in reserve:
		// admission closes at the watermark, and the work in hand has
		// the rest.
		minFree = cfg.DiskMinFree / 2
	}
	raw, err := openStore(ctx, d.log, o.DataDir, StoreDir(o.DataDir), o.StoreURL, o.Shared, minFree)
	if err != nil {
		return nil, err
	}
	d.raw, d.Store = raw, raw
	h, err := host.New(host.Config{PluginsDir: o.PluginsDir, DataDir: o.DataDir, Logger: d.log.Named("host"), PluginConfig: cfg.Plugins,
		PluginEnv: cfg.PluginEnvs(), PluginMemoryMax: cfg.PluginMemoryMaxes(),
		PingInterval: cfg.PluginPing.Interval, PingTimeout: cfg.PluginPing.Timeout})
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("plugin host: %w", err)
	}
	d.Host = h
	ecfg := engine.Config{}
	if !o.Embedded {
		timed := storemetrics.New(raw)
		d.Store = timed
		version, err := config.Assign(ctx, timed, cfg.Hash())
		if err != nil {
			d.closeParts()
			return nil, fmt.Errorf("recording the config version: %w", err)
		}
		d.info = apitypes.ConfigInfo{Version: version, File: cfg.File, Hash: cfg.Hash(), LoadedAt: time.Now().UTC(), Pinned: o.Pinned}
		ApplyMemoryLimit(cfg)
		ecfg = cfg.EngineConfig(version)
		diskDir := watchedDisk(o)
		ecfg.DiskFree = failOnce(func() (int64, error) { return badgerstore.FreeSpace(diskDir) })
		x, err := openTraces(ctx, d.log, &cfg.Telemetry)
		if err != nil {
			d.closeParts()
			return nil, err
		}
		if x != nil {
			d.Traces = newTraces(x)
			ecfg.Traces = d.Traces
		}
	}
	if d.Sandbox, err = NewSandbox(cfg); err != nil {
		d.closeParts()
		return nil, err
	}
	ecfg.Store, ecfg.Tools, ecfg.Logger, ecfg.Scripts = d.Store, h, d.log.Named("engine"), d.Sandbox
	if ecfg.HostID, err = HostID(o.DataDir); err != nil {
		d.log.Warn("no host id: a reconcile probe's not_happened is trusted only within one process", "error", err)
	}
	eng, err := engine.Open(ecfg)
	if err == nil {
		err = eng.Start(ctx)
	}
	if err != nil {
		d.closeParts()
		return nil, err
	}
	d.Engine = eng
	return d, nil
}

// Close stops the daemon in order: the engine drains for as long as ctx
// allows (admission closed, held work given the time, then cancelled and
// its records written), the listeners close, then the plugins, the store
// and the sandbox. It returns the first error.
func (d *Daemon) Close(ctx context.Context) error {
	var err error
	if d.Engine != nil {
		err = d.Engine.Stop(ctx)
	}
	for _, s := range d.servers {
		err = errors.Join(err, ignoreClosed(s.Shutdown(context.Background())))
	}
	if d.Traces != nil {
		// What is queued goes out within the time left; what does not is
		// still in the trace outbox for the next start.
		tctx, cancel := context.WithTimeout(ctx, traceShutdown)
		if terr := d.Traces.Shutdown(tctx); terr != nil {
			d.log.Warn("flushing traces at stop", "error", terr)
		}
		cancel()
	}
	return errors.Join(err, d.closeParts())
}

// traceShutdown bounds the flush of queued spans at stop.
const traceShutdown = 5 * time.Second

// openTraces builds the OTLP exporter of the telemetry block, or returns
// nil when tracing is off (no endpoint in the block or the standard
// variables). Header values are secrets: they go to the exporter only.
func openTraces(ctx context.Context, log hclog.Logger, t *config.Telemetry) (*telemetry.Exporter, error) {
	if !t.On() {
		return nil, nil
	}
	proto := t.Protocol
	if t.Endpoint == "" && proto == config.DefaultTelemetryProtocol {
		proto = "" // the standard variables say it, with the endpoint, unless the block chose
	}
	x, err := telemetry.New(ctx, telemetry.Options{Endpoint: t.Endpoint, Protocol: proto, Headers: t.HeaderValues(),
		Insecure: t.Insecure, Sample: t.Sample, ServiceName: t.ServiceName, CaptureContent: t.CaptureContent})
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	endpoint := t.Endpoint
	if endpoint == "" {
		endpoint = "(from OTEL_EXPORTER_OTLP_*)"
	}
	log.Info("exporting run traces over OTLP", "endpoint", endpoint, "protocol", orDefault(proto, "(from OTEL_EXPORTER_OTLP_*)"),
		"sample", t.Sample, "headers", len(t.Headers))
	return x, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// closeParts closes the host, the store and the sandbox, those opened.
func (d *Daemon) closeParts() error {
	var err error
	if d.Host != nil {
		err = d.Host.Close()
	}
	if d.raw != nil {
		err = errors.Join(err, d.raw.Close())
	}
	if d.Sandbox != nil {
		_ = d.Sandbox.Close() // its workers hold nothing to keep
	}
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// NewSandbox starts the pool of worker processes that evaluates flow
// scripts for serve, exec and flow check, with c's sandbox block (nil:
// the defaults). No worker starts before the first evaluation.
func NewSandbox(c *config.Config) (*sandbox.Pool, error) {
	var sc sandbox.Config
	if c != nil {
		sc = sandbox.Config{Workers: c.Sandbox.Workers, Spare: c.Sandbox.SpareWorkers, Memory: c.Sandbox.Memory, Timeout: c.Sandbox.Timeout}
	}
	return sandbox.New(sc)
}

// ApplyMemoryLimit sets the daemon's soft memory limit from c's
// memory_limit; 0 leaves the Go runtime's own (GOMEMLIMIT, else none).
func ApplyMemoryLimit(c *config.Config) {
	if c.MemoryLimit > 0 {
		debug.SetMemoryLimit(c.MemoryLimit)
	}
}

// watchedDisk is the directory whose disk the watermark (disk min_free)
// watches: the embedded store's, or on a PostgreSQL store the data
// directory's, where the plugins keep their state (the database's own disk
// is the database's to watch).
func watchedDisk(o Options) string {
	if o.StoreURL != "" {
		return o.DataDir
	}
	return StoreDir(o.DataDir)
}

// failOnce passes readings of the disk's free space through, but only the
// first of a streak of failures: the engine reads it at every admission
// and would warn of a failure each time (a disk that cannot be read).
// A failure after a success is passed on again. While the streak lasts it
// reports no shortage (math.MaxInt64 free), which is what the engine makes
// of a failed reading anyway: the store's own reserve still holds.
func failOnce(read func() (int64, error)) func() (int64, error) {
	var failing atomic.Bool
	return func() (int64, error) {
		n, err := read()
		if err == nil {
			failing.Store(false)
			return n, nil
		}
		if failing.Swap(true) {
			return math.MaxInt64, nil
		}
		return n, err
	}
}

// HostID is the id of the host whose plugin state the daemon's plugins
// keep (DataDir/plugin-state): made once, kept in DataDir/host-id, the
// same across restarts. A started record names it, so a reconcile probe's
// not_happened is acted on only where the probe sees the state of the
// host that made the call.
func HostID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "host-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	var raw [12]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := "host_" + hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}
