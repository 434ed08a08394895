package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/memreturn"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/console"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/metrics"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storeurl"
	"github.com/weirhq/weir/runtime/tlscert"
)

// ErrLockLost is what Serve returns when the store's lock session ended
// (store.LockHolder): the daemon stopped, and must not take the lock
// again, since another daemon may hold it by then.
var ErrLockLost = errors.New(engine.LockLostReason)

// Serve serves the API on the socket and on the listeners the config
// names (TCP, the console, metrics), reloads on SIGHUP, and runs until
// ctx ends, a listener fails or the store's lock is lost; then it closes
// the daemon (Close), draining for the config's grace.
func (d *Daemon) Serve(ctx context.Context) error {
	cfg := d.Config()
	hk, err := d.newHooks(cfg.Hooks)
	if err != nil {
		return err
	}
	d.hooks = hk
	d.srv = api.NewServer(d.Engine, d.log.Named("api"), api.WithDaemon(d), api.WithTokens(api.NewTokens(cfg.Tokens())),
		api.WithHTTPLimits(cfg.HTTP), api.WithHooks(hk))
	d.served = make(chan error, 4)
	stop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), d.Config().DrainGrace)
		defer cancel()
		_ = d.Close(dctx)
	}
	if err := d.listen(cfg); err != nil {
		stop()
		return err
	}
	defer os.Remove(d.opts.SocketPath)
	d.log.Info("serving", "socket", d.opts.SocketPath, "data", d.opts.DataDir, "store", storeName(d.opts.StoreURL), "plugins", d.opts.PluginsDir,
		"config_version", d.ConfigInfo().Version, "config", orNone(cfg.File))

	// What a burst of work needed goes back to the system once the daemon
	// is quiet (internal/memreturn).
	rctx, stopReturn := context.WithCancel(context.Background())
	returnTicker := time.NewTicker(memreturn.Interval)
	returned := make(chan struct{})
	go func() { defer close(returned); memreturn.New().Run(rctx, returnTicker.C) }()
	defer func() { stopReturn(); returnTicker.Stop(); <-returned }()

	var lost <-chan struct{}
	if l, ok := d.Store.(store.LockHolder); ok {
		lost = l.LockLost()
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case serveErr = <-d.served:
			break loop
		case <-lost:
			// Taking the lock again is unsafe: another daemon may hold it.
			serveErr = ErrLockLost
			d.log.Error("stopping: " + engine.LockLostReason)
			break loop
		case <-hup:
			if res, err := d.Reload(ctx); err == nil && !res.Changed {
				d.log.Info("config unchanged", "version", res.Config.Version)
			}
		}
	}
	d.log.Info("stopping: admission closed, draining", "grace", d.Config().DrainGrace)
	stop()
	d.log.Info("stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// listen opens the socket and the listeners cfg names and serves on them.
func (d *Daemon) listen(cfg *config.Config) error {
	// serveOn serves handler on ln. outer, if set, wraps the capped
	// listener (TLS): net/http must see the *tls.Conn itself to answer a
	// plain request on a TLS listener with its 400.
	serveOn := func(ln net.Listener, handler http.Handler, connCtx func(context.Context, net.Conn) context.Context, outer func(net.Listener) net.Listener) {
		// Every listener has the timeouts and connection caps of the
		// config's http block; its streams end when it shuts down.
		s := api.NewHTTPServer(handler, connCtx, cfg.HTTP)
		api.EndStreamsOnShutdown(s)
		d.servers = append(d.servers, s)
		ln = api.LimitListener(ln, cfg.HTTP, os.Getuid(), d.log.Named("http"))
		if outer != nil {
			ln = outer(ln)
		}
		go func() { d.served <- s.Serve(ln) }()
	}

	ln, err := ListenSocket(d.opts.SocketPath, cfg.Socket, d.log)
	if err != nil {
		return err
	}
	serveOn(ln, d.srv, api.ConnContext, nil)
	if cfg.TCP != nil {
		tln, err := net.Listen("tcp", cfg.TCP.Address)
		if err != nil {
			return fmt.Errorf("tcp listener: %w", err)
		}
		var outer func(net.Listener) net.Listener
		if t := cfg.TCP.TLS; t != nil {
			if d.tcpCert, err = tlscert.Load(t.CertFile, t.KeyFile); err != nil {
				tln.Close()
				return fmt.Errorf("tcp tls: %w", err)
			}
			outer = d.tcpCert.Listener // TLS only: a plain request gets a 400
		}
		serveOn(tln, d.srv, api.ConnContext, outer)
		d.log.Info("serving on tcp", "address", tln.Addr().String(), "tokens", len(cfg.TCP.Tokens), "tls", cfg.TCP.TLS != nil)
	}
	if cfg.Console != nil {
		cln, err := net.Listen("tcp", cfg.Console.Address)
		if err != nil {
			return fmt.Errorf("console listener: %w", err)
		}
		cs := console.NewServer(console.New(d.srv, d.log.Named("console")))
		d.servers = append(d.servers, cs)
		// The same connection caps as every other listener: a page's
		// event streams and slow clients cannot exhaust the daemon's files.
		cln = api.LimitListener(cln, cfg.HTTP, os.Getuid(), d.log.Named("http"))
		go func() { d.served <- cs.Serve(cln) }()
		d.log.Info("serving the console", "address", "http://"+cln.Addr().String())
	}
	if cfg.MetricsAddress != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddress)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		src := metrics.Sources{Engine: d.Engine, Restarts: d.Host.Restarts, ConfigVersion: d.configVersion, Sandbox: d.Sandbox.Stats,
			Models: func() []string { return modelLabels(d.Host.Tools()) },
			Owners: func(ctx context.Context) ([]engine.OwnerStats, error) { return d.Engine.OwnerStats(ctx, "") }}
		if d.Traces != nil {
			src.TraceDropped = d.Traces.Dropped
		}
		cs := []prometheus.Collector{metrics.NewCollector(src), d.Engine.Histograms()}
		if c, ok := d.Store.(prometheus.Collector); ok { // the store's transaction times
			cs = append(cs, c)
		}
		serveOn(mln, metrics.Handler(metrics.NewRegistry(cs...)), nil, nil)
		d.log.Info("serving metrics", "address", mln.Addr().String())
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

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ListenSocket listens on the Unix socket with the configured access. A
// stale socket file left by a killed daemon is replaced; a live one is
// refused. The socket is owner-only from its creation until its mode and
// group are set.
func ListenSocket(path string, access config.Socket, log hclog.Logger) (net.Listener, error) {
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
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
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
