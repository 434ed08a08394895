package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// TestRunStartReusedRequestIDAnotherFlow: weir run start with a request
// id that an earlier start of another flow used is refused with
// E_DEDUP_CONFLICT naming that run and its flow, even when the flow it
// names does not exist and --wait is asked; the same start again still
// answers the first run.
func TestRunStartReusedRequestIDAnotherFlow(t *testing.T) {
	d := servingDaemon(t)
	d.register(`
flow(name = "hello", nodes = [task("greet", tool = "testkit.echo", args = lambda ctx: {"hi": ctx.input["name"]})])
flow(name = "bye", nodes = [task("wave", tool = "testkit.echo", args = lambda ctx: {"bye": ctx.input["name"]})])
`)
	code, first, errb := d.cli("run", "start", "hello", "--request-id", "api-1", "--input", `{"name":"Ada"}`)
	if code != 0 {
		t.Fatalf("start hello: exit %d %s %s", code, first, errb)
	}
	runID := strings.Fields(first)[0]
	for _, flow := range []string{"no_such_flow", "bye"} {
		code, out, errb := d.cli("run", "start", flow, "--request-id", "api-1", "--input", `{"name":"Ada"}`, "--wait")
		if code != exitFailed || !strings.Contains(errb, "E_DEDUP_CONFLICT") || !strings.Contains(errb, runID+` of flow "hello"`) || strings.Contains(out, "Ada") {
			t.Errorf("start %s with hello's request id: exit %d\nstdout %s\nstderr %s\nwant E_DEDUP_CONFLICT naming %s of flow hello", flow, code, out, errb, runID)
		}
	}
	code, again, errb := d.cli("run", "start", "hello", "--request-id", "api-1", "--input", `{"name":"Ada"}`)
	if code != 0 || !strings.Contains(again, runID) {
		t.Errorf("start hello again: exit %d %s %s, want run %s", code, again, errb, runID)
	}
	d.stop()
}

// TestPostgresDaemonWarnsOnce: a daemon on PostgreSQL logs no warning
// once per run. Its data directory has no embedded store, so reading the
// disk's free space there fails: that is said once, not at every start.
func TestPostgresDaemonWarnsOnce(t *testing.T) {
	e2e(t, "starts a real daemon")
	u := pgtest.Schema(t)
	d := newDaemon(t)
	d.start("", "WEIR_STORE="+u)
	d.register(`flow(name = "hello", nodes = [task("greet", tool = "testkit.echo", args = lambda ctx: {"hello": ctx.input})])`)
	const runs = 4
	for i := range runs {
		if _, r := d.runToEnd("hello", fmt.Sprintf(`{"n": %d}`, i), ""); r.Phase != apitypes.PhaseCompleted {
			t.Fatalf("run %d ended %s", i, r.Phase)
		}
	}
	d.stop()
	warn := regexp.MustCompile(`\[WARN\]\s+(.*?)(?::\s+[a-z_]+=|$)`)
	seen := map[string]int{}
	for _, line := range strings.Split(d.log(), "\n") {
		if m := warn.FindStringSubmatch(line); m != nil {
			seen[m[1]]++
		}
	}
	for msg, n := range seen {
		if n > 1 {
			t.Errorf("warned %d times over %d runs: %s", n, runs, msg)
		}
	}
}
