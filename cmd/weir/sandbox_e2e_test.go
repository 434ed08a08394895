package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/sandbox"
)

// Registering or running a script bomb against a real daemon costs a
// sandbox worker, never the daemon: each answers E_SCRIPT_LIMIT naming
// its limit, the daemon keeps its pid and its memory, and other users'
// runs and registrations go on. Before the sandbox the JSON bomb killed the
// daemon with a fatal stack overflow (at run time, a crash loop until the
// run was dead-lettered and others' runs ended E_ATTEMPTS_EXCEEDED), the
// list bomb grew it to 3 GiB, and the deep str() held the registration
// lock for minutes.
func TestScriptBombsCostOnlyAWorker(t *testing.T) {
	d := servingDaemon(t)
	pid := d.cmd.Process.Pid

	registrations := []struct {
		name, src, limit string
	}{
		{"deep JSON", `x = json.decode("[" * 50000000)`, "depth"},
		{"a list of 2^29 elements", `x = [0] * (1 << 29)`, "memory"},
		{"a string of a GiB", `x = "a" * ((1 << 30) - 1)`, "memory"},
		{"str of a 200,000-deep list", "x = []\nfor i in range(200000):\n    x = [x]\ny = str(x)", "depth"},
	}
	var wg sync.WaitGroup
	for _, r := range registrations {
		wg.Go(func() {
			_, err := d.api.FlowRegister(context.Background(), apitypes.SourceFile{Path: "bomb.star", Src: r.src})
			var de *client.DiagnosticsError
			if !errors.As(err, &de) {
				t.Errorf("%s: got %v, want diagnostics", r.name, err)
				return
			}
			want := "script limit (" + r.limit + ")"
			if len(de.Diagnostics) != 1 || de.Diagnostics[0].Code != "E_SCRIPT_LIMIT" || !strings.Contains(de.Diagnostics[0].Message, want) {
				t.Errorf("%s: diagnostics %+v, want one E_SCRIPT_LIMIT containing %q", r.name, de.Diagnostics, want)
			}
		})
	}
	// Another user's registration meanwhile.
	wg.Go(func() {
		d.register(`flow(name = "echo", nodes = [task("e", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"]})])`)
	})
	wg.Wait()

	d.register(`
flow(name = "json_bomb", nodes = [task("a", tool = "testkit.echo", args = lambda ctx: {"x": json.decode("[" * 50000000)}, error = "b"),
    task("b", tool = "testkit.echo")])
flow(name = "list_bomb", nodes = [task("a", tool = "testkit.echo", args = lambda ctx: {"x": [0] * (1 << 29)}, error = "b"),
    task("b", tool = "testkit.echo")])
`)
	bombs := map[string]string{"json_bomb": "depth", "list_bomb": "memory"}
	ids := map[string]string{}
	for flow := range bombs {
		res, err := d.startRun(flow, `{}`, "")
		if err != nil {
			t.Fatal(err)
		}
		ids[flow] = res.RunID
	}
	var others []string
	for i := range 5 {
		res, err := d.startRun("echo", fmt.Sprintf(`{"n": %d}`, i), "")
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, res.RunID)
	}
	for flow, limit := range bombs {
		v := d.waitTerminal(ids[flow])
		if v.Phase != apitypes.PhaseFailed || v.Error == nil || v.Error.Code != "E_SCRIPT_LIMIT" || !strings.Contains(v.Error.Message, "script limit ("+limit+")") {
			t.Errorf("%s: %s %+v, want failed with E_SCRIPT_LIMIT (%s)", flow, v.Phase, v.Error, limit)
		}
	}
	for _, id := range others {
		if v := d.waitTerminal(id); v.Phase != apitypes.PhaseCompleted {
			t.Errorf("another run: %s %+v", v.Phase, v.Error)
		}
	}
	if d.cmd.ProcessState != nil || d.cmd.Process.Pid != pid {
		t.Fatalf("the daemon did not survive\n%s", d.log())
	}
	peak := peakRSS(t, pid)
	t.Logf("daemon peak RSS after the bombs: %d MiB", peak>>20)
	if peak > 1<<30 {
		t.Errorf("the daemon's peak RSS is %d MiB: a bomb's memory reached it", peak>>20)
	}
	d.stop()
}

// peakRSS is a process's peak resident set (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read the daemon's memory from: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// The commands that run scripts without a daemon are protected the same
// way: flow check and exec evaluate in a worker of their own binary and
// answer E_SCRIPT_LIMIT. Before, flow check of the list bomb grew to 8 GiB.
func TestOfflineCommandsSurviveBombs(t *testing.T) {
	e2e(t, "runs the weir binary")
	weir, plugins := binaries(t)
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	catalog := write("tools.json", `{"tools": [{"name": "testkit.echo", "idempotent": true}]}`)
	weirCmd := func(args ...string) (int, string, int64) {
		cmd := exec.Command(weir, append([]string{"--data", filepath.Join(dir, "data"), "--plugins", plugins}, args...)...)
		out, _ := cmd.CombinedOutput()
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		var maxRSS int64
		if ru != nil {
			maxRSS = ru.Maxrss << 10 // kB on Linux; the command's and its workers'
		}
		return cmd.ProcessState.ExitCode(), string(out), maxRSS
	}

	check := write("list.star", "x = [0] * (1 << 29)\n")
	code, out, rss := weirCmd("flow", "check", "--tools", catalog, check)
	t.Logf("flow check of the list bomb: peak RSS %d MiB", rss>>20)
	if code != exitFailed || !strings.Contains(out, "E_SCRIPT_LIMIT: script limit (memory)") {
		t.Fatalf("flow check: exit %d\n%s", code, out)
	}
	// The worker is killed within a few tens of MiB past its cap.
	bound := sandbox.DefaultMemory + 128<<20
	if rss > bound {
		t.Errorf("flow check peaked at %d MiB, over the sandbox's %d MiB", rss>>20, sandbox.DefaultMemory>>20)
	}

	run := write("run.star", `flow(name = "b", nodes = [task("a", tool = "testkit.echo", args = lambda ctx: {"x": "a" * ((1 << 30) - 1)})])`+"\n")
	code, out, rss = weirCmd("exec", run)
	t.Logf("exec of the string bomb: peak RSS %d MiB", rss>>20)
	if code != exitFailed || !strings.Contains(out, "E_SCRIPT_LIMIT") || !strings.Contains(out, "script limit (memory)") {
		t.Fatalf("exec: exit %d\n%s", code, out)
	}
	if rss > bound {
		t.Errorf("exec peaked at %d MiB, over the sandbox's %d MiB", rss>>20, sandbox.DefaultMemory>>20)
	}
}
