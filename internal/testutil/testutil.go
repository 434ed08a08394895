// Package testutil holds the helpers weir's tests share, so that no test
// package keeps its own copy: the TestMain every package runs (its tests,
// then a goroutine-leak check), the real plugin and weir binaries built once
// per test binary, polling a condition with a generous timeout, and a
// buffer safe for concurrent writers.
//
// Binaries are built lazily, on the first call that needs them, so a test
// binary whose slow tests are skipped (-short) builds nothing; the ones a
// package may ask for are declared in its TestMain so that they are built
// together by one go build, which compiles them in parallel.
//
// The SDK does not use this package: it is a module of its own, and a
// vendor module cannot import the main module's internal packages.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// pluginModule is the import path under which the first-party plugins live.
const pluginModule = "github.com/weirhq/weir/plugins/"

// Option configures Main and Run.
type Option func(*config)

type config struct {
	plugins  []string
	programs []string
	weir     bool
	ignore   []goleak.Option
}

// Plugins declares the plugin binaries the package's tests may ask for. A
// bare name (testkit, mail, ...) is a first-party plugin under plugins/; a
// name with a slash is a package path as go build takes it, relative to
// the test's directory if it starts with a dot (./testdata/rawecho). The
// binary is named after the last element.
func Plugins(names ...string) Option {
	return func(c *config) { c.plugins = append(c.plugins, names...) }
}

// Programs declares other commands the tests run that are not weir
// plugins (an MCP server to bridge in, say), as package paths go build
// takes; they are built with the plugins and never pinned.
func Programs(pkgs ...string) Option {
	return func(c *config) { c.programs = append(c.programs, pkgs...) }
}

// Program returns the path of the declared program whose package path
// ends with name.
func Program(t testing.TB, name string) string {
	t.Helper()
	for _, d := range declared.programs {
		if path.Base(d) == name {
			dir, err := build()
			if err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "programs", name)
		}
	}
	t.Fatalf("testutil: program %q was not declared in TestMain (declared: %v)", name, declared.programs)
	return ""
}

// Weir declares that the tests need the weir binary itself, and with it
// the declared plugins pinned into a plugins directory by `weir plugin
// install`, as `make build` does for bin/.
func Weir() Option {
	return func(c *config) { c.weir = true }
}

// IgnoreLeaks adds goroutines the leak check accepts. Name each one and
// say why it may outlive the tests: a leak of weir's own is a bug to fix,
// not to ignore.
func IgnoreLeaks(opts ...goleak.Option) Option {
	return func(c *config) { c.ignore = append(c.ignore, opts...) }
}

// The binaries of this test binary: what TestMain declared, and the build
// that happens at most once.
var (
	declared config

	buildOnce sync.Once
	buildDir  string
	buildErr  error

	pinOnce sync.Once
	pinDir  string
	pinErr  error
)

// Main is the whole of a package's TestMain: it runs the tests, removes
// any binaries they built, checks that no goroutine outlived them and
// exits.
func Main(m *testing.M, opts ...Option) {
	os.Exit(Run(m, opts...))
}

// Run is Main without the exit, for a TestMain that has more to do (the
// weir command's tests hand it to testscript). It returns the exit code.
func Run(m *testing.M, opts ...Option) int {
	for _, o := range opts {
		o(&declared)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	if code != 0 {
		return code
	}
	// Every test closes what it started: nothing may outlive it.
	if err := goleak.Find(declared.ignore...); err != nil {
		fmt.Fprintln(os.Stderr, "goroutine leak:", err)
		return 1
	}
	return 0
}

// build builds every declared binary with one go build. Plugins land in
// DIR/plugins, weir in DIR/bin.
func build() (string, error) {
	buildOnce.Do(func() {
		if len(declared.plugins) == 0 && len(declared.programs) == 0 && !declared.weir {
			buildErr = fmt.Errorf("testutil: no binaries declared: list them in TestMain with testutil.Plugins or testutil.Weir")
			return
		}
		dir, err := os.MkdirTemp("", "weir-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		// Readable by every user: a test may run the binaries as another
		// OS user (two users on one socket).
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		if len(declared.plugins) > 0 {
			args := []string{"build", "-o", filepath.Join(dir, "plugins") + string(os.PathSeparator)}
			for _, name := range declared.plugins {
				args = append(args, pluginPackage(name))
			}
			if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("testutil: building plugins %v: %v\n%s", declared.plugins, err, out)
				return
			}
		}
		if len(declared.programs) > 0 {
			args := append([]string{"build", "-o", filepath.Join(dir, "programs") + string(os.PathSeparator)}, declared.programs...)
			if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("testutil: building programs %v: %v\n%s", declared.programs, err, out)
				return
			}
		}
		if declared.weir {
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "weir"), "github.com/weirhq/weir/cmd/weir").CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("testutil: building weir: %v\n%s", err, out)
			}
		}
	})
	return buildDir, buildErr
}

func pluginPackage(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return pluginModule + name
}

// PluginDir returns the directory that holds the declared plugin binaries,
// built and not installed: what a user would install from.
func PluginDir(t testing.TB) string {
	t.Helper()
	if len(declared.plugins) == 0 {
		t.Fatal("testutil: no plugins declared: list them in TestMain with testutil.Plugins")
	}
	dir, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "plugins")
}

// Plugin returns the path of the declared plugin binary name (its last
// path element for a package path).
func Plugin(t testing.TB, name string) string {
	t.Helper()
	for _, d := range declared.plugins {
		if d == name || path.Base(d) == name {
			return filepath.Join(PluginDir(t), path.Base(d))
		}
	}
	t.Fatalf("testutil: plugin %q was not declared in TestMain (declared: %v)", name, declared.plugins)
	return ""
}

// WeirBinary returns the path of the weir binary built from this tree.
func WeirBinary(t testing.TB) string {
	t.Helper()
	if !declared.weir {
		t.Fatal("testutil: the weir binary was not declared: add testutil.Weir() to TestMain")
	}
	dir, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "bin", "weir")
}

// PinnedPlugins returns a plugins directory in which the weir binary has
// installed and pinned every declared plugin, once per test binary. Tests
// that share it must only read it.
func PinnedPlugins(t testing.TB) string {
	t.Helper()
	weir := WeirBinary(t)
	bins := PluginDir(t)
	pinOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(bins), "pinned")
		args := []string{"--plugins", dir, "plugin", "install"}
		for _, name := range declared.plugins {
			args = append(args, filepath.Join(bins, path.Base(name)))
		}
		if out, err := exec.Command(weir, args...).CombinedOutput(); err != nil {
			pinErr = fmt.Errorf("testutil: pinning plugins: %v\n%s", err, out)
			return
		}
		pinDir = dir
	})
	if pinErr != nil {
		t.Fatal(pinErr)
	}
	return pinDir
}

// Eventually calls cond until it returns nil, and fails the test with
// cond's last error if timeout passes first. Polling starts fast and backs
// off to a few tens of milliseconds, so a condition that holds soon is
// seen soon and a slow one does not spin. Give a timeout generous enough
// for a loaded machine: it only bounds how long a failing test hangs.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// SocketDir is a directory for the test's Unix sockets, removed when the
// test ends. A socket's path is at most 108 bytes, which t.TempDir's may
// pass, so it sits directly in the system's temporary directory.
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Buffer is a bytes.Buffer that many goroutines may write while a test
// reads it: the output of a logger, or of a child process's pipes.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
