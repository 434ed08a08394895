package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
)

// TestAuditFloodStaysBoundedAndReadable: 200 cancels of long made-up run
// ids by one caller leave a burst of audit events with the ids cut, and
// the stream reads a page at a time; an empty stream says "none".
func TestAuditFloodStaysBoundedAndReadable(t *testing.T) {
	d := servingDaemon(t)
	if code, out, errb := d.cli("admin", "audit"); code != 0 || out != "none\n" {
		t.Fatalf("an empty audit stream: %d %q %s", code, out, errb)
	}
	ctx := context.Background()
	for i := range 200 {
		id := fmt.Sprintf("run_%03d_%s", i, strings.Repeat("x", engine.MaxIDBytes-8))
		if _, err := d.api.RunCancel(ctx, id); err == nil || !strings.Contains(err.Error(), "E_NOT_FOUND") {
			t.Fatalf("cancel of a made-up run: %v", err)
		}
	}
	code, out, errb := d.cli("admin", "audit", "--limit", "1000")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < engine.AuditBurst || len(lines) > engine.AuditBurst+5 {
		t.Fatalf("after 200 refusals the stream holds %d events (want about the burst of %d): %d %s", len(lines), engine.AuditBurst, code, errb)
	}
	for _, l := range lines {
		if len(l) > 2*engine.MaxAuditFieldBytes+200 || !strings.Contains(l, "...(") {
			t.Fatalf("an audit line of %d bytes, its id not cut: %s", len(l), l)
		}
	}
	// Paged: five at a time, the next page named.
	code, out, _ = d.cli("admin", "audit", "--limit", "5")
	if page := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(page) != 6 || !strings.HasPrefix(page[5], "more: weir admin audit --after ") {
		t.Fatalf("a page of 5: %d %s", code, out)
	}
	d.stop()
}

// TestHostileTextIsEscaped: a flow's doc with terminal escapes is listed
// escaped, on one line, by every user's weir flow ls; a plugin's NUL,
// 0xFF and ESC bytes and an 8 MiB stderr line without a break reach the
// daemon log escaped and cut.
func TestHostileTextIsEscaped(t *testing.T) {
	d := servingDaemon(t)
	d.register(`
flow(name = "innocent", doc = "\x1b[2J\x1b]0;pwned\x07line one\nline two\r", nodes = [
    task("spew", tool = "testkit.spew", args = lambda ctx: {"stdout_hex": "6265666f726500ff1b5b324a6166746572", "stderr_bytes": 8388608}),
])`)
	code, out, errb := d.cli("flow", "ls")
	// The listing shows the doc's first line (flows.DocSummary).
	if code != 0 || strings.ContainsAny(out, "\x1b\x07\r") || !strings.Contains(out, `\u001b[2J\u001b]0;pwned\u0007line one`) || strings.Contains(out, "line two") {
		t.Fatalf("flow ls: %d %q %s", code, out, errb)
	}
	if _, v := d.runToEnd("innocent", `{}`, ""); v.Phase != "completed" {
		t.Fatalf("run ended %s %+v", v.Phase, v.Error)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		logs := d.log()
		if !strings.Contains(logs, `before\u0000\xff\u001b[2Jafter`) || !strings.Contains(logs, "dropped_bytes") {
			return fmt.Errorf("the plugin's output is not in the daemon log, escaped and cut:\n%.3000s", logs)
		}
		return nil
	})
	logs := d.log()
	if strings.ContainsAny(logs, "\x00\x1b") || strings.Contains(logs, "\xff") {
		t.Error("raw control bytes in the daemon log")
	}
	for _, l := range strings.Split(logs, "\n") {
		if len(l) > host.MaxPluginLogLine+1024 {
			t.Fatalf("a daemon log line of %d bytes", len(l))
		}
	}
	d.stop()
}

// TestPluginDeadWhileIdleIsRelaunched: the testkit plugin is killed with
// SIGKILL between two runs; the next run's call (no retries allowed)
// goes to a new process and succeeds.
func TestPluginDeadWhileIdleIsRelaunched(t *testing.T) {
	d := servingDaemon(t)
	d.register(`flow(name = "whoami", nodes = [task("t", tool = "testkit.env", retries = 0)])`)
	pidOf := func() int {
		t.Helper()
		_, v := d.runToEnd("whoami", `{}`, "")
		var out struct{ PID int }
		if v.Phase != "completed" || json.Unmarshal(v.Output, &out) != nil || out.PID == 0 {
			t.Fatalf("run ended %s %s %+v", v.Phase, v.Output, v.Error)
		}
		return out.PID
	}
	old := pidOf()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if syscall.Kill(old, 0) == nil {
			return fmt.Errorf("plugin %d still there", old)
		}
		return nil
	})
	if now := pidOf(); now == old {
		t.Fatalf("the call went to the killed process %d", old)
	}
	d.stop()
}

// hostileFlows are the shapes the hostile-use findings were made of, each
// registered and run by the second user of a shared daemon.
const hostileFlows = `
P = "^" + "x" * 4000 + "$"
PATTERNED = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "pattern": P}}}}
WIDE = {"type": "object", "properties": {"a": {"type": "array", "items": {"anyOf": [{"type": "string", "minLength": i} for i in range(1000)]}}}}
D = "d" * 60000

flow(name = "h_child", doc = D, input = PATTERNED, nodes = [task("t", tool = "testkit.echo")])
flow(name = "h_parent", doc = D, nodes = [subflow("c", flow = "h_child", args = lambda ctx: {"a": ["y"] * 60000})])
flow(name = "h_wide", doc = D, input = WIDE, nodes = [task("t", tool = "testkit.echo")])
flow(name = "h_wide_parent", doc = D, nodes = [subflow("c", flow = "h_wide", args = lambda ctx: {"a": [1] * 100000})])
flow(name = "h_over", doc = D, budget = 10, nodes = [task("t", tool = "testkit.cost", args = {"cost": 1000})])
flow(name = "h_over_fan", doc = D, budget = 30, nodes = [
    fanout("fan", items = lambda ctx: [{"cost": 100}] * 24, tool = "testkit.cost",
           args = lambda ctx, item: item, width = 24, depth = 1, max_items = 24),
])
`

// TestHostileFlowsLeaveTheDaemonToOthers: the second OS user of a shared
// daemon registers and runs the shapes of the hostile-use findings — a
// child's input failing a 4 KB pattern 60,000 times, a run start of
// 240 KB against it, 100,000 items against 1,000 alternatives as a start
// and as a child's input, a charge of 100 times a budget at the last
// node, a fan-out overspending its budget 20 times, docs of 60 KB — and
// each ends as that user's error or recorded overspend, while the first
// user's runs complete meanwhile and the daemon keeps its pid.
func TestHostileFlowsLeaveTheDaemonToOthers(t *testing.T) {
	e2e(t, "starts a real daemon")
	d := newSharedDaemon(t, "")
	pid := d.cmd.Process.Pid
	if code, out, errb := d.weirAs(0, "flow", "register", d.file("echo.star", `flow(name = "r_echo", nodes = [task("t", tool = "testkit.echo", args = {"n": 1})])`)); code != 0 {
		t.Fatalf("root registers: %d %s %s", code, out, errb)
	}
	if code, out, errb := d.weirAs(nobody, "flow", "register", d.file("hostile.star", hostileFlows)); code != 0 {
		t.Fatalf("the second user registers: %d %s %s", code, out, errb)
	}

	big := d.file("big.json", `{"a": [`+strings.Repeat(`"y",`, 59_999)+`"y"]}`)
	code, _, errb := d.weirAs(nobody, "run", "start", "h_child", "--input", "@"+big)
	if code == 0 || !strings.Contains(errb, "E_BAD_INPUT") || !strings.Contains(errb, "more") || len(errb) > 16<<10 {
		t.Fatalf("a 240 KB start against the pattern: exit %d, %d bytes: %.300s", code, len(errb), errb)
	}
	// 100,000 items against 1,000 alternatives: a minute of checks, well
	// past the sandbox's 10 s (20,000 can finish within it on a quick
	// machine).
	wide := d.file("wide.json", `{"a": [`+strings.Repeat(`1,`, 99_999)+`1]}`)
	code, _, errb = d.weirAs(nobody, "run", "start", "h_wide", "--input", "@"+wide)
	if code == 0 || !strings.Contains(errb, "E_BAD_INPUT") || !strings.Contains(errb, "in the sandbox") {
		t.Fatalf("100,000 items against 1,000 alternatives: exit %d %.300s", code, errb)
	}

	runs := map[string]string{}
	for _, flow := range []string{"h_parent", "h_wide_parent", "h_over", "h_over_fan"} {
		code, id, errb := d.weirAs(nobody, "run", "start", flow)
		if code != 0 {
			t.Fatalf("start %s: %d %s", flow, code, errb)
		}
		runs[flow] = id
	}
	var mine []string
	for range 3 {
		code, id, errb := d.weirAs(0, "run", "start", "r_echo")
		if code != 0 {
			t.Fatalf("root's start: %d %s", code, errb)
		}
		mine = append(mine, id)
	}
	view := func(uid int, id string) (v struct {
		Phase     string
		Spent     int64
		Overspent int64
		Error     *struct{ Code, Message string }
	}) {
		t.Helper()
		testutil.Eventually(t, 2*time.Minute, func() error {
			code, out, errb := d.weirAs(uid, "run", "get", id, "--json")
			if code != 0 {
				return fmt.Errorf("run get %s: %d %s", id, code, errb)
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				return err
			}
			switch v.Phase {
			case "completed", "failed", "cancelled":
				return nil
			}
			return fmt.Errorf("run %s is %s", id, v.Phase)
		})
		return v
	}
	for _, id := range mine {
		if v := view(0, id); v.Phase != "completed" {
			t.Errorf("root's run %s: %s %+v", id, v.Phase, v.Error)
		}
	}
	for flow, want := range map[string]string{"h_parent": "more", "h_wide_parent": "in the sandbox"} {
		v := view(nobody, runs[flow])
		if v.Error == nil || v.Error.Code != "E_BAD_INPUT" || !strings.Contains(v.Error.Message, want) || len(v.Error.Message) > 16<<10 {
			t.Errorf("%s: %s %+v, want E_BAD_INPUT saying %q, bounded", flow, v.Phase, v.Error, want)
		}
	}
	if v := view(nobody, runs["h_over"]); v.Phase != "completed" || v.Overspent != 995 {
		t.Errorf("h_over: %s overspent %d %+v, want completed with 995 overspent", v.Phase, v.Overspent, v.Error)
	}
	if v := view(nobody, runs["h_over_fan"]); v.Spent > 600 {
		t.Errorf("h_over_fan spent %d, want at most the 6 calls a budget of 30 admits", v.Spent)
	}
	code, ls, errb := d.weirAs(0, "flow", "ls", "--json")
	if code != 0 || strings.Contains(ls, strings.Repeat("d", 1000)) || !strings.Contains(ls, "h_over_fan") {
		t.Errorf("flow ls with six 60 KB docs: exit %d, %d bytes %s, want every flow and no doc in full", code, len(ls), errb)
	}
	if d.cmd.ProcessState != nil || d.cmd.Process.Pid != pid {
		t.Fatalf("the daemon did not survive\n%s", d.log.String())
	}
	d.stop()
}
