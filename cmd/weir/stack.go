package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
	"github.com/weirhq/weir/runtime/store/pgstore"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

// stack is the engine with its store and plugin host: what `weir serve`
// runs and `weir exec` embeds.
type stack struct {
	store   store.Store
	host    *host.Host
	eng     *engine.Engine
	sandbox *sandbox.Pool
}

// storeDir is where the store lives under the data directory, for the
// daemon and for exec alike.
func (m *Main) storeDir() string { return filepath.Join(m.DataDir, "store") }

// storeURL picks the store: the --store flag, else WEIR_STORE, else the
// config file's store block (cfg may be nil). "" is the embedded store in
// the data directory. note says when the flag or the environment
// overrides the file.
func (m *Main) storeURL(flag string, cfg *config.Config) (u, note string, err error) {
	var file string
	if cfg != nil {
		file = cfg.Store.URL
	}
	u, from := flag, "--store"
	if u == "" {
		u, from = m.Env("WEIR_STORE"), "WEIR_STORE"
	}
	if u == "" {
		return file, "", nil
	}
	if err := storeurl.Check(u); err != nil {
		return "", "", usageErrorf("%s: %v", from, err)
	}
	if file != "" && file != u {
		note = fmt.Sprintf("%s (%s) overrides the config file's store (%s)", from, storeurl.Redact(u), storeurl.Redact(file))
	}
	return u, note, nil
}

// storeShared says whether the store is shared by a fleet of daemons:
// --shared, else WEIR_STORE_SHARED, else the config file's store block
// (cfg may be nil). Only a PostgreSQL store (u) can be shared.
func (m *Main) storeShared(flag bool, u string, cfg *config.Config) (bool, error) {
	shared, from := flag, "--shared"
	if !shared {
		if v := m.Env("WEIR_STORE_SHARED"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return false, usageErrorf("WEIR_STORE_SHARED=%q: want true or false", v)
			}
			shared, from = b, "WEIR_STORE_SHARED"
		}
	}
	if !shared && cfg != nil && cfg.Store.Shared {
		shared, from = true, "the config file's store block"
	}
	if shared && u == "" {
		return false, usageErrorf("%s asks for a shared store, but the store is the embedded one in the data directory: a fleet shares a PostgreSQL store (--store, WEIR_STORE or store { url })", from)
	}
	return shared, nil
}

// openStore opens the store u names: the PostgreSQL database (shared by a
// fleet of daemons if shared), or for "" the embedded store in the data
// directory, keeping minFree bytes free (refusing clearly if a daemon
// holds it).
func (m *Main) openStore(ctx context.Context, log hclog.Logger, u string, shared bool, minFree int64) (store.Store, error) {
	noSync, err := unsafeNoSync(log)
	if err != nil {
		return nil, err
	}
	if u != "" {
		if noSync {
			return nil, errors.New("WEIR_UNSAFE_NO_SYNC is for the embedded store; a PostgreSQL store's durability is the database's setting")
		}
		st, err := pgstore.Open(ctx, u, pgstore.Options{Logger: log.Named("store"), Shared: shared})
		if errors.Is(err, store.ErrLocked) {
			if shared {
				return nil, fmt.Errorf("%w: stop that daemon first, or run it with the store shared too", err)
			}
			return nil, fmt.Errorf("%w: stop it, use its commands (weir run ...), or run every daemon on the database with the store shared (a fleet: --shared or store { shared = true })", err)
		}
		if err == nil && shared {
			log.Info("store shared with a fleet of daemons", "store", storeurl.Redact(u))
		}
		return st, err
	}
	st, err := badgerstore.Open(m.storeDir(), badgerstore.Options{Logger: log.Named("store"), MinFreeBytes: minFree, UnsafeNoSync: noSync})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("the data directory %s is in use by a running weir daemon: stop it, use its commands (weir run ...), or pass another --data", m.DataDir)
	}
	return st, err
}

// openStack opens the store, the plugin host and the engine, and starts
// the engine (recovery included).
func (m *Main) openStack(ctx context.Context, log hclog.Logger, cfg engine.Config, plugins *config.Config, storeURL string, shared bool) (*stack, error) {
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	st, err := m.openStore(ctx, log, storeURL, shared, 0)
	if err != nil {
		return nil, err
	}
	hc := host.Config{PluginsDir: m.PluginsDir, DataDir: m.DataDir, Logger: log.Named("host")}
	if plugins != nil {
		hc.PluginConfig, hc.PluginEnv, hc.PluginMemoryMax = plugins.Plugins, plugins.PluginEnvs(), plugins.PluginMemoryMaxes()
	}
	h, err := host.New(hc)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("plugin host: %w", err)
	}
	pool, err := newSandbox(plugins)
	if err != nil {
		h.Close()
		st.Close()
		return nil, err
	}
	cfg.Store, cfg.Tools, cfg.Logger, cfg.Scripts = st, h, log.Named("engine"), pool
	eng, err := engine.Open(cfg)
	if err == nil {
		err = eng.Start(ctx)
	}
	if err != nil {
		h.Close()
		st.Close()
		pool.Close()
		return nil, err
	}
	return &stack{store: st, host: h, eng: eng, sandbox: pool}, nil
}

// close drains the engine for as long as ctx allows, then closes the host
// and the store. Records are written before it returns.
func (s *stack) close(ctx context.Context) error {
	err := s.eng.Stop(ctx)
	if herr := s.host.Close(); err == nil {
		err = herr
	}
	if serr := s.store.Close(); err == nil {
		err = serr
	}
	_ = s.sandbox.Close()
	return err
}

// newLogger is the hclog logger of the daemon and of exec.
func (m *Main) newLogger(name, level string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.LevelFromString(level), Output: m.Stderr})
}

// unsafeNoSync reads WEIR_UNSAFE_NO_SYNC: "1" opens the embedded store
// without syncing its commits, which loses acknowledged work on an OS
// crash or a power loss. It is for measuring what durability costs (the
// bench's "cost of durability" row), so it is an environment variable
// with no flag or config field, and the log says so at every start.
func unsafeNoSync(log hclog.Logger) (bool, error) {
	switch v := os.Getenv("WEIR_UNSAFE_NO_SYNC"); v {
	case "":
		return false, nil
	case "1":
		log.Warn("WEIR_UNSAFE_NO_SYNC=1: the store does not sync its commits; acknowledged runs and steps are LOST on an OS crash or power loss. For benchmarks only, never in production")
		return true, nil
	default:
		return false, fmt.Errorf("WEIR_UNSAFE_NO_SYNC=%q: only 1 (commits not synced, for benchmarks) or unset", v)
	}
}
