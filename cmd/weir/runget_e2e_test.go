package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// TestRunGetShowsTheParent: a subflow's child run names its parent in
// weir run get.
func TestRunGetShowsTheParent(t *testing.T) {
	d := servingDaemon(t)
	d.register(`
flow(name = "kid", nodes = [task("k", tool = "testkit.echo", args = {"kid": True})])
flow(name = "mum", nodes = [subflow("call", flow = "kid")])
`)
	res, v := d.runToEnd("mum", `{}`, "")
	if v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("parent ended %s", v.Phase)
	}
	runs, err := d.api.RunList(context.Background(), client.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var child string
	for _, r := range runs {
		if r.Parent == res.RunID {
			child = r.ID
		}
	}
	if child == "" {
		t.Fatalf("no child of %s among %d runs", res.RunID, len(runs))
	}
	code, out, errb := d.cli("run", "get", child)
	if code != 0 || !strings.Contains(out, "parent:   "+res.RunID) {
		t.Fatalf("run get %s: exit %d\n%s%s", child, code, out, errb)
	}
	if code, out, _ := d.cli("run", "get", res.RunID); code != 0 || strings.Contains(out, "parent:") {
		t.Fatalf("a top-level run shows a parent:\n%s", out)
	}
	d.stop()
}

// TestRunLsNewestFirst: weir run ls lists newest first (run ids are
// random), filters by flow, and a full page ends with the command that
// lists the next one.
func TestRunLsNewestFirst(t *testing.T) {
	d := servingDaemon(t)
	d.register(`
flow(name = "one", nodes = [task("k", tool = "testkit.echo", args = {"n": 1})])
flow(name = "two", nodes = [task("k", tool = "testkit.echo", args = {"n": 2})])
`)
	var started []string
	for _, f := range []string{"one", "two", "one", "two", "one"} {
		res, err := d.startRun(f, `{}`, "")
		if err != nil {
			t.Fatal(err)
		}
		started = append(started, res.RunID)
	}
	// runsIn is the run ids of run ls's table, in order.
	runsIn := func(out string) []string {
		var ids []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "run_") {
				ids = append(ids, f[0])
			}
		}
		return ids
	}
	code, out, errb := d.cli("run", "ls")
	want := []string{started[4], started[3], started[2], started[1], started[0]}
	if code != 0 || !strings.HasPrefix(out, "RUN ") || strings.Join(runsIn(out), " ") != strings.Join(want, " ") || strings.Contains(out, "more:") {
		t.Fatalf("run ls: exit %d, want %v newest first\n%s%s", code, want, out, errb)
	}
	code, out, errb = d.cli("run", "ls", "--flow", "one", "--limit", "2")
	more := "(more: weir run ls --flow one --limit 2 --before " + started[2] + ")"
	if code != 0 || strings.Join(runsIn(out), " ") != started[4]+" "+started[2] || !strings.Contains(out, more) {
		t.Fatalf("run ls --flow one --limit 2: exit %d, want %s %s and %q\n%s%s", code, started[4], started[2], more, out, errb)
	}
	code, out, errb = d.cli("run", "ls", "--flow", "one", "--limit", "2", "--before", started[2])
	if code != 0 || strings.Join(runsIn(out), " ") != started[0] || strings.Contains(out, "more:") {
		t.Fatalf("the next page: exit %d, want %s\n%s%s", code, started[0], out, errb)
	}
	d.stop()
}

// TestFlowRegisterShowsWarnings: a flow with only warnings registers, and
// weir flow register prints them; --daemon check does the same.
func TestFlowRegisterShowsWarnings(t *testing.T) {
	d := servingDaemon(t)
	path := t.TempDir() + "/warned.star"
	src := `flow(name = "warned", nodes = [
    fanout("fan", tool = "testkit.echo", items = [1], width = 1, depth = 1, max_items = 1, next = "use"),
    task("use", tool = "testkit.echo", args = lambda ctx: {"all": ctx.results["fan"]}),
])
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	warning := path + `:3:67: warning: W_FANOUT_RESULT: ctx.results["fan"] is fanout "fan"'s whole result`
	for _, args := range [][]string{{"flow", "check", "--daemon", path}, {"flow", "register", path}} {
		code, out, errb := d.cli(args...)
		if code != 0 || !strings.Contains(out, warning) || !strings.Contains(out, "warned") {
			t.Errorf("%v: exit %d, want 0 and %q\n%s%s", args, code, warning, out, errb)
		}
	}
	if code, out, _ := d.cli("flow", "ls"); code != 0 || !strings.Contains(out, "warned") {
		t.Errorf("flow ls after a registration with warnings:\n%s", out)
	}
	d.stop()
}
