package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// TestPluginInstallReachesTheRunningDaemon: install, upgrade and rm in a
// running daemon's plugins directory take effect in that daemon at once,
// with no restart: a flow using the new plugin registers and runs right
// after the install, and no longer registers after the rm.
func TestPluginInstallReachesTheRunningDaemon(t *testing.T) {
	e2e(t, "starts a real daemon")
	bin := testutil.PluginDir(t)
	d := newDaemon(t)
	d.plugins = filepath.Join(t.TempDir(), "plugins") // this daemon's own
	env := map[string]string{"WEIR_SOCKET": d.socket, "WEIR_DATA": d.data, "WEIR_PLUGINS": d.plugins}
	weir := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errb, _ := run(t, env, args...)
		if code != want {
			t.Fatalf("weir %s: exit %d, want %d\nstdout: %s\nstderr: %s\n%s", strings.Join(args, " "), code, want, out, errb, d.log())
		}
		return out, errb
	}
	if out, _ := weir(0, "plugin", "install", filepath.Join(bin, "testkit")); !strings.Contains(out, "no daemon answers on") {
		t.Fatalf("install with no daemon printed %q", out)
	}
	d.start("")

	const mailFlow = `flow(name = "post", nodes = [task("send", tool = "mail.send", at_most_once = True, args = lambda ctx: {"to": "a@example.com", "body": "hi"})])`
	src := filepath.Join(t.TempDir(), "post.star")
	if err := os.WriteFile(src, []byte(mailFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := weir(exitFailed, "flow", "register", src); !strings.Contains(out, "E_UNKNOWN_TOOL") {
		t.Fatalf("register before the install printed %q", out)
	}

	out, _ := weir(0, "plugin", "install", filepath.Join(bin, "mail"))
	if !strings.Contains(out, "installed mail") || !strings.Contains(out, "rescanned") || !strings.Contains(out, "added mail") {
		t.Fatalf("install printed %q", out)
	}
	weir(0, "flow", "register", src)
	if _, v := d.runToEnd("post", `{}`, ""); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run of the new plugin's tool ended %s: %+v", v.Phase, v.Error)
	}

	// A new build of testkit: upgraded in place, its tools still known.
	b, err := os.ReadFile(filepath.Join(bin, "testkit"))
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := filepath.Join(t.TempDir(), "testkit")
	if err := os.WriteFile(rebuilt, append(b, "\nanother build\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, _ := weir(0, "plugin", "install", rebuilt); !strings.Contains(out, "upgraded testkit") {
		t.Fatalf("reinstall printed %q", out)
	}
	d.register(`flow(name = "echo", nodes = [task("e", tool = "testkit.echo", args = lambda ctx: {"x": 1})])`)
	if _, v := d.runToEnd("echo", `{}`, ""); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run on the new build ended %s: %+v", v.Phase, v.Error)
	}

	if out, _ := weir(0, "plugin", "rm", "mail"); !strings.Contains(out, "removed mail from") || !strings.Contains(out, ": removed mail;") {
		t.Fatalf("rm printed %q", out)
	}
	if out, _ := weir(exitFailed, "flow", "register", src); !strings.Contains(out, "E_UNKNOWN_TOOL") {
		t.Fatalf("register after the rm printed %q", out)
	}
	// The offline check agrees with the daemon.
	if out, _ := weir(exitFailed, "flow", "check", src); !strings.Contains(out, "E_UNKNOWN_TOOL") {
		t.Fatalf("check after the rm printed %q", out)
	}
	if _, errb := weir(exitFailed, "plugin", "rm", "mail"); !strings.Contains(errb, "no such plugin installed") {
		t.Fatalf("second rm said %q", errb)
	}
	// An install into another directory than the daemon's stands, and
	// says the daemon does not see it.
	other := filepath.Join(t.TempDir(), "other")
	code, out, errb, _ := run(t, map[string]string{"WEIR_SOCKET": d.socket, "WEIR_DATA": d.data, "WEIR_PLUGINS": other},
		"plugin", "install", filepath.Join(bin, "mail"))
	if code != 0 || !strings.Contains(out, "installed mail") || !strings.Contains(errb, "serves the plugins in "+d.plugins) {
		t.Fatalf("install elsewhere: exit %d\n%s%s", code, out, errb)
	}
	d.stop()
}
