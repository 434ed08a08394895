package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// fleetLease is the lease timeout of the fleets under test: a lease of a
// killed or paused daemon is rescued this long after its last renewal.
const fleetLease = "2s"

// fleet starts n daemons sharing one PostgreSQL schema, each with its own
// data directory and socket, and returns them with the schema's URL.
func fleet(t *testing.T, n int) ([]*daemon, string) {
	t.Helper()
	return fleetWith(t, n, fleetLease, "")
}

// fleetWith is fleet with another lease timeout, and params added to the
// store's URL.
func fleetWith(t *testing.T, n int, lease, params string) ([]*daemon, string) {
	t.Helper()
	u := pgtest.Schema(t) + params
	var ds []*daemon
	for range n {
		d := newDaemon(t)
		d.serveArgs = []string{"--lease-timeout", lease}
		d.start("", "WEIR_STORE="+u, "WEIR_STORE_SHARED=true")
		ds = append(ds, d)
	}
	return ds, u
}

var holderRE = regexp.MustCompile(`recovered: holder=(\S+)`)

// holder is the id the daemon's leases carry, from its start's log line.
func (d *daemon) holder() string {
	d.t.Helper()
	m := holderRE.FindAllStringSubmatch(d.log(), -1)
	if len(m) == 0 {
		d.t.Fatalf("no holder in the daemon's log:\n%s", d.log())
	}
	return m[len(m)-1][1]
}

// pause stops the process (SIGSTOP) as a machine that hangs would;
// resume lets it go on (SIGCONT).
func (d *daemon) pause() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(d.resume) // a stopped process is never reaped
}

func (d *daemon) resume() { _ = d.cmd.Process.Signal(syscall.SIGCONT) }

// leasedBy lists the holders of a run's "leased" events, in order.
func leasedBy(evs []apitypes.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == "leased" {
			h, _ := e.Detail["holder"].(string)
			out = append(out, h)
		}
	}
	return out
}

// waitEvent waits until the run has an event of type typ (on node, if
// set), read through d.
func (d *daemon) waitEvent(runID, typ, node string) {
	d.t.Helper()
	testutil.Eventually(d.t, 30*time.Second, func() error {
		var seen []string
		for _, e := range d.events(runID) {
			if e.Type == typ && (node == "" || e.Node == node) {
				return nil
			}
			seen = append(seen, e.Type+"/"+e.Node)
		}
		return fmt.Errorf("run %s has no %s event on %q yet: %v\n%s", runID, typ, node, seen, d.log())
	})
}

// waitPhase waits until the run is in phase, read through d.
func (d *daemon) waitPhase(runID string, phase apitypes.Phase) {
	d.t.Helper()
	testutil.Eventually(d.t, 30*time.Second, func() error {
		r, err := d.api.RunGet(context.Background(), runID)
		if err != nil {
			return err
		}
		if r.Phase != phase {
			return fmt.Errorf("run %s is %s, want %s", runID, r.Phase, phase)
		}
		return nil
	})
}

const fleetFlows = `
flow(name = "hello", nodes = [task("greet", tool = "testkit.echo", args = lambda ctx: {"hello": ctx.input})])
flow(name = "kidw", nodes = [
    wait("ok", timeout = "1h", next = "nap"),
    task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": 3000}, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"kid": True}),
])
flow(name = "mumw", nodes = [
    subflow("call", flow = "kidw", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"from_child": ctx.results["call"]}),
])
flow(name = "long", nodes = [task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": 600000})])
flow(name = "slow", nodes = [
    task("nap", tool = "testkit.sleep", args = lambda ctx: {"ms": 4000}, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"slept": True}),
])
`

// TestFleetTwoDaemons runs two real daemons on one PostgreSQL schema. A
// flow registered on one runs on the other; runs submitted to either
// complete and are answered by both; a request id submitted again to the
// other daemon finds the same run; and a child that ends on daemon A wakes
// its parent, which goes on on daemon B: A drains as the child ends, so
// only B's scheduler is there to hear the wake-up.
func TestFleetTwoDaemons(t *testing.T) {
	e2e(t, "starts real daemons")
	ds, _ := fleet(t, 2)
	a, b := ds[0], ds[1]
	a.register(fleetFlows)
	ctx := context.Background()

	var ids []string
	for i := range 8 {
		d := ds[i%2]
		res, err := d.startRun("hello", fmt.Sprintf(`"n%d"`, i), fmt.Sprintf("req-%d", i))
		if err != nil {
			t.Fatalf("start on daemon %d: %v", i%2, err)
		}
		ids = append(ids, res.RunID)
	}
	for i, id := range ids {
		other := ds[(i+1)%2]
		v := other.waitTerminal(id)
		if v.Phase != apitypes.PhaseCompleted || string(v.Output) != fmt.Sprintf(`{"hello":"n%d"}`, i) {
			t.Fatalf("run %d ended %s with %s, want completed", i, v.Phase, v.Output)
		}
	}
	again, err := b.startRun("hello", `"n0"`, "req-0")
	if err != nil || !again.Existing || again.RunID != ids[0] {
		t.Fatalf("request id req-0 again on the other daemon: %+v %v, want the existing run %s", again, err, ids[0])
	}

	// A child on A wakes its parent on B.
	res, err := a.startRun("mumw", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	mum := res.RunID
	a.waitPhase(mum, apitypes.PhaseWaiting)
	var kid string
	testutil.Eventually(t, 30*time.Second, func() error {
		runs, err := client.Collect(a.api.RunListAll(ctx, client.RunListParams{}))
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Flow == "kidw" && r.Parent == mum && r.Phase == apitypes.PhaseWaiting {
				kid = r.ID
				return nil
			}
		}
		return fmt.Errorf("no waiting child of %s yet", mum)
	})
	b.pause() // the child's work resumes on A
	if _, err := a.api.RunApprove(ctx, kid, "ok", json.RawMessage(`{"yes":true}`)); err != nil {
		t.Fatal(err)
	}
	a.waitEvent(kid, "node_completed", "ok") // and the nap has begun
	b.resume()
	a.stop() // drains: the child ends on A, whose scheduler no longer dispatches
	v := b.waitTerminal(mum)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"kid":true`) {
		t.Fatalf("parent ended %s with %s %+v, want completed with the child's output\n%s", v.Phase, v.Output, v.Error, b.log())
	}
	kidHolders, mumHolders := leasedBy(b.events(kid)), leasedBy(b.events(mum))
	ha, hb := a.holder(), b.holder()
	if kidHolders[len(kidHolders)-1] != ha {
		t.Fatalf("the child's last lease was %s's, want daemon A's (%s)", kidHolders[len(kidHolders)-1], ha)
	}
	if mumHolders[len(mumHolders)-1] != hb {
		t.Fatalf("the parent's last lease was %s's, want daemon B's (%s)", mumHolders[len(mumHolders)-1], hb)
	}
	if strings.Contains(a.log()+b.log(), "[ERROR]") {
		t.Fatalf("errors logged:\nA:\n%s\nB:\n%s", a.log(), b.log())
	}
	b.stop()
}

// TestFleetKilledDaemonsWorkIsRescued runs three daemons on one schema.
// Daemon A is killed (SIGKILL, a failpoint) right after the started
// record of a non-idempotent call is durable, with the other two paused so
// that the call is certainly A's. The survivors rescue A's lease when it
// expires and resume the run: the call's outcome is unknown, and the mail
// plugin's probe on the survivor answers from its own host's outbox, which
// cannot know A's calls, so its not_happened is not acted on: the node
// takes its error wire with E_OUTCOME_UNKNOWN on whichever daemon resumes
// it, and the mail is sent by no host.
func TestFleetKilledDaemonsWorkIsRescued(t *testing.T) {
	e2e(t, "starts and kills real daemons")
	ds, u := fleet(t, 3)
	a := ds[0]
	a.register(crashFlow)
	a.stop()
	a.start("after-started", "WEIR_STORE="+u, "WEIR_STORE_SHARED=true")
	ds[1].pause()
	ds[2].pause()
	if _, err := a.startRun("crash", `{"x": 42}`, "req-crash"); err != nil {
		t.Fatalf("start: %v", err)
	}
	a.waitKilled()
	ha := a.holder()
	ds[1].resume()
	ds[2].resume()

	again, err := ds[2].startRun("crash", `{"x": 42}`, "req-crash")
	if err != nil || !again.Existing {
		t.Fatalf("resubmit to a survivor: %+v %v, want the existing run", again, err)
	}
	v := ds[1].waitTerminal(again.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"unknown":true`) {
		t.Fatalf("run ended %s with %s %+v, want the unknown outcome's wire\n%s\n%s", v.Phase, v.Output, v.Error, ds[1].log(), ds[2].log())
	}
	var code string
	expired := false
	for _, e := range ds[2].events(v.ID) {
		if e.Type == "node_failed" && e.Node == "send" {
			code, _ = e.Detail["code"].(string)
		}
		if e.Type == "expired" && e.Detail["holder"] == ha {
			expired = true
		}
	}
	if code != engine.CodeOutcomeUnknown || !expired {
		t.Fatalf("send failed with %q (want %s); A's lease expired: %v", code, engine.CodeOutcomeUnknown, expired)
	}
	holders := leasedBy(ds[2].events(v.ID))
	if last := holders[len(holders)-1]; last != ds[1].holder() && last != ds[2].holder() {
		t.Fatalf("the run was last leased by %s, want a survivor", last)
	}
	for i, d := range ds {
		if n := d.outbox(); n != 0 {
			t.Fatalf("daemon %d's host sent %d mails, want none", i, n)
		}
	}
}

// TestFleetPausedDaemonWritesNothing: daemon A is paused (SIGSTOP) in the
// middle of a tool call; its lease expires, daemon B rescues the run and
// finishes it. When A is let go (SIGCONT) its fence finds the lease taken:
// it writes nothing, not an event, not a lease, not a change to the run.
func TestFleetPausedDaemonWritesNothing(t *testing.T) {
	e2e(t, "starts real daemons")
	// A paused inside a transaction would hold rows B waits for until the
	// server ends its session: 5 s here, not the 30 s default.
	ds, u := fleetWith(t, 2, fleetLease, "&idle_in_transaction_session_timeout=5000")
	a, b := ds[0], ds[1]
	a.register(fleetFlows)
	b.pause() // the run is certainly A's
	res, err := a.startRun("slow", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	a.waitEvent(res.RunID, "leased", "") // the nap has begun
	a.pause()
	b.resume()
	v := b.waitTerminal(res.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"slept":true`) {
		t.Fatalf("run ended %s with %s %+v, want completed by B", v.Phase, v.Output, v.Error)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	snapshot := func() string {
		var events, leases int
		var run []byte
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM leases), (SELECT data FROM runs WHERE id = $1)`, res.RunID).
			Scan(&events, &leases, &run); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d events, %d leases, run %s", events, leases, run)
	}
	before := snapshot()
	a.resume()
	testutil.Eventually(t, 30*time.Second, func() error {
		// Its fence finds the lease taken; or, if it was paused inside a
		// transaction, the server ended that session and it closed its
		// admission. Either way it writes nothing.
		if !strings.Contains(a.log(), "lease lost") && !strings.Contains(a.log(), "admission closed: code=E_STORAGE") {
			return fmt.Errorf("daemon A has not found its lease taken yet:\n%s", a.log())
		}
		return nil
	})
	if after := snapshot(); after != before {
		t.Fatalf("the paused daemon wrote after its lease was rescued:\nbefore %s\nafter  %s", before, after)
	}
	var expired bool
	for _, e := range b.events(res.RunID) {
		if e.Type == "expired" && e.Detail["holder"] == a.holder() {
			expired = true
		}
	}
	if !expired {
		t.Fatal("no expired event for A's lease")
	}
	a.stop()
	b.stop()
}

// TestSharedNeedsPostgres: asking for a shared store without a PostgreSQL
// store is a usage error that says why, from the flag and from the
// environment alike; a value of WEIR_STORE_SHARED that is not a bool too.
func TestSharedNeedsPostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--shared"}, "--shared asks for a shared store"},
		{map[string]string{"WEIR_STORE_SHARED": "true"}, nil, "WEIR_STORE_SHARED asks for a shared store"},
		{map[string]string{"WEIR_STORE_SHARED": "maybe"}, nil, `WEIR_STORE_SHARED="maybe"`},
	} {
		args := append([]string{"--data", dir, "--socket", dir + "/s", "serve"}, tc.args...)
		code, _, errb, _ := run(t, tc.env, args...)
		if code != exitUsage || !strings.Contains(errb, tc.want) {
			t.Errorf("%v %v: exit %d %s, want a usage error with %q", tc.env, tc.args, code, errb, tc.want)
		}
	}
}

// TestFleetCancelReachesTheHolder: a cancel sent to daemon B stops the
// tool call daemon A is running. The lease timeout is 10 minutes, so A's
// renewal (the fallback, every 3m20s) cannot be what tells it: the
// cancel's wake-up is.
func TestFleetCancelReachesTheHolder(t *testing.T) {
	e2e(t, "starts real daemons")
	ds, _ := fleetWith(t, 2, "10m", "")
	a, b := ds[0], ds[1]
	a.register(fleetFlows)
	b.pause() // the call is certainly A's
	res, err := a.startRun("long", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	a.waitEvent(res.RunID, "leased", "")
	b.resume()
	answer, err := b.api.RunCancel(context.Background(), res.RunID)
	if err != nil || answer != apitypes.CancelAnswer(engine.CancelRequested) {
		t.Fatalf("cancel through B: %v %v, want requested", answer, err)
	}
	v := b.waitTerminal(res.RunID)
	if v.Phase != apitypes.PhaseCancelled {
		t.Fatalf("run ended %s %+v, want cancelled", v.Phase, v.Error)
	}
	if got := leasedBy(b.events(res.RunID)); len(got) != 1 || got[0] != a.holder() {
		t.Fatalf("leases %v, want only A's", got)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		rec, err := os.ReadFile(filepath.Join(a.data, "plugin-state", "testkit", "cancelled.jsonl"))
		if err != nil || !strings.Contains(string(rec), "canceled") {
			return fmt.Errorf("A's testkit.sleep did not see the cancel: %v %s", err, rec)
		}
		return nil
	})
	a.stop()
	b.stop()
}
