package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginNewBuildsAndInstalls: the module `weir plugin new` writes
// passes its own test, builds, installs and answers a call, as is.
func TestPluginNewBuildsAndInstalls(t *testing.T) {
	e2e(t, "builds a plugin module with the go command")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build the generated module with")
	}
	sdk, err := filepath.Abs("../../sdk")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	env := map[string]string{"WEIR_DATA": filepath.Join(work, "data")}
	dir := filepath.Join(work, "greet")
	code, out, errb, _ := run(t, env, "plugin", "new", "greet", "--dir", dir, "--sdk", sdk)
	if code != 0 || !strings.Contains(out, "wrote plugin greet") {
		t.Fatalf("plugin new: exit %d\n%s%s", code, out, errb)
	}
	if code, _, errb, _ := run(t, env, "plugin", "new", "greet", "--dir", dir, "--sdk", sdk); code != exitFailed || !strings.Contains(errb, "exists: not overwritten") {
		t.Fatalf("plugin new over an existing module: exit %d %s", code, errb)
	}
	if code, _, errb, _ := run(t, env, "plugin", "new", "Bad.Name", "--sdk", sdk); code != exitUsage {
		t.Fatalf("plugin new with a bad name: exit %d %s", code, errb)
	}
	gocmd := func(args ...string) {
		t.Helper()
		c := exec.Command(gobin, args...)
		c.Dir = dir
		// Offline and as written: no go.work of this repository, no
		// network, no go.mod rewrite.
		c.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=readonly")
		if b, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	gocmd("vet", "./...")
	gocmd("test", "./...")
	gocmd("build", "-o", "greet", ".")

	code, out, errb, _ = run(t, env, "plugin", "install", filepath.Join(dir, "greet"))
	if code != 0 || !strings.Contains(out, "installed greet") {
		t.Fatalf("install: exit %d\n%s%s", code, out, errb)
	}
	code, out, errb, _ = run(t, env, "tool", "call", "greet.hello", "--input", `{"name":"Ada"}`)
	if code != 0 || !strings.Contains(out, `"greeting": "Hello, Ada!"`) {
		t.Fatalf("tool call: exit %d\n%s%s", code, out, errb)
	}
}
