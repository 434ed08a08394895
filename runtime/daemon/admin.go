package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/telemetry"
	"github.com/weirhq/weir/runtime/tlscert"
)

// ConfigInfo describes the config in force.
func (d *Daemon) ConfigInfo() apitypes.ConfigInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

// ServersDown lists the servers the plugins cannot reach, by plugin, as
// each last said.
func (d *Daemon) ServersDown() []apitypes.ServerDown {
	if d.Host == nil {
		return nil
	}
	health := d.Host.Health()
	names := make([]string, 0, len(health))
	for n := range health {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []apitypes.ServerDown
	for _, n := range names {
		for _, s := range health[n].Down {
			out = append(out, apitypes.ServerDown{Plugin: n, Name: s.Name, Since: s.Since, Error: s.Error})
		}
	}
	return out
}

// Config is the config in force.
func (d *Daemon) Config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur
}

func (d *Daemon) configVersion() int64 { return d.ConfigInfo().Version }

// Audit lists the audit stream: refused attempts on other owners' runs.
func (d *Daemon) Audit(ctx context.Context, afterSeq uint64, limit int) ([]*store.Event, error) {
	var evs []*store.Event
	err := d.Store.View(ctx, func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: engine.AuditStream, AfterSeq: afterSeq, Limit: limit})
		return err
	})
	return evs, err
}

// RescanPlugins puts what is installed in the plugins directory now in
// service: `weir plugin install` and `rm` call it.
func (d *Daemon) RescanPlugins(ctx context.Context) (*apitypes.PluginRescan, error) {
	res, err := d.Host.Rescan()
	if err != nil {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("reading the plugins directory %s: %v; the plugins in service are unchanged", d.opts.PluginsDir, err)}
	}
	if err := d.Engine.ReportTools(ctx); err != nil {
		d.log.Error("reporting the plugins in service to the fleet's roll", "error", err)
	}
	out := &apitypes.PluginRescan{Added: orEmpty(res.Added), Upgraded: orEmpty(res.Upgraded), Removed: orEmpty(res.Removed),
		Unavailable: []apitypes.PluginProblem{}, Tools: res.Tools, PluginsDir: absPath(d.opts.PluginsDir)}
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

// absPath is p made absolute for display (p itself if that fails).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// Reload reads a candidate config, validates it, and swaps it in: engine
// limits (lowering them only limits new starts), log level, tokens, the
// plugin health ping and the socket's access. Anything invalid, or a
// change that needs a restart, leaves the config in force untouched and
// the error says why.
func (d *Daemon) Reload(ctx context.Context) (*apitypes.ReloadResult, error) {
	res, err := d.reload(ctx)
	if err != nil {
		d.log.Error("reload refused", "reason", err)
	}
	return res, err
}

func (d *Daemon) reload(ctx context.Context) (*apitypes.ReloadResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.opts.Load == nil {
		return nil, &engine.Error{Code: api.CodeNoConfig, Class: engine.ClassProtocol,
			Message: "the daemon was started without --config: there is no file to reload (restart it with --config FILE)"}
	}
	cand, pinned, notes, err := d.opts.Load()
	if err != nil {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%v\nthe config in force (version %d) is unchanged", err, d.info.Version)}
	}
	if rc := config.RestartChanges(d.cur, cand); len(rc) > 0 {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%s changes settings that only a restart applies: %s; the config in force (version %d) is unchanged",
				cand.File, strings.Join(rc, ", "), d.info.Version)}
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
	if _, err := d.newHooks(cand.Hooks); err != nil {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%v; the config in force (version %d) is unchanged", err, d.info.Version)}
	}
	undo, err := applySocketAccess(d.opts.SocketPath, d.cur.Socket, cand.Socket)
	if err != nil {
		return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("socket access: %v; the config in force (version %d) is unchanged", err, d.info.Version)}
	}
	// Another telemetry block: its exporter is built before anything
	// changes, and put in force with the rest.
	var traces *telemetry.Exporter
	if d.Traces != nil && !reflect.DeepEqual(d.cur.Telemetry, cand.Telemetry) {
		// Not the request's context: the exporter outlives the request.
		if traces, err = openTraces(context.WithoutCancel(ctx), d.log, &cand.Telemetry); err != nil {
			undo()
			return nil, &engine.Error{Code: api.CodeConfig, Class: engine.ClassProtocol,
				Message: fmt.Sprintf("%v; the config in force (version %d) is unchanged", err, d.info.Version)}
		}
	}
	version, err := config.Assign(ctx, d.Store, cand.Hash())
	if err != nil {
		if traces != nil {
			_ = traces.Shutdown(context.Background())
		}
		undo()
		return nil, &engine.Error{Code: engine.CodeStorage, Class: engine.ClassStorage,
			Message: fmt.Sprintf("recording the config version: %v; the config in force (version %d) is unchanged", err, d.info.Version)}
	}
	// Nothing below can fail: the swap is all or nothing.
	d.setCert(pair, res)
	d.Engine.Reload(cand.EngineConfig(version))
	d.Host.SetPing(cand.PluginPing.Interval, cand.PluginPing.Timeout)
	ApplyMemoryLimit(cand)
	d.log.SetLevel(hclog.LevelFromString(cand.LogLevel))
	if traces != nil {
		d.retireTraces(d.Traces.swap(traces))
	}
	d.srv.SetTokens(api.NewTokens(cand.Tokens()))
	if d.hooks != nil {
		_ = d.hooks.SetHooks(cand.Hooks) // checked above
	}
	d.cur = cand
	d.info = apitypes.ConfigInfo{Version: version, File: cand.File, Hash: cand.Hash(), LoadedAt: time.Now().UTC(), Pinned: pinned}
	res.Changed, res.Config = true, d.info
	if err := d.Engine.ReportTools(ctx); err != nil {
		d.log.Error("reporting the plugins in service to the fleet's roll", "error", err)
	}
	d.log.Info("config reloaded", "version", version, "previous", res.Previous, "file", cand.File)
	return res, nil
}

// setCert installs a certificate read by a reload (nil: none) and says
// so in the reload's notes and the log.
func (d *Daemon) setCert(pair *tls.Certificate, res *apitypes.ReloadResult) {
	if pair == nil {
		return
	}
	d.tcpCert.Set(pair)
	leaf := pair.Leaf
	res.Notes = append(res.Notes, fmt.Sprintf("tcp certificate %q (serial %s) presented from now on, valid until %s",
		leaf.Subject.CommonName, leaf.SerialNumber, leaf.NotAfter.UTC().Format(time.RFC3339)))
	d.log.Info("tcp certificate loaded", "subject", leaf.Subject.CommonName, "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
}
