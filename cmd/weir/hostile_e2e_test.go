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
	if testing.Short() {
		t.Skip("starts a real daemon")
	}
	t.Parallel()
	d := newDaemon(t)
	d.start("")
	env := map[string]string{"WEIR_SOCKET": d.socket, "WEIR_DATA": d.data}
	if code, out, errb, _ := run(t, env, "admin", "audit"); code != 0 || out != "none\n" {
		t.Fatalf("an empty audit stream: %d %q %s", code, out, errb)
	}
	ctx := context.Background()
	for i := range 200 {
		id := fmt.Sprintf("run_%03d_%s", i, strings.Repeat("x", engine.MaxIDBytes-8))
		if _, err := d.api.RunCancel(ctx, id); err == nil || !strings.Contains(err.Error(), "E_NOT_FOUND") {
			t.Fatalf("cancel of a made-up run: %v", err)
		}
	}
	code, out, errb, _ := run(t, env, "admin", "audit", "--limit", "1000")
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
	code, out, _, _ = run(t, env, "admin", "audit", "--limit", "5")
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
	if testing.Short() {
		t.Skip("starts a real daemon")
	}
	t.Parallel()
	d := newDaemon(t)
	d.start("")
	d.register(`
flow(name = "innocent", doc = "\x1b[2J\x1b]0;pwned\x07line one\nline two\r", nodes = [
    task("spew", tool = "testkit.spew", args = lambda ctx: {"stdout_hex": "6265666f726500ff1b5b324a6166746572", "stderr_bytes": 8388608}),
])`)
	env := map[string]string{"WEIR_SOCKET": d.socket, "WEIR_DATA": d.data}
	code, out, errb, _ := run(t, env, "flow", "ls")
	// The listing shows the doc's first line (flows.DocSummary).
	if code != 0 || strings.ContainsAny(out, "\x1b\x07\r") || !strings.Contains(out, `\u001b[2J\u001b]0;pwned\u0007line one`) || strings.Contains(out, "line two") {
		t.Fatalf("flow ls: %d %q %s", code, out, errb)
	}
	res, err := d.startRun("innocent", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != "completed" {
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
	if testing.Short() {
		t.Skip("starts a real daemon")
	}
	t.Parallel()
	d := newDaemon(t)
	d.start("")
	d.register(`flow(name = "whoami", nodes = [task("t", tool = "testkit.env", retries = 0)])`)
	pidOf := func() int {
		t.Helper()
		res, err := d.startRun("whoami", `{}`, "")
		if err != nil {
			t.Fatal(err)
		}
		v := d.waitTerminal(res.RunID)
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
