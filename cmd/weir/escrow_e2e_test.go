package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const escrowFlows = `
flow(name = "esc_kid", nodes = [
    task("pay", tool = "testkit.cost", args = {"cost": 3}, next = "hold"),
    wait("hold", timeout = "30d"),
])
flow(name = "esc_parent", budget = 100, nodes = [
    fanout("fan", items = lambda ctx: [1, 2, 3, 4], flow = "esc_kid", width = 3, depth = 1, max_items = 4, budget = 30),
])
flow(name = "park_kid", nodes = [wait("hold", timeout = "30d")])
flow(name = "fan_park", nodes = [
    fanout("fan", items = lambda ctx: [1, 2], flow = "park_kid", width = 2, depth = 1, max_items = 2,
           timeout = "2s", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"fan": ctx.results["fan"]}),
])
`

// kill ends the daemon with SIGKILL, as a crash would.
func (d *daemon) kill() {
	d.t.Helper()
	_ = d.cmd.Process.Kill()
	d.waitKilled()
}

// runIs waits until the run satisfies cond.
func (d *daemon) runIs(id, what string, cond func(*apitypes.Run) bool) *apitypes.Run {
	d.t.Helper()
	var v *apitypes.Run
	testutil.Eventually(d.t, 30*time.Second, func() error {
		var err error
		if v, err = d.api.RunGet(context.Background(), id); err != nil {
			d.t.Fatalf("get %s: %v", id, err)
		}
		if cond(v) {
			return nil
		}
		return fmt.Errorf("run %s never became %s: phase %s spent %d escrow %d\n%s", id, what, v.Phase, v.Spent, v.Escrow, d.log())
	})
	return v
}

// waitingKids lists the parent's child runs parked on a person.
func (d *daemon) waitingKids(id string) []apitypes.Run {
	d.t.Helper()
	kids, err := client.Collect(d.api.RunListAll(context.Background(), client.RunListParams{Phase: apitypes.PhaseWaiting}))
	if err != nil {
		d.t.Fatal(err)
	}
	var out []apitypes.Run
	for _, k := range kids {
		if k.Parent == id {
			out = append(out, k)
		}
	}
	return out
}

// TestEscrowSurvivesKill: children of a fan-out hold their budgets in
// escrow while they wait for a person; a SIGKILL while they hold it, and
// one between a child's finish decision and its record, neither leak the
// escrow nor count it twice: the restarted daemon reads it from the run
// records, admits the fourth child out of what the first gave back, and
// ends with everything returned and only what the tools reported spent.
func TestEscrowSurvivesKill(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	d := newDaemon(t)
	d.start("")
	d.register(escrowFlows)
	res, err := d.startRun("esc_parent", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	d.runIs(res.RunID, "holding 3 × 30 in escrow", func(v *apitypes.Run) bool {
		return v.Escrow == 90 && len(d.waitingKids(res.RunID)) == 3
	})
	d.kill()
	d.start("mid-finish")
	if v := d.runIs(res.RunID, "read back", func(*apitypes.Run) bool { return true }); v.Escrow != 90 || v.Spent != 0 {
		t.Fatalf("after SIGKILL: spent %d escrow %d, want 0 and 90", v.Spent, v.Escrow)
	}
	// The first approved child dies between its finish decision and its
	// record.
	kids := d.waitingKids(res.RunID)
	if _, err := d.api.RunApprove(context.Background(), kids[0].ID, "hold", nil); err != nil {
		t.Fatal(err)
	}
	d.waitKilled()
	d.start("")
	// It finishes on restart, spent 3 of its 30; the fourth child takes 30.
	d.runIs(res.RunID, "the fourth child admitted", func(v *apitypes.Run) bool {
		return v.Spent == 3 && v.Escrow == 90 && len(d.waitingKids(res.RunID)) == 3
	})
	for _, k := range d.waitingKids(res.RunID) {
		if _, err := d.api.RunApprove(context.Background(), k.ID, "hold", nil); err != nil {
			t.Fatal(err)
		}
	}
	v := d.waitTerminal(res.RunID)
	if v.Phase != apitypes.PhaseCompleted || v.Spent != 12 || v.Escrow != 0 {
		t.Fatalf("parent %s spent %d escrow %d: want completed, 4 × 3 spent, nothing held\n%s", v.Phase, v.Spent, v.Escrow, d.log())
	}
	d.stop()
}

// TestFanoutTimeoutCancelsParkedChildren: through a real daemon, child
// runs parked on a person past the fan-out's timeout are cancelled, their
// items fail with E_CHILD_TIMEOUT and the run goes on.
func TestFanoutTimeoutCancelsParkedChildren(t *testing.T) {
	d := servingDaemon(t)
	d.register(escrowFlows)
	res, v := d.runToEnd("fan_park", `{}`, "")
	if v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("%s %+v\n%s", v.Phase, v.Error, d.log())
	}
	if c := v.Progress.Cohorts; len(c) != 1 || c[0].Failed != 2 || c[0].InFlight != 0 {
		t.Errorf("cohorts %+v: want both children failed", c)
	}
	timedOut := 0
	for _, e := range d.events(res.RunID) {
		if e.Type == "item_done" && e.Detail["code"] == "E_CHILD_TIMEOUT" {
			timedOut++
		}
	}
	if timedOut != 2 {
		t.Errorf("%d item_done events with E_CHILD_TIMEOUT, want 2", timedOut)
	}
	kids, err := client.Collect(d.api.RunListAll(context.Background(), client.RunListParams{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if k.Parent == res.RunID && k.Phase != apitypes.PhaseCancelled {
			t.Errorf("child %s %s: want cancelled", k.ID, k.Phase)
		}
	}
	d.stop()
}
