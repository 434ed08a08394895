package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirhq/weir/internal/memreturn"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/console"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/metrics"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
	"github.com/weirhq/weir/runtime/store/storemetrics"
	"github.com/weirhq/weir/runtime/store/storeurl"
	"github.com/weirhq/weir/runtime/tlscert"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var configFile, storeFlag string
		var sharedFlag bool
		var fv flagValues
		cmd := &cobra.Command{
			Use:   "serve",
			Short: "Run the weir daemon: the engine, recovery, and the API on the socket",
			Long: `Run the weir daemon: recover the store, start the engine and serve the API
on the Unix socket (and on TCP and a metrics address if the config file says
so) until SIGINT or SIGTERM, then drain for the grace period.

--config FILE reads the daemon's settings from an HCL file (see
docs/operators.md). A flag given on the command line beats the file, at
start and on every reload, for the life of the process. SIGHUP or
'weir admin reload' re-reads the file; an invalid file changes nothing.`,
			Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				pins, err := fv.pins(cmd.Flags())
				if err != nil {
					return err
				}
				return m.serve(cmd.Context(), configFile, storeFlag, sharedFlag, pins)
			},
		}
		f := cmd.Flags()
		f.StringVar(&configFile, "config", "", "HCL config file of the daemon (flags given beat it)")
		f.StringVar(&storeFlag, "store", "", "PostgreSQL URL of the store (env WEIR_STORE, else the config file's store block, else the embedded store in the data directory)")
		f.BoolVar(&sharedFlag, "shared", false, "share the PostgreSQL store with other daemons, a fleet (env WEIR_STORE_SHARED, else the config file's store block)")
		f.IntVar(&fv.workers, "workers", config.DefaultWorkers, "worker slots")
		f.IntVar(&fv.maxQueued, "max-queued", config.DefaultMaxQueued, "runs accepted but not started before new ones are refused")
		f.DurationVar(&fv.queueTimeout, "queue-timeout", config.DefaultQueueTimeout, "how long a task may wait for a slot before it is dropped")
		f.Int64Var(&fv.budgetInFlight, "budget-in-flight", 0, "cost units running tasks may hold at once (0: unlimited)")
		f.Int64Var(&fv.runBudget, "run-budget", 0, "budget of runs whose flow declares none (0: unlimited)")
		f.DurationVar(&fv.leaseTimeout, "lease-timeout", config.DefaultLeaseTimeout, "lease deadline; holders renew at a third of it")
		f.DurationVar(&fv.grace, "grace", config.DefaultDrainGrace, "how long held work may drain on stop before it is cancelled")
		f.StringVar(&fv.logLevel, "log-level", config.DefaultLogLevel, "trace, debug, info, warn or error")
		return cmd
	})
}

// flagValues are serve's flags that mirror settings of the config file.
type flagValues struct {
	workers, maxQueued                int
	queueTimeout, leaseTimeout, grace time.Duration
	budgetInFlight, runBudget         int64
	logLevel                          string
}

// pin is a setting a command-line flag holds whatever the file says.
type pin struct {
	flag string
	get  func(*config.Config) string
	set  func(*config.Config)
}

// pins returns the settings the flags given on the command line hold.
func (fv *flagValues) pins(f *pflag.FlagSet) ([]pin, error) {
	all := []pin{
		{"workers", func(c *config.Config) string { return fmt.Sprint(c.Engine.Workers) }, func(c *config.Config) { c.Engine.Workers = fv.workers }},
		{"max-queued", func(c *config.Config) string { return fmt.Sprint(c.Engine.MaxQueued) }, func(c *config.Config) { c.Engine.MaxQueued = fv.maxQueued }},
		{"queue-timeout", func(c *config.Config) string { return c.Engine.QueueTimeout.String() }, func(c *config.Config) { c.Engine.QueueTimeout = fv.queueTimeout }},
		{"budget-in-flight", func(c *config.Config) string { return fmt.Sprint(c.Engine.BudgetInFlight) }, func(c *config.Config) { c.Engine.BudgetInFlight = fv.budgetInFlight }},
		{"run-budget", func(c *config.Config) string { return fmt.Sprint(c.Engine.RunBudget) }, func(c *config.Config) { c.Engine.RunBudget = fv.runBudget }},
		{"lease-timeout", func(c *config.Config) string { return c.Engine.LeaseTimeout.String() }, func(c *config.Config) { c.Engine.LeaseTimeout = fv.leaseTimeout }},
		{"grace", func(c *config.Config) string { return c.DrainGrace.String() }, func(c *config.Config) { c.DrainGrace = fv.grace }},
		{"log-level", func(c *config.Config) string { return c.LogLevel }, func(c *config.Config) { c.LogLevel = fv.logLevel }},
	}
	switch {
	case f.Changed("workers") && fv.workers < 1:
		return nil, usageErrorf("--workers must be at least 1")
	case f.Changed("max-queued") && fv.maxQueued < 1:
		return nil, usageErrorf("--max-queued must be at least 1")
	case f.Changed("lease-timeout") && fv.leaseTimeout <= 0:
		return nil, usageErrorf("--lease-timeout must be positive")
	case f.Changed("grace") && fv.grace < 0:
		return nil, usageErrorf("--grace must not be negative")
	case f.Changed("budget-in-flight") && fv.budgetInFlight < 0, f.Changed("run-budget") && fv.runBudget < 0:
		return nil, usageErrorf("budgets must not be negative")
	case f.Changed("log-level") && !validLogLevel(fv.logLevel):
		return nil, usageErrorf("--log-level must be trace, debug, info, warn or error, not %q", fv.logLevel)
	}
	var out []pin
	for _, p := range all {
		if f.Changed(p.flag) {
			out = append(out, p)
		}
	}
	return out, nil
}

func validLogLevel(s string) bool {
	switch s {
	case "trace", "debug", "info", "warn", "error":
		return true
	}
	return false
}

// applyPins sets the pinned settings in c and says which values of the
// file they override.
func applyPins(c *config.Config, pins []pin) (names, notes []string) {
	for _, p := range pins {
		before := p.get(c)
		p.set(c)
		names = append(names, p.flag)
		if after := p.get(c); c.File != "" && before != after {
			notes = append(notes, fmt.Sprintf("--%s pins %s; the file's %s is not used", p.flag, after, before))
		}
	}
	return names, notes
}

// serving is a running `weir serve`: what the API's admin endpoints and
// status view reach, and what SIGHUP reloads.
type serving struct {
	file       string // "" when started on flags alone
	pluginsDir string // where plugin sections are checked against their schemas
	pins       []pin
	log        hclog.Logger
	st         store.Store
	host       *host.Host
	eng        *engine.Engine
	srv        *api.Server
	sock       string
	// tcpCert is the TCP listener's certificate (nil without TLS),
	// read again on every reload.
	tcpCert *tlscert.Cert

	mu   sync.Mutex // serialises reloads
	cur  *config.Config
	info apitypes.ConfigInfo
}

var _ api.Daemon = (*serving)(nil)

// load reads the config file (or the defaults) with the pins applied.
func (d *serving) load() (*config.Config, []string, []string, error) {
	c := config.Default()
	if d.file != "" {
		var err error
		if c, err = config.Load(d.file); err != nil {
			return nil, nil, nil, err
		}
		if err := checkPluginSections(d.pluginsDir, c); err != nil {
			return nil, nil, nil, err
		}
	}
	names, notes := applyPins(c, d.pins)
	return c, names, append(c.Warnings, notes...), nil
}

// ConfigInfo describes the config in force.
func (d *serving) ConfigInfo() apitypes.ConfigInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

// Audit lists the audit stream: refused attempts on other owners' runs.
func (d *serving) Audit(ctx context.Context, afterSeq uint64, limit int) ([]*store.Event, error) {
	var evs []*store.Event
	err := d.st.View(ctx, func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: engine.AuditStream, AfterSeq: afterSeq, Limit: limit})
		return err
	})
	return evs, err
}

// RescanPlugins puts what is installed in the plugins directory now in
// service: `weir plugin install` and `rm` call it.
func (d *serving) RescanPlugins(ctx context.Context) (*apitypes.PluginRescan, error) {
	res, err := d.host.Rescan()
	if err != nil {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("reading the plugins directory %s: %v; the plugins in service are unchanged", d.pluginsDir, err)}
	}
	if err := d.eng.ReportTools(ctx); err != nil {
		d.log.Error("reporting the plugins in service to the fleet's roll", "error", err)
	}
	out := &apitypes.PluginRescan{Added: orEmpty(res.Added), Upgraded: orEmpty(res.Upgraded), Removed: orEmpty(res.Removed),
		Unavailable: []apitypes.PluginProblem{}, Tools: res.Tools, PluginsDir: absPath(d.pluginsDir)}
	for _, p := range res.Unavailable {
		out.Unavailable = append(out.Unavailable, apitypes.PluginProblem{Name: p.Name, Error: p.Error})
	}
	return out, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (d *serving) configVersion() int64 { return d.ConfigInfo().Version }

func (d *serving) current() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur
}

// Reload reads a candidate config, validates it, and swaps it in: engine
// limits (lowering them only limits new starts), log level, tokens, the
// plugin health ping and the socket's access. Anything invalid, or a change that needs a
// restart, leaves the config in force untouched and the error says why.
func (d *serving) Reload(ctx context.Context) (*apitypes.ReloadResult, error) {
	res, err := d.reload(ctx)
	if err != nil {
		d.log.Error("reload refused", "reason", err)
	}
	return res, err
}

func (d *serving) reload(ctx context.Context) (*apitypes.ReloadResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.file == "" {
		return nil, &engine.Error{Code: api.CodeNoConfig, Class: engine.ClassProtocol,
			Message: "the daemon was started without --config: there is no file to reload (restart it with --config FILE)"}
	}
	cand, pinned, notes, err := d.load()
	if err != nil {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%v\nthe config in force (version %d) is unchanged", err, d.info.Version)}
	}
	if rc := config.RestartChanges(d.cur, cand); len(rc) > 0 {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%s changes settings that only a restart applies: %s; the config in force (version %d) is unchanged",
				d.file, strings.Join(rc, ", "), d.info.Version)}
	}
	// The certificate is read on every reload, changed config or not: a
	// renewed certificate keeps its file names.
	var pair *tls.Certificate
	if d.tcpCert != nil {
		if pair, err = tlscert.Read(cand.TCP.TLS.CertFile, cand.TCP.TLS.KeyFile); err != nil {
			return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
				Message: fmt.Sprintf("tcp tls: %v; the config in force (version %d) is unchanged", err, d.info.Version)}
		}
	}
	res := &apitypes.ReloadResult{Previous: d.info.Version, Notes: notes}
	if cand.Hash() == d.cur.Hash() {
		d.setCert(pair, res)
		res.Config = d.info
		return res, nil
	}
	undo, err := applySocketAccess(d.sock, d.cur.Socket, cand.Socket)
	if err != nil {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("socket access: %v; the config in force (version %d) is unchanged", err, d.info.Version)}
	}
	version, err := config.Assign(ctx, d.st, cand.Hash())
	if err != nil {
		undo()
		return nil, &engine.Error{Code: engine.CodeStorage, Class: engine.ClassStorage,
			Message: fmt.Sprintf("recording the config version: %v; the config in force (version %d) is unchanged", err, d.info.Version)}
	}
	// Nothing below can fail: the swap is all or nothing.
	d.setCert(pair, res)
	d.eng.Reload(cand.EngineConfig(version))
	if d.host != nil {
		d.host.SetPing(cand.PluginPing.Interval, cand.PluginPing.Timeout)
	}
	applyMemoryLimit(cand)
	d.log.SetLevel(hclog.LevelFromString(cand.LogLevel))
	d.srv.SetTokens(api.NewTokens(cand.Tokens()))
	d.cur = cand
	d.info = apitypes.ConfigInfo{Version: version, File: cand.File, Hash: cand.Hash(), LoadedAt: time.Now().UTC(), Pinned: pinned}
	res.Changed, res.Config = true, d.info
	if err := d.eng.ReportTools(ctx); err != nil {
		d.log.Error("reporting the plugins in service to the fleet's roll", "error", err)
	}
	d.log.Info("config reloaded", "version", version, "previous", res.Previous, "file", cand.File)
	return res, nil
}

// setCert installs a certificate read by a reload (nil: none) and says
// so in the reload's notes and the log.
func (d *serving) setCert(pair *tls.Certificate, res *apitypes.ReloadResult) {
	if pair == nil {
		return
	}
	d.tcpCert.Set(pair)
	leaf := pair.Leaf
	res.Notes = append(res.Notes, fmt.Sprintf("tcp certificate %q (serial %s) presented from now on, valid until %s",
		leaf.Subject.CommonName, leaf.SerialNumber, leaf.NotAfter.UTC().Format(time.RFC3339)))
	d.log.Info("tcp certificate loaded", "subject", leaf.Subject.CommonName, "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
}

// serve runs the daemon until ctx ends (SIGINT/SIGTERM), then drains.
func (m *Main) serve(ctx context.Context, file, storeFlag string, sharedFlag bool, pins []pin) error {
	if file != "" {
		abs, err := filepath.Abs(file) // a reload finds it whatever the working directory
		if err != nil {
			return usageErrorf("--config: %v", err)
		}
		file = abs
	}
	d := &serving{file: file, pluginsDir: m.PluginsDir, pins: pins, sock: m.SocketPath}
	cfg, pinned, notes, err := d.load()
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	log := m.newLogger("weir", cfg.LogLevel)
	d.log = log
	for _, n := range notes {
		log.Warn(n)
	}

	storeURL, note, err := m.storeURL(storeFlag, cfg)
	if err != nil {
		return err
	}
	if note != "" {
		log.Warn(note)
	}
	shared, err := m.storeShared(sharedFlag, storeURL, cfg)
	if err != nil {
		return err
	}
	bst, h, err := m.openDaemonStore(ctx, log, cfg, storeURL, shared)
	if err != nil {
		return err
	}
	timed := storemetrics.New(bst)
	d.st, d.host = timed, h
	closeAll := func() {
		_ = h.Close()
		_ = bst.Close()
	}
	version, err := config.Assign(ctx, timed, cfg.Hash())
	if err != nil {
		closeAll()
		return m.diskFullHint(fmt.Errorf("recording the config version: %w", err))
	}
	d.cur = cfg
	d.info = apitypes.ConfigInfo{Version: version, File: cfg.File, Hash: cfg.Hash(), LoadedAt: time.Now().UTC(), Pinned: pinned}

	applyMemoryLimit(cfg)
	pool, err := newSandbox(cfg)
	if err != nil {
		closeAll()
		return err
	}
	closeStore := closeAll
	closeAll = func() {
		closeStore()
		_ = pool.Close()
	}
	ecfg := cfg.EngineConfig(version)
	ecfg.Store, ecfg.Tools, ecfg.Logger, ecfg.Scripts = timed, h, log.Named("engine"), pool
	storeDir := m.storeDir()
	ecfg.DiskFree = func() (int64, error) { return badgerstore.FreeSpace(storeDir) }
	eng, err := engine.Open(ecfg)
	if err == nil {
		err = eng.Start(ctx)
	}
	if err != nil {
		closeAll()
		return m.diskFullHint(err)
	}
	d.eng = eng
	d.srv = api.NewServer(eng, log.Named("api"), api.WithDaemon(d), api.WithTokens(api.NewTokens(cfg.Tokens())))

	var servers []*http.Server
	served := make(chan error, 4)
	stopAll := func() {
		dctx, cancel := context.WithTimeout(context.Background(), d.current().DrainGrace)
		defer cancel()
		_ = eng.Stop(dctx)
		for _, s := range servers {
			_ = s.Shutdown(context.Background())
		}
		closeAll()
	}
	// serveOn serves handler on ln. outer, if set, wraps the capped
	// listener (TLS): net/http must see the *tls.Conn itself to answer a
	// plain request on a TLS listener with its 400.
	serveOn := func(ln net.Listener, handler http.Handler, connCtx func(context.Context, net.Conn) context.Context, outer func(net.Listener) net.Listener) {
		// Every listener has the timeouts and connection caps of the
		// config's http block; its streams end when it shuts down.
		s := api.NewHTTPServer(handler, connCtx, cfg.HTTP)
		api.EndStreamsOnShutdown(s)
		servers = append(servers, s)
		ln = api.LimitListener(ln, cfg.HTTP, os.Getuid(), log.Named("http"))
		if outer != nil {
			ln = outer(ln)
		}
		go func() { served <- s.Serve(ln) }()
	}

	ln, err := listenSocket(m.SocketPath, cfg.Socket, log)
	if err != nil {
		stopAll()
		return err
	}
	defer os.Remove(m.SocketPath)
	serveOn(ln, d.srv, api.ConnContext, nil)
	if cfg.TCP != nil {
		tln, err := net.Listen("tcp", cfg.TCP.Address)
		if err != nil {
			stopAll()
			return fmt.Errorf("tcp listener: %w", err)
		}
		var outer func(net.Listener) net.Listener
		if t := cfg.TCP.TLS; t != nil {
			if d.tcpCert, err = tlscert.Load(t.CertFile, t.KeyFile); err != nil {
				tln.Close()
				stopAll()
				return fmt.Errorf("tcp tls: %w", err)
			}
			outer = d.tcpCert.Listener // TLS only: a plain request gets a 400
		}
		serveOn(tln, d.srv, api.ConnContext, outer)
		log.Info("serving on tcp", "address", tln.Addr().String(), "tokens", len(cfg.TCP.Tokens), "tls", cfg.TCP.TLS != nil)
	}
	if cfg.Console != nil {
		cln, err := net.Listen("tcp", cfg.Console.Address)
		if err != nil {
			stopAll()
			return fmt.Errorf("console listener: %w", err)
		}
		cs := console.NewServer(console.New(d.srv, log.Named("console")))
		servers = append(servers, cs)
		// The same connection caps as every other listener: a page's
		// event streams and slow clients cannot exhaust the daemon's files.
		cln = api.LimitListener(cln, cfg.HTTP, os.Getuid(), log.Named("http"))
		go func() { served <- cs.Serve(cln) }()
		log.Info("serving the console", "address", "http://"+cln.Addr().String())
	}
	if cfg.MetricsAddress != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddress)
		if err != nil {
			stopAll()
			return fmt.Errorf("metrics listener: %w", err)
		}
		coll := metrics.NewCollector(metrics.Sources{Engine: eng, Restarts: h.Restarts, ConfigVersion: d.configVersion, Sandbox: pool.Stats,
			Models: func() []string { return modelLabels(h.Tools()) }})
		serveOn(mln, metrics.Handler(metrics.NewRegistry(coll, eng.Histograms(), timed)), nil, nil)
		log.Info("serving metrics", "address", mln.Addr().String())
	}
	log.Info("serving", "socket", m.SocketPath, "data", m.DataDir, "store", storeName(storeURL), "plugins", m.PluginsDir,
		"config_version", version, "config", orNone(file))

	// What a burst of work needed goes back to the system once the daemon
	// is quiet (internal/memreturn).
	rctx, stopReturn := context.WithCancel(context.Background())
	returnTicker := time.NewTicker(memreturn.Interval)
	returned := make(chan struct{})
	go func() { defer close(returned); memreturn.New().Run(rctx, returnTicker.C) }()
	defer func() { stopReturn(); returnTicker.Stop(); <-returned }()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case serveErr = <-served:
			break loop
		case <-hup:
			if res, err := d.Reload(ctx); err == nil && !res.Changed {
				log.Info("config unchanged", "version", res.Config.Version)
			}
		}
	}
	grace := d.current().DrainGrace
	log.Info("stopping: admission closed, draining", "grace", grace)
	stopAll()
	log.Info("stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// storeName writes the store for the log: its URL without the password,
// or "embedded".
func storeName(u string) string {
	if u == "" {
		return "embedded"
	}
	return storeurl.Redact(u)
}

// diskFullHint says what to do when the store refused a write at start
// because its disk is full.
func (m *Main) diskFullHint(err error) error {
	if !errors.Is(err, store.ErrDiskFull) {
		return err
	}
	return fmt.Errorf("%w\nthe disk of the data directory %s has too little free space for the daemon to start: free some, or lower disk { min_free } (the store keeps half of it in reserve)", err, m.DataDir)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// openDaemonStore opens the store (refusing clearly if another daemon holds
// the embedded one) and the plugin host with each plugin's section of the
// config.
func (m *Main) openDaemonStore(ctx context.Context, log hclog.Logger, cfg *config.Config, storeURL string, shared bool) (store.Store, *host.Host, error) {
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data directory: %w", err)
	}
	// The embedded store keeps half the disk watermark in reserve:
	// admission closes at the watermark, and the work in hand has the rest.
	st, err := m.openStore(ctx, log, storeURL, shared, cfg.DiskMinFree/2)
	if err != nil {
		return nil, nil, err
	}
	h, err := host.New(host.Config{PluginsDir: m.PluginsDir, DataDir: m.DataDir, Logger: log.Named("host"), PluginConfig: cfg.Plugins,
		PluginEnv: cfg.PluginEnvs(), PluginMemoryMax: cfg.PluginMemoryMaxes(),
		PingInterval: cfg.PluginPing.Interval, PingTimeout: cfg.PluginPing.Timeout})
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("plugin host: %w", err)
	}
	return st, h, nil
}

// listenSocket listens on the Unix socket with the configured access. A
// stale socket file left by a killed daemon is replaced; a live one is
// refused. The socket is owner-only from its creation until its mode and
// group are set.
func listenSocket(path string, access config.Socket, log hclog.Logger) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another daemon answers on %s", path)
		}
		_ = os.Remove(path)
	}
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, err
	}
	owner := config.Socket{Mode: 0o600, GID: -1}
	if _, err := applySocketAccess(path, owner, access); err != nil {
		ln.Close()
		return nil, err
	}
	if access.Mode&0o066 != 0 {
		warnUnreachable(path, access, log)
	}
	return ln, nil
}

// applySocketAccess sets the socket's group and mode from cur to next, and
// returns how to undo it.
func applySocketAccess(path string, cur, next config.Socket) (undo func(), err error) {
	undo = func() {}
	if next.GID != cur.GID && next.GID >= 0 {
		if err := os.Chown(path, -1, next.GID); err != nil {
			return undo, fmt.Errorf("setting the socket's group to %s: %w", next.Group, err)
		}
		if cur.GID >= 0 {
			undo = func() { _ = os.Chown(path, -1, cur.GID) }
		}
	}
	if err := os.Chmod(path, next.Mode); err != nil {
		undo()
		return func() {}, fmt.Errorf("setting the socket's mode to %04o: %w", next.Mode, err)
	}
	prev := undo
	return func() { _ = os.Chmod(path, cur.Mode); prev() }, nil
}

// warnUnreachable says when a socket shared with a group or everyone sits
// in a directory they cannot enter.
func warnUnreachable(path string, access config.Socket, log hclog.Logger) {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return
	}
	need := os.FileMode(0o001) // others: search
	if access.Mode&0o066 == 0o060 {
		need = 0o010 // group: search
	}
	if fi.Mode().Perm()&need == 0 {
		log.Warn("the socket's mode shares it, but its directory cannot be entered by those it is shared with",
			"socket", path, "mode", fmt.Sprintf("%04o", access.Mode), "directory", dir, "directory_mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
}

// modelLabels names every model the installed chat tools serve as the
// weir_model_* metrics label them, TOOL/ALIAS, so that each has its series
// before its first turn.
func modelLabels(tools []host.ToolManifest) []string {
	var out []string
	for _, t := range tools {
		for _, m := range t.Models {
			out = append(out, t.Name+"/"+m.Alias)
		}
	}
	return out
}
