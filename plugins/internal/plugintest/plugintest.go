// Package plugintest runs a first-party plugin's tests against the real
// binary, launched by weir's real plugin host: TestMain builds the binary
// once with Build, and each test gets a Host over a fresh plugins and data
// directory with Start.
package plugintest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/runtime/host"
)

// Build builds the main package in the current directory into a new
// temporary directory and returns the binary's path and a function that
// removes it.
func Build(name string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "weir-plugin-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Main builds the plugin, runs the tests and exits: the whole of a
// plugin's TestMain.
func Main(m *testing.M, name string, bin *string) {
	path, cleanup, err := Build(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = path
	code := m.Run()
	cleanup()
	if code == 0 {
		// Every Host is closed by its test: nothing it started may
		// outlive it.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Plugin is a Host over one installed plugin.
type Plugin struct {
	Host       *host.Host
	PluginsDir string
	DataDir    string
	// StateDir is the plugin's state directory, DATA/plugin-state/NAME.
	StateDir string
}

// Start installs bin into a fresh plugins directory and returns a Host over
// it with config as the plugin's configuration ("" for none). The Host is
// closed when the test ends.
func Start(t testing.TB, bin, config string) *Plugin {
	t.Helper()
	plugins, data := t.TempDir(), t.TempDir()
	m, err := host.Install(plugins, bin, nil)
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
