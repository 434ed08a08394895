package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

const migrateFlow = `
flow(name = "held", nodes = [
    task("first", tool = "testkit.echo", args = {"step": 1}, next = "hold"),
    wait("hold", timeout = "1h", next = "after"),
    task("after", tool = "testkit.echo", args = {"v": 1}),
])
`

// TestCrashMigrateDoneOnce deploys new versions of a flow while a run of
// it is parked on a person's wait, as a user does with the CLI: `weir
// flow register` warns of a version the run does not fit (a renamed
// wait), and `weir run migrate` refuses it; then a version it fits, and
// a migration to it killed with SIGKILL before its commit changes
// nothing (the run is on its own version after the restart), one killed
// after its commit is done (the retry finds the run on the latest
// version), and the run completes under the new version with one
// migrated event.
func TestCrashMigrateDoneOnce(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	d := newDaemon(t)
	d.start("")
	d.register(migrateFlow)
	res, err := d.startRun("held", `{}`, "held-1")
	if err != nil {
		t.Fatal(err)
	}
	v1 := d.runIs(res.RunID, "parked", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting && len(v.Waits) > 0 }).Version
	dir := t.TempDir()
	file := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	code, out, errb := d.cli("flow", "register", file("renamed.star", strings.ReplaceAll(migrateFlow, `"hold"`, `"review"`)))
	if code != 0 || !strings.Contains(out, "W_PARKED_INCOMPATIBLE") || !strings.Contains(out, res.RunID) || !strings.Contains(out, "parked at hold") {
		t.Fatalf("register of a version the run does not fit (%d): %s %s", code, out, errb)
	}
	if code, _, errb := d.cli("run", "migrate", res.RunID, "--to", "latest"); code == 0 || !strings.Contains(errb, apitypes.CodeIncompatible) {
		t.Fatalf("migrate to a version the run does not fit exited %d: %s", code, errb)
	}
	if code, out, errb := d.cli("flow", "register", file("fixed.star", strings.Replace(migrateFlow, `{"v": 1}`, `{"v": 2}`, 1))); code != 0 || strings.Contains(out, "W_PARKED") {
		t.Fatalf("register of a version the run fits (%d): %s %s", code, out, errb)
	}
	d.stop()

	migrate := []string{"run", "migrate", res.RunID, "--to", "latest", "--reason", "the fix"}
	d.start("before-migrate")
	if code, _, _ := d.cli(migrate...); code == 0 {
		t.Fatal("the migration was answered although the daemon died first")
	}
	d.waitKilled()
	d.start("after-migrate")
	if v := d.runIs(res.RunID, "parked", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting }); v.Version != v1 {
		t.Fatalf("the run is on %s after a migration that never committed, want %s", v.Version, v1)
	}
	if code, _, _ := d.cli(migrate...); code == 0 {
		t.Fatal("the migration was answered although the daemon died first")
	}
	d.waitKilled()
	d.start("")
	code, out, errb = d.cli(migrate...)
	if code != 0 || !strings.Contains(out, "on the latest version of held already") {
		t.Fatalf("the retried migration (%d): %s %s", code, out, errb)
	}
	if v := d.runIs(res.RunID, "parked", func(v *apitypes.Run) bool { return v.Phase == apitypes.PhaseWaiting }); v.Version == v1 {
		t.Fatalf("the run is on its first version after a committed migration")
	}
	if code, _, errb := d.cli("run", "approve", res.RunID, "hold"); code != 0 {
		t.Fatalf("approve: %s", errb)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted || string(v.Output) != `{"v":2}` {
		t.Fatalf("run ended %s %s %+v, want completed under the new version\n%s", v.Phase, v.Output, v.Error, d.log())
	}
	if n := countEvents(d.events(res.RunID), "migrated"); n != 1 {
		t.Errorf("%d migrated events, want 1", n)
	}
	if code, _, errb := d.cli(migrate...); code == 0 || !strings.Contains(errb, apitypes.CodeNotWaiting) {
		t.Errorf("migrate of an ended run exited %d: %s", code, errb)
	}
	d.stop()
}
