package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

const postFlow = `
flow(name = "post", nodes = [
    task("prep", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input}, next = "send"),
    task("send", tool = "mail.send", args = lambda ctx: {"to": "ops@example.com", "body": "hi"}, at_most_once = True),
])
`

// partialPlugins is a plugins directory holding only testkit, installed
// from a copy of its binary with one byte appended: the same tools, from a
// binary of another checksum, and no mail plugin.
func partialPlugins(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(testutil.Plugin(t, "testkit"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "testkit")
	if err := os.WriteFile(src, append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, err := exec.Command(testutil.WeirBinary(t), "--plugins", dir, "plugin", "install", src).CombinedOutput(); err != nil {
		t.Fatalf("installing testkit: %v\n%s", err, out)
	}
	return dir
}

// TestFleetPluginsAgree runs two daemons on one schema: B has every
// plugin; A has no mail plugin and its testkit is another binary.
// Registering on B a flow that sends mail warns of both, naming A; A
// accepts runs of it but never takes them, B runs them all. With B
// stopped a run waits and says why on its timeline; once mail is
// installed on A, A reports it and runs it, and registration no longer
// warns of mail.
func TestFleetPluginsAgree(t *testing.T) {
	e2e(t, "starts real daemons")
	u := pgtest.Schema(t)
	env := []string{"WEIR_STORE=" + u, "WEIR_STORE_SHARED=true"}
	a, b := newDaemon(t), newDaemon(t)
	a.plugins = partialPlugins(t)
	for _, d := range []*daemon{a, b} {
		d.serveArgs = []string{"--lease-timeout", fleetLease}
		d.start("", env...)
	}
	ha, hb := a.holder(), b.holder()

	res, err := b.api.FlowRegister(context.Background(), apitypes.SourceFile{Path: "post.star", Src: postFlow})
	if err != nil {
		t.Fatal(err)
	}
	warned := map[string]string{}
	for _, d := range res.Diagnostics {
		if d.Code != string(engine.CodeFleetTools) || d.Severity != "warning" || d.Line == 0 {
			t.Fatalf("unexpected diagnostic %+v", d)
		}
		for _, tool := range []string{"testkit.echo", "mail.send"} {
			if strings.Contains(d.Message, `tool "`+tool+`"`) {
				warned[tool] = d.Message
			}
		}
	}
	if m := warned["mail.send"]; !strings.Contains(m, ha) || !strings.Contains(m, "does not serve it") || strings.Contains(m, hb) {
		t.Fatalf("warning for mail.send: %q, want one naming daemon A (%s) as lacking it; all: %+v", m, ha, res.Diagnostics)
	}
	if m := warned["testkit.echo"]; !strings.Contains(m, ha) || !strings.Contains(m, "another plugin binary") {
		t.Fatalf("warning for testkit.echo: %q, want one naming daemon A (%s) as serving another binary", m, ha)
	}
	if len(res.Diagnostics) != 2 {
		t.Fatalf("diagnostics %+v, want the two warnings", res.Diagnostics)
	}

	// Runs accepted by A all run on B.
	var ids []string
	for i := range 6 {
		r, err := a.startRun("post", `1`, "")
		if err != nil {
			t.Fatalf("start %d on A: %v", i, err)
		}
		ids = append(ids, r.RunID)
	}
	for _, id := range ids {
		if v := a.waitTerminal(id); v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("run %s ended %s %+v, want completed\nA:\n%s\nB:\n%s", id, v.Phase, v.Error, a.log(), b.log())
		}
		for _, h := range leasedBy(a.events(id)) {
			if h != hb {
				t.Fatalf("run %s was leased by %s, want only daemon B (%s)", id, h, hb)
			}
		}
	}
	if na, nb := a.outbox(), b.outbox(); na != 0 || nb != len(ids) {
		t.Fatalf("mails sent: A %d, B %d; want 0 and %d", na, nb, len(ids))
	}

	// With B gone no live daemon serves mail.send: the run waits, and its
	// timeline says why.
	b.stop()
	r, err := a.startRun("post", `2`, "")
	if err != nil {
		t.Fatal(err)
	}
	a.waitEvent(r.RunID, "withheld", "")
	for _, e := range a.events(r.RunID) {
		if e.Type == "withheld" && !strings.Contains(e.Detail["reason"].(string), "mail.send") {
			t.Fatalf("withheld event %+v, want its reason to name mail.send", e.Detail)
		}
	}
	if v, err := a.api.RunGet(context.Background(), r.RunID); err != nil || v.Phase != apitypes.PhaseQueued {
		t.Fatalf("run with no daemon to take it: %+v %v, want queued", v, err)
	}
	// Installing mail on A (the CLI asks the daemon to rescan) reports it
	// to the roll, and A takes the run it withheld.
	if out, err := exec.Command(a.weir, "--plugins", a.plugins, "--socket", a.socket, "plugin", "install", testutil.Plugin(t, "mail")).CombinedOutput(); err != nil {
		t.Fatalf("installing mail on A: %v\n%s", err, out)
	}
	if v := a.waitTerminal(r.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run ended %s %+v once A had mail, want completed", v.Phase, v.Error)
	}
	if holders := leasedBy(a.events(r.RunID)); len(holders) != 1 || holders[0] != ha || a.outbox() != 1 {
		t.Fatalf("run leased by %v, A sent %d mails; want A (%s) once, one mail", holders, a.outbox(), ha)
	}
	b.start("", env...)
	res, err = b.api.FlowRegister(context.Background(), apitypes.SourceFile{Path: "post.star", Src: postFlow})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diagnostics) != 1 || !strings.Contains(res.Diagnostics[0].Message, `tool "testkit.echo"`) {
		t.Fatalf("registration once A has mail: %+v, want the testkit warning alone", res.Diagnostics)
	}
	if strings.Contains(a.log(), "[ERROR]") {
		t.Fatalf("A logged errors:\n%s", a.log())
	}
}
