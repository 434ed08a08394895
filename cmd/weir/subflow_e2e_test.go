package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

const fallbackFlows = `
flow(name = "kid", nodes = [task("k", tool = "testkit.echo", args = lambda ctx: {"kid": True})])
flow(name = "mum", nodes = [
    subflow("call", flow = "kid", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"from_child": ctx.results["call"]}),
])
`

// TestFallbackClockRecoversSilentChild: a child that finishes without
// waking its parent (failpoint) is found by the parent's fallback clock,
// shortened to 2s, and the parent finishes by itself.
func TestFallbackClockRecoversSilentChild(t *testing.T) {
	e2e(t, "starts a real daemon")
	d := newDaemon(t)
	d.start("child-no-announce", "WEIR_SUBFLOW_FALLBACK=2s")
	d.register(fallbackFlows)
	begin := time.Now()
	_, v := d.runToEnd("mum", `{}`, "")
	took := time.Since(begin)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"kid":true`) {
		t.Fatalf("parent ended %s output %s error %+v", v.Phase, v.Output, v.Error)
	}
	if took < 2*time.Second {
		t.Errorf("parent finished after %s: the child announced after all, the failpoint did not hold", took)
	}
	d.stop()
}

// TestApproveThroughTheDaemon drives a wait from the CLI as a user would.
func TestApproveThroughTheDaemon(t *testing.T) {
	d := servingDaemon(t)
	d.register(`flow(name = "gate", nodes = [
    wait("ok", timeout = "30d", next = "go"),
    task("go", tool = "testkit.echo", args = lambda ctx: {"approved": ctx.results["ok"]}),
])`)
	res, err := d.startRun("gate", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		code, out, _ := d.cli("run", "get", res.RunID)
		if code == 0 && strings.Contains(out, "phase:    waiting") {
			return nil
		}
		return fmt.Errorf("never waiting: %s", out)
	})
	if code, out, errb := d.cli("run", "graph", res.RunID); code != 0 || !strings.Contains(out, "class n_ok waiting") {
		t.Fatalf("run graph while waiting: %d %s %s", code, out, errb)
	}
	if code, out, errb := d.cli("flow", "graph", "gate", "--format", "dot"); code != 0 || !strings.Contains(out, `"ok" -> "go" [label="next"]`) {
		t.Fatalf("flow graph: %d %s %s", code, out, errb)
	}
	if code, _, _ := d.cli("flow", "graph", "gate", "--format", "png"); code != exitUsage {
		t.Fatalf("an unknown format: exit %d, want %d", code, exitUsage)
	}
	if code, out, errb := d.cli("run", "approve", res.RunID, "ok", "--payload", `{"by":"me"}`); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %d %s %s", code, out, errb)
	}
	if code, _, errb := d.cli("run", "approve", res.RunID, "ok"); code != exitFailed || !strings.Contains(errb, "E_") {
		t.Fatalf("second approve: exit %d %s, want a refusal", code, errb)
	}
	v := d.waitTerminal(res.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"by":"me"`) {
		t.Fatalf("%s %s", v.Phase, v.Output)
	}
	if code, out, _ := d.cli("run", "graph", res.RunID); code != 0 || !strings.Contains(out, "class n_go visited") || !strings.Contains(out, "class n_ok visited") {
		t.Fatalf("run graph after the end: %s", out)
	}
	d.stop()
}
