package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

const gateFlow = `
flow(name = "gate", nodes = [
    wait("ok", timeout = "1h", next = "go", error = "no"),
    task("go", tool = "testkit.echo", args = lambda ctx: {"approved": ctx.results["ok"]}),
    task("no", tool = "testkit.echo"),
])
`

// withPassword puts a password into a PostgreSQL URL. The test database
// trusts its clients, so it is never asked for: it is there to be kept
// out of every log line and output.
func withPassword(t *testing.T, u, pw string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.UserPassword(p.User.Username(), pw)
	return p.String()
}

// TestServeOnPostgres runs a real daemon on the PostgreSQL store (named
// by WEIR_STORE): a run parks on a human wait, the daemon is killed with
// SIGKILL and started again, the wait is approved and the run completes.
// Nothing is written to the embedded store, a second daemon on the same
// schema is refused, and the password of the URL is in no log line.
func TestServeOnPostgres(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	const pw = "pg-s3cret-pw"
	u := withPassword(t, pgtest.Schema(t), pw)
	d := newDaemon(t)
	d.start("", "WEIR_STORE="+u)
	d.register(gateFlow)
	res, err := d.startRun("gate", `{"n": 1}`, "req-gate")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		r, err := d.api.RunGet(context.Background(), res.RunID)
		if err != nil {
			return err
		}
		if r.Phase != apitypes.PhaseWaiting {
			return fmt.Errorf("run %s is %s, want waiting", res.RunID, r.Phase)
		}
		return nil
	})

	// A second daemon on the same schema would run the same tasks.
	other := exec.Command(d.weir, "--data", t.TempDir(), "--plugins", d.plugins, "--socket", filepath.Join(t.TempDir(), "s"), "serve", "--store", u)
	out, err := other.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another weir daemon") || strings.Contains(string(out), pw) {
		t.Fatalf("second daemon on the schema: %v\n%s\nwant a refusal that hides the password", err, out)
	}

	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	d.start("", "WEIR_STORE="+u)
	if _, err := d.api.RunApprove(context.Background(), res.RunID, "ok", json.RawMessage(`{"yes":true}`)); err != nil {
		t.Fatalf("approve after the restart: %v\n%s", err, d.log())
	}
	r := d.waitTerminal(res.RunID)
	if r.Phase != apitypes.PhaseCompleted || !strings.Contains(string(r.Output), `"yes":true`) {
		t.Fatalf("run ended %s with %s, want completed with the approval's payload", r.Phase, r.Output)
	}
	d.stop()

	if _, err := os.Stat(filepath.Join(d.data, "store")); !os.IsNotExist(err) {
		t.Fatalf("the embedded store was created beside the PostgreSQL one: %v", err)
	}
	logs := d.log()
	if strings.Contains(logs, pw) || !strings.Contains(logs, "xxxxx") {
		t.Fatalf("the daemon's log shows the password, or not the redacted store URL:\n%s", logs)
	}
	// The run is PostgreSQL's record.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var phase string
	if err := conn.QueryRow(ctx, `SELECT phase FROM runs WHERE id = $1`, res.RunID).Scan(&phase); err != nil || phase != "completed" {
		t.Fatalf("the run's row: %q, %v", phase, err)
	}
}

// TestExecOnPostgres: weir exec --store runs a flow to its end on the
// PostgreSQL store, without a daemon, and leaves the run there.
func TestExecOnPostgres(t *testing.T) {
	e2e(t, "runs the weir binary")
	u := withPassword(t, pgtest.Schema(t), "pg-s3cret-pw")
	weir, plugins := binaries(t)
	dir := t.TempDir()
	flow := filepath.Join(dir, "hello.star")
	if err := os.WriteFile(flow, []byte(`flow(name = "hello", nodes = [task("greet", tool = "testkit.echo", args = lambda ctx: {"hello": ctx.input})])`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(weir, "--data", filepath.Join(dir, "data"), "--plugins", plugins, "exec", "--store", u, "--log-level", "info", "--input", `"ada"`, flow)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `output: {"hello":"ada"}`) || strings.Contains(string(out), "pg-s3cret-pw") {
		t.Fatalf("weir exec --store: %v\n%s", err, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM runs WHERE phase = 'completed'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("completed runs in the schema: %d, %v", n, err)
	}
}

// TestServeStopsWhenTheStoreLockIsLost: ending the session that holds an
// unshared daemon's lock on its schema (pg_terminate_backend, as a server
// restart or idle_session_timeout would) stops the daemon with a message
// that says why, instead of serving on while a second daemon may get in.
func TestServeStopsWhenTheStoreLockIsLost(t *testing.T) {
	e2e(t, "starts a real daemon")
	u := pgtest.Schema(t)
	d := newDaemon(t)
	d.start("", "WEIR_STORE="+u)
	d.register(gateFlow)
	if _, err := d.startRun("gate", `{"n": 1}`, ""); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The store's lock is the two-key advisory lock whose second key is
	// the schema's hash (pg_locks shows int4 keys as unsigned oids).
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
		AND objid::bigint = (hashtext(current_schema())::bigint & 4294967295)`).Scan(&pid); err != nil {
		t.Fatalf("finding the daemon's lock session: %v", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("the daemon exited with %v, want a failure\n%s", err, d.log())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the daemon still serves 2 minutes after its lock's session ended\n%s", d.log())
	}
	if logs := d.log(); !strings.Contains(logs, "lock session ended") || !strings.Contains(logs, "another daemon may hold") {
		t.Fatalf("the daemon's log does not say why it stopped:\n%s", logs)
	}
}
