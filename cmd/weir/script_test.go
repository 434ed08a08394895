package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/sandbox"
)

// TestMain lets the test binary stand in for the weir command inside the
// scripts: `exec weir ...` (and `weir ... &` in the background) runs main
// in a child process of this very binary. The tests themselves run under
// testutil: the plugins and weir built once, and the leak check after.
func TestMain(m *testing.M) {
	// The weir commands these tests run in-process start this binary as
	// their sandbox worker.
	sandbox.ServeIfWorker()
	testscript.Main(runFunc(func() int {
		return testutil.Run(m, testutil.Plugins("testkit", "mail", "llm", "mcp", "http", "notes"), testutil.Programs("github.com/weirhq/weir/examples/cmd/demo-mcp", "github.com/weirhq/weir/examples/cmd/scripted-llm"), testutil.Weir())
	}), map[string]func(){"weir": main})
}

// runFunc adapts a function to testscript's TestingM.
type runFunc func() int

func (f runFunc) Run() int { return f() }

// TestScripts runs testdata/script/*.txtar: every command's happy path and
// its main refusals, as a user types them. Each script has its own data
// directory ($WEIR_DATA), socket ($WEIR_SOCKET) and home; $PLUGIN_BIN
// holds freshly built plugin binaries to install.
func TestScripts(t *testing.T) {
	bin := testutil.PluginDir(t)
	demoMCP := testutil.Program(t, "demo-mcp")
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// Unix socket paths are short; the work directory may not be.
			sockDir, err := os.MkdirTemp("", "wsc")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(sockDir) })
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("WEIR_DATA", filepath.Join(env.WorkDir, "data"))
			env.Setenv("WEIR_SOCKET", filepath.Join(sockDir, "s"))
			env.Setenv("PLUGIN_BIN", bin)
			// The demo MCP server on the PATH, so a config names it by its
			// bare name (the plugin runs in its state directory).
			env.Setenv("PATH", filepath.Dir(demoMCP)+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"setenv-stdout": setenvStdout,
		},
	})
}

// setenvStdout NAME sets $NAME to the last command's standard output,
// trimmed: a run id printed by one command, passed to the next.
func setenvStdout(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: setenv-stdout NAME")
	}
	out := strings.TrimSpace(ts.ReadFile("stdout"))
	if out == "" || strings.Contains(out, "\n") {
		ts.Fatalf("setenv-stdout: the last command printed %q, not one line", out)
	}
	ts.Setenv(args[0], out)
}
