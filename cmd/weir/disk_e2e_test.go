package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// tmpfsDir mounts a tmpfs of size bytes for the test, or skips saying why.
func tmpfsDir(t *testing.T, size string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI's .ci/run runs as root)")
	}
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillTo writes to path until the disk under dir has less than free bytes
// free (or none at all: ENOSPC ends the filling, not the test).
func fillTo(t *testing.T, dir, path string, free int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 256<<10)
	for {
		n, err := badgerstore.FreeSpace(dir)
		if err != nil {
			t.Fatal(err)
		}
		if n < free {
			return
		}
		if _, err := f.Write(chunk[:min(int64(len(chunk)), max(n-free+1, 1))]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestFullDiskRefusesWorkAndNeverCrashes runs the daemon on a 64 MiB tmpfs
// with a 32 MiB watermark (a 16 MiB reserve). With the disk completely
// full the daemon stays up: new runs are refused (E_DISK_FULL, 503, the
// free space said), a decision is refused and changes nothing, and a run
// whose tool was running waits. Below the watermark but above the reserve
// the work in hand finishes while new runs are still refused; once space
// returns, admission reopens by itself and the refused decision goes
// through.
func TestFullDiskRefusesWorkAndNeverCrashes(t *testing.T) {
	e2e(t, "starts a real daemon on a tmpfs")
	disk := tmpfsDir(t, "64m")
	d := newDaemon(t)
	d.data = filepath.Join(disk, "data")
	d.config = "disk {\n  min_free = \"32MiB\"\n}\nengine {\n  lease_timeout = \"3s\"\n}\n"
	d.start("")
	d.register(`
flow(name = "echo", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"]})])
flow(name = "nap", nodes = [task("t", tool = "testkit.sleep", args = {"ms": 4000})])
flow(name = "gate", nodes = [
    wait("ok", timeout = "30d", next = "go"),
    task("go", tool = "testkit.echo", args = lambda ctx: {"approved": ctx.results["ok"]}),
])`)
	ctx := context.Background()
	var gates []string
	for range 2 {
		res, err := d.startRun("gate", `{}`, "")
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, res.RunID)
	}
	for _, id := range gates {
		testutil.Eventually(t, 30*time.Second, func() error {
			if v, err := d.api.RunGet(ctx, id); err != nil || v.Phase != apitypes.PhaseWaiting {
				return fmt.Errorf("gate run %s not waiting: %v %v", id, v, err)
			}
			return nil
		})
	}

	// A run whose tool is running when the disk fills up entirely.
	nap, err := d.startRun("nap", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if v, err := d.api.RunGet(ctx, nap.RunID); err != nil || v.Progress == nil || v.Progress.Tool == nil {
			return fmt.Errorf("nap not in its tool: %+v %v", v, err)
		}
		return nil
	})

	// The disk completely full: nothing is written, nothing crashes.
	filler := filepath.Join(disk, "filler")
	fillTo(t, disk, filler, 0)
	_, err = d.startRun("echo", `{"n":1}`, "")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != apitypes.CodeDiskFull || ce.HTTPStatus != 503 || !strings.Contains(ce.Message, "free, below the 32.0 MiB watermark") {
		t.Fatalf("a start with the disk full: %v", err)
	}
	if code, out, _ := d.cli("status"); !strings.Contains(out, "E_DISK_FULL") {
		t.Fatalf("status with the disk full: %d %s", code, out)
	}
	_, err = d.api.RunApprove(ctx, gates[1], "ok", json.RawMessage(`"yes"`))
	if !errors.As(err, &ce) || ce.Code != apitypes.CodeDiskFull {
		t.Fatalf("a decision with the disk full: %v", err)
	}
	if v, err := d.api.RunGet(ctx, gates[1]); err != nil || v.Phase != apitypes.PhaseWaiting {
		t.Fatalf("the refused decision changed the run: %v %v", v, err)
	}
	// The nap's tool ends but its step cannot be recorded: it waits.
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, l := range strings.Split(d.log(), "\n") {
			if strings.Contains(l, "writing step") && strings.Contains(l, nap.RunID) && strings.Contains(l, "disk full") {
				return nil
			}
		}
		return fmt.Errorf("the nap's step was not refused yet")
	})
	if v, err := d.api.RunGet(ctx, nap.RunID); err != nil || v.Phase.Terminal() {
		t.Fatalf("the nap ended with the disk full: %+v %v", v, err)
	}

	// Below the watermark but above the store's reserve: admission stays
	// closed, the work in hand goes on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	fillTo(t, disk, filler, 24<<20)
	if _, err := d.startRun("echo", `{"n":2}`, ""); !errors.As(err, &ce) || ce.Code != apitypes.CodeDiskFull {
		t.Fatalf("a start below the watermark: %v", err)
	}
	if _, err := d.api.RunApprove(ctx, gates[0], "ok", json.RawMessage(`"yes"`)); err != nil {
		t.Fatalf("approving a run in hand below the watermark: %v", err)
	}
	for _, id := range []string{gates[0], nap.RunID} {
		if v := d.waitTerminal(id); v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("the run in hand %s ended %s %+v", id, v.Phase, v.Error)
		}
	}

	// Space returns: admission reopens by itself and the refused decision
	// goes through.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		st, err := d.api.Health(ctx)
		if err != nil || !st.Open() {
			return fmt.Errorf("admission did not reopen: %+v %v\n%s", st, err, d.log())
		}
		return nil
	})
	if _, err := d.api.RunApprove(ctx, gates[1], "ok", json.RawMessage(`"now"`)); err != nil {
		t.Fatalf("the decision once space returned: %v", err)
	}
	res, err := d.startRun("echo", `{"n":3}`, "")
	if err != nil {
		t.Fatalf("a start once space returned: %v", err)
	}
	for _, id := range []string{gates[1], res.RunID} {
		if v := d.waitTerminal(id); v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("run %s ended %s %+v", id, v.Phase, v.Error)
		}
	}
	d.stop()
}

// TestFullDiskOnPostgresRefusesNewRuns: on a PostgreSQL store the
// watermark watches the data directory's disk (the plugins' state), which
// a daemon with no DATA/store could not read before: with it full, new
// runs are refused (E_DISK_FULL, and weir status says so) and nothing is
// warned of run by run; once space returns a start goes through.
func TestFullDiskOnPostgresRefusesNewRuns(t *testing.T) {
	e2e(t, "starts a real daemon on a tmpfs and PostgreSQL")
	disk := tmpfsDir(t, "64m")
	d := newDaemon(t)
	d.data = filepath.Join(disk, "data")
	d.config = "disk {\n  min_free = \"32MiB\"\n}\n"
	d.start("", "WEIR_STORE="+pgtest.Schema(t))
	d.register(`flow(name = "echo", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"]})])`)
	if v := d.waitStarted(t, `{"n":1}`); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("the first run ended %s %+v", v.Phase, v.Error)
	}
	filler := filepath.Join(disk, "filler")
	fillTo(t, disk, filler, 24<<20)
	for n := range 3 {
		_, err := d.startRun("echo", fmt.Sprintf(`{"n":%d}`, 10+n), "")
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != apitypes.CodeDiskFull || ce.HTTPStatus != 503 || !strings.Contains(ce.Message, "below the 32.0 MiB watermark") {
			t.Fatalf("a start with the data directory's disk below the watermark: %v", err)
		}
	}
	if code, out, _ := d.cli("status"); !strings.Contains(out, "E_DISK_FULL") {
		t.Fatalf("status with the disk below the watermark: %d %s", code, out)
	}
	if n := strings.Count(d.log(), "reading the disk's free space"); n != 0 {
		t.Errorf("%d warnings that the disk's free space could not be read:\n%s", n, d.log())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if v := d.waitStarted(t, `{"n":2}`); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("a run once space returned ended %s %+v", v.Phase, v.Error)
	}
	d.stop()
}

// waitStarted starts a run of the echo flow with input and waits for its end.
func (d *daemon) waitStarted(t *testing.T, input string) *apitypes.Run {
	t.Helper()
	res, err := d.startRun("echo", input, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.waitTerminal(res.RunID)
}
