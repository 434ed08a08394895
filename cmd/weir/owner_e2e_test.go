package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

const payrollFlows = `
flow(name = "payroll_child", nodes = [
    task("pay", tool = "testkit.echo", args = lambda ctx: {"version": "root's", "amount": ctx.input["amount"]}),
])
flow(name = "payroll", nodes = [
    wait("approve", timeout = "30d", next = "pay"),
    subflow("pay", flow = "payroll_child", args = lambda ctx: {"amount": ctx.input["amount"], "secret": ctx.input["secret"]}),
])
`

// The version another user tries to slip under root's parked run: it
// would hand root's input, secret included, to whoever reads its result.
const hijackFlow = `
flow(name = "payroll_child", nodes = [
    task("steal", tool = "testkit.echo", args = lambda ctx: {"version": "nobody's", "stolen": ctx.input}),
])
`

// TestFlowNamesHaveOwners: root's payroll run parks on a wait before it
// calls payroll_child; the second user registers their own payroll_child
// and is refused (E_FORBIDDEN, audited, nothing stored); root approves
// and the child runs root's version. The second user still reads and runs
// root's flows, and owns the names it registers first.
func TestFlowNamesHaveOwners(t *testing.T) {
	e2e(t, "starts a real daemon")
	d := newSharedDaemon(t, "")
	root := d.file("payroll.star", payrollFlows)
	hijack := d.file("hijack.star", hijackFlow)
	if code, out, errb := d.weirAs(0, "flow", "register", root); code != 0 {
		t.Fatalf("root registers: %d %s %s", code, out, errb)
	}
	code, runID, errb := d.weirAs(0, "run", "start", "payroll", "--input", `{"amount": 100, "secret": "s3cr3t"}`)
	if code != 0 {
		t.Fatalf("root starts payroll: %d %s", code, errb)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, out, _ := d.weirAs(0, "run", "get", runID); !strings.Contains(out, "phase:    waiting") {
			return fmt.Errorf("payroll not waiting: %s", out)
		}
		return nil
	})

	code, out, errb := d.weirAs(nobody, "flow", "register", hijack)
	if code != exitFailed || !strings.Contains(errb, "E_FORBIDDEN") || !strings.Contains(errb, `"payroll_child"`) {
		t.Fatalf("the second user registers over root's payroll_child: exit %d %s %s", code, out, errb)
	}
	// Everyone reads the flows, with their owners.
	_, ls, _ := d.weirAs(nobody, "flow", "ls")
	for _, name := range []string{"payroll ", "payroll_child "} {
		if !strings.Contains(ls, name) || !strings.Contains(ls, d.me.Username) {
			t.Errorf("the second user's flow ls lacks %q owned by %s:\n%s", name, d.me.Username, ls)
		}
	}
	if code, out, errb := d.weirAs(0, "run", "approve", runID, "approve"); code != 0 {
		t.Fatalf("root approves: %d %s %s", code, out, errb)
	}
	var v struct {
		Phase  string
		Output json.RawMessage
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		_, out, _ := d.weirAs(0, "run", "get", "--json", runID)
		if err := json.Unmarshal([]byte(out), &v); err != nil || (v.Phase != "completed" && v.Phase != "failed") {
			return fmt.Errorf("payroll not finished: %s", out)
		}
		return nil
	})
	var paid map[string]any
	_ = json.Unmarshal(v.Output, &paid)
	if v.Phase != "completed" || paid["version"] != "root's" || strings.Contains(string(v.Output), "s3cr3t") {
		t.Fatalf("payroll ended %s with %s; want root's child version, the secret nowhere", v.Phase, v.Output)
	}

	// The refusal is in the audit stream, for the daemon's user.
	_, audit, _ := d.weirAs(0, "admin", "audit")
	if want := d.other.Username + " register of flow payroll_child"; !strings.Contains(audit, want) {
		t.Errorf("the audit stream lacks %q:\n%s", want, audit)
	}
	// The second user may run root's flow, and owns a name it is first to
	// register; root may not register over that one either.
	if code, out, errb := d.weirAs(nobody, "run", "start", "payroll_child", "--input", `{"amount": 1}`, "--wait"); code != 0 || !strings.Contains(out, "completed") {
		t.Errorf("the second user runs root's payroll_child: %d %s %s", code, out, errb)
	}
	theirs := d.file("theirs.star", strings.ReplaceAll(hijackFlow, "payroll_child", "expenses"))
	if code, out, errb := d.weirAs(nobody, "flow", "register", theirs); code != 0 {
		t.Errorf("the second user registers a new name: %d %s %s", code, out, errb)
	}
	if code, out, errb := d.weirAs(nobody, "flow", "register", theirs); code != 0 {
		t.Errorf("the second user registers its own name again: %d %s %s", code, out, errb)
	}
	if code, _, errb := d.weirAs(0, "flow", "register", theirs); code != exitFailed || !strings.Contains(errb, "E_FORBIDDEN") {
		t.Errorf("root registers over the second user's name: exit %d %s", code, errb)
	}
	d.stop()
}
