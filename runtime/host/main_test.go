package host

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

// binDir holds the real plugin binaries, built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "weir-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	// One go build for all of them: the packages compile in parallel and
	// the binaries land in dir under their package names.
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator),
		"../../plugins/testkit", "../../plugins/mail", "./testdata/rawecho", "./testdata/badversion")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building test plugins:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		// Every Host is closed by its test; nothing it started may
		// outlive it.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			return 1
		}
	}
	return code
}

// bundle is a Host under test with what the test needs to look at.
type bundle struct {
	h          *Host
	pluginsDir string
	dataDir    string
	logs       *syncBuffer
}

// setup installs the named test binaries into a fresh plugins directory and
// returns a Host over it, closed at the end of the test. cfg's directories
// and logger are filled in.
func setup(t testing.TB, cfg Config, bins ...string) *bundle {
	t.Helper()
	b := &bundle{pluginsDir: t.TempDir(), dataDir: t.TempDir(), logs: &syncBuffer{}}
	for _, name := range bins {
		if _, err := Install(b.pluginsDir, filepath.Join(binDir, name), nil); err != nil {
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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
