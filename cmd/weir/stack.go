package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/config"
	rtdaemon "github.com/weirhq/weir/runtime/daemon"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

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
	if env := config.KnobByHCL("store.url").Env; u == "" {
		u, from = m.Env(env), env
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
	if env := config.KnobByHCL("store.shared").Env; !shared {
		if v := m.Env(env); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return false, usageErrorf("%s=%q: want true or false", env, v)
			}
			shared, from = b, env
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

// openEmbedded builds the engine weir exec runs in its own process, with
// its store, its plugin host (with the plugin blocks of plugins, if any)
// and its sandbox, and starts it (recovery included).
func (m *Main) openEmbedded(ctx context.Context, log hclog.Logger, plugins *config.Config, storeURL string, shared bool) (*rtdaemon.Daemon, error) {
	return rtdaemon.Open(ctx, rtdaemon.Options{DataDir: m.DataDir, PluginsDir: m.PluginsDir, StoreURL: storeURL, Shared: shared,
		Config: plugins, Logger: log, Embedded: true})
}

// newLogger is the hclog logger of the daemon and of exec, writing text
// lines or (format "json") one JSON object per line.
func (m *Main) newLogger(name, level, format string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.LevelFromString(level), Output: m.Stderr, JSONFormat: format == "json"})
}
