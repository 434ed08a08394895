package main

import (
	"context"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// TestRunGetShowsTheParent: a subflow's child run names its parent in
// weir run get.
func TestRunGetShowsTheParent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon")
	}
	t.Parallel()
	d := newDaemon(t)
	d.start("")
	d.register(`
flow(name = "kid", nodes = [task("k", tool = "testkit.echo", args = {"kid": True})])
flow(name = "mum", nodes = [subflow("call", flow = "kid")])
`)
	res, err := d.startRun("mum", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
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
	env := map[string]string{"WEIR_SOCKET": d.socket, "WEIR_DATA": d.data}
	code, out, errb, _ := run(t, env, "run", "get", child)
	if code != 0 || !strings.Contains(out, "parent:   "+res.RunID) {
		t.Fatalf("run get %s: exit %d\n%s%s", child, code, out, errb)
	}
	if code, out, _, _ := run(t, env, "run", "get", res.RunID); code != 0 || strings.Contains(out, "parent:") {
		t.Fatalf("a top-level run shows a parent:\n%s", out)
	}
	d.stop()
}
