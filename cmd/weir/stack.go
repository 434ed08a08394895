package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// stack is the engine with its store and plugin host: what `weir serve`
// runs and `weir exec` embeds.
type stack struct {
	store   *badgerstore.Store
	host    *host.Host
	eng     *engine.Engine
	sandbox *sandbox.Pool
}

// storeDir is where the embedded store lives under the data directory.
func (m *Main) storeDir() string { return filepath.Join(m.DataDir, "store") }

// openStack opens the store (refusing clearly if a daemon holds it), the
// plugin host and the engine, and starts the engine (recovery included).
func (m *Main) openStack(ctx context.Context, log hclog.Logger, cfg engine.Config, plugins *config.Config) (*stack, error) {
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	st, err := badgerstore.Open(m.storeDir(), badgerstore.Options{Logger: log.Named("store")})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return nil, fmt.Errorf("the data directory %s is in use by a running weir daemon: stop it, use its commands (weir run ...), or pass another --data", m.DataDir)
		}
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
