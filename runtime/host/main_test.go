package host

import (
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/internal/testutil"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(envDialSocket); sock != "" {
		dialPluginSocket(sock, os.Stdout) // a second user's process: no tests
		return
	}
	testutil.Main(m, testutil.Plugins("testkit", "mail", "./testdata/rawecho", "./testdata/badversion", "./testdata/hugeline", "./testdata/rev1", "./testdata/relist"))
}

// bundle is a Host under test with what the test needs to look at.
type bundle struct {
	h          *Host
	pluginsDir string
	dataDir    string
	logs       *testutil.Buffer
}

// setup installs the named test binaries into a fresh plugins directory and
// returns a Host over it, closed at the end of the test. cfg's directories
// and logger are filled in.
func setup(t testing.TB, cfg Config, bins ...string) *bundle {
	t.Helper()
	b := &bundle{pluginsDir: t.TempDir(), dataDir: t.TempDir(), logs: &testutil.Buffer{}}
	for _, name := range bins {
		if _, err := Install(b.pluginsDir, testutil.Plugin(t, name), nil); err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
	}
	cfg.PluginsDir, cfg.DataDir = b.pluginsDir, b.dataDir
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "weir", Output: b.logs, Level: hclog.Debug})
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.h = h
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}
