// Package plugintest runs a first-party plugin's tests against the real
// binary, launched by weir's real plugin host: TestMain declares the
// plugin with testutil.Plugins (built once per test binary), and each test
// gets a Host over a fresh plugins and data directory with Start.
package plugintest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/sdk/wire"
)

// Plugin is a Host over one installed plugin.
type Plugin struct {
	Host       *host.Host
	PluginsDir string
	DataDir    string
	// StateDir is the plugin's state directory, DATA/plugin-state/NAME.
	StateDir string
}

// Start installs the plugin name, declared in TestMain with
// testutil.Plugins, into a fresh plugins directory and returns a Host over
// it with config as the plugin's configuration ("" for none). The Host is
// closed when the test ends.
func Start(t testing.TB, name, config string) *Plugin {
	t.Helper()
	plugins, data := t.TempDir(), t.TempDir()
	m, err := host.Install(plugins, testutil.Plugin(t, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := host.Config{PluginsDir: plugins, DataDir: data}
	if config != "" {
		cfg.PluginConfig = map[string]json.RawMessage{m.Name: json.RawMessage(config)}
	}
	h, err := host.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return &Plugin{Host: h, PluginsDir: plugins, DataDir: data, StateDir: filepath.Join(data, "plugin-state", m.Name)}
}

// Call calls tool with input and idempotency key, and decodes the output
// into out (if not nil).
func (p *Plugin) Call(tool, input, key string, out any) error {
	res, err := p.Host.Call(context.Background(), host.CallRequest{Tool: tool, Input: json.RawMessage(input), IdempotencyKey: key, Attempt: 1})
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(res.Output, out)
	}
	return nil
}

// MustCall is Call that fails the test on error.
func (p *Plugin) MustCall(t testing.TB, tool, input, key string, out any) {
	t.Helper()
	if err := p.Call(tool, input, key, out); err != nil {
		t.Fatalf("%s %s: %v", tool, input, err)
	}
}

// WantKind fails the test unless err is a *host.ToolError of kind.
func WantKind(t testing.TB, err error, kind host.Kind) {
	t.Helper()
	if host.KindOf(err) != kind {
		t.Fatalf("got %v, want an error of kind %s", err, kind)
	}
}

// Reconcile asks tool's reconcile probe about the call made with key and
// input, through the host as the engine asks it.
func (p *Plugin) Reconcile(tool, input, key string) (*host.ReconcileResult, error) {
	return p.Host.Reconcile(context.Background(), host.ReconcileRequest{Tool: tool, Input: json.RawMessage(input), IdempotencyKey: key})
}

// CheckConfigSchema compiles the config schema a plugin's manifest
// declares and checks it accepts good, a config with every key the plugin
// reads, and refuses each of bad: an operator's misspelt key or wrong type
// is told at config check instead of being ignored.
func CheckConfigSchema(t testing.TB, schema, good string, bad ...string) {
	t.Helper()
	s, err := wire.CompileSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(good)); err != nil {
		t.Fatalf("the keys the plugin reads are refused: %v", err)
	}
	for _, b := range bad {
		if err := s.Validate([]byte(b)); err == nil {
			t.Errorf("%s accepted", b)
		}
	}
}
