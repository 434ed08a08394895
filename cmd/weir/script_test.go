package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary stand in for the weir command inside the
// scripts: `exec weir ...` (and `weir ... &` in the background) runs main
// in a child process of this very binary.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"weir": main})
}

var (
	scriptPluginsOnce sync.Once
	scriptPlugins     string
	scriptPluginsErr  error
)

// pluginBinaries builds the testkit and mail plugins once, uninstalled:
// the scripts install them as a user would.
func pluginBinaries(t *testing.T) string {
	t.Helper()
	scriptPluginsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weir-script-plugins-")
		if err != nil {
			scriptPluginsErr = err
			return
		}
		scriptPlugins = dir
		out, err := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "../../plugins/testkit", "../../plugins/mail").CombinedOutput()
		if err != nil {
			scriptPluginsErr = fmt.Errorf("building plugins: %v\n%s", err, out)
		}
	})
	if scriptPluginsErr != nil {
		t.Fatal(scriptPluginsErr)
	}
	return scriptPlugins
}

// TestScripts runs testdata/script/*.txtar: every command's happy path and
// its main refusals, as a user types them. Each script has its own data
// directory ($WEIR_DATA), socket ($WEIR_SOCKET) and home; $PLUGIN_BIN
// holds freshly built plugin binaries to install.
func TestScripts(t *testing.T) {
	bin := pluginBinaries(t)
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
