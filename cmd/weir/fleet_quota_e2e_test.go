package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const (
	quotaSpender = "spender-fleet-token-0123456789"
	quotaQueuer  = "queuer-fleet-token-01234567890"
	quotaOther   = "other-fleet-token-012345678901"
)

// TestFleetOwnerQuotasAreTheFleets: two daemons on one PostgreSQL schema.
// An owner with budget_per_hour = 15 spends 10 through each daemon (each
// start came while under 15); then both daemons refuse its next start
// with E_OWNER_BUDGET naming the 20 the fleet spent, and so does a daemon
// killed and started again. An owner with max_queued = 2 queues two runs
// through one daemon (no slot is free) and is refused at the other. A
// third owner is let in everywhere. (Each daemon used to count spend and
// queued runs in its own memory: the owner got its quota once per daemon,
// and its budget again after each restart.)
func TestFleetOwnerQuotasAreTheFleets(t *testing.T) {
	e2e(t, "starts real daemons on PostgreSQL")
	u := pgtest.Schema(t)
	cfg := tokenConfig(t, `
owner "spender" {
  budget_per_hour = 15
}
owner "queuer" {
  max_queued = 2
}
`, "spender", quotaSpender, "queuer", quotaQueuer, "other", quotaOther)
	var ds []*daemon
	for range 2 {
		d := newDaemon(t)
		d.serveArgs = []string{"--config", cfg, "--workers", "1", "--lease-timeout", fleetLease}
		d.start("", "WEIR_STORE="+u, "WEIR_STORE_SHARED=true")
		ds = append(ds, d)
	}
	ds[0].register(`
flow(name = "pay", nodes = [task("t", tool = "testkit.cost", args = {"cost": 10})])
flow(name = "hold", nodes = [task("t", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})])
`)
	ctx := context.Background()
	ended := func(c *client.Client, id string) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			r, err := c.RunGet(ctx, id)
			if err != nil {
				return err
			}
			if r.Phase != apitypes.PhaseCompleted {
				return fmt.Errorf("run %s is %s", id, r.Phase)
			}
			return nil
		})
	}
	refused := func(c *client.Client, flow, input, code, says string) {
		t.Helper()
		_, err := c.RunStart(ctx, apitypes.StartRequest{Flow: flow, Input: json.RawMessage(input)})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != code || ce.HTTPStatus != 429 || !strings.Contains(ce.Message, says) {
			t.Fatalf("start of %s: %v, want 429 %s saying %q", flow, err, code, says)
		}
	}
	for i, d := range ds {
		c := d.tokenClient(quotaSpender)
		res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "pay", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatalf("the spender's run at daemon %d: %v", i, err)
		}
		ended(c, res.RunID)
	}
	for _, d := range ds {
		refused(d.tokenClient(quotaSpender), "pay", `{}`, "E_OWNER_BUDGET", "spent 20 of its budget_per_hour of 15")
	}
	ds[1].kill()
	ds[1].start("", "WEIR_STORE="+u, "WEIR_STORE_SHARED=true")
	refused(ds[1].tokenClient(quotaSpender), "pay", `{}`, "E_OWNER_BUDGET", "spent 20")

	// Every slot busy with the other owner's long runs, so the queuer's
	// runs stay queued.
	other := ds[0].tokenClient(quotaOther)
	var long []string
	for range 2 {
		res, err := other.RunStart(ctx, apitypes.StartRequest{Flow: "hold", Input: json.RawMessage(`{"ms": 20000}`)})
		if err != nil {
			t.Fatal(err)
		}
		long = append(long, res.RunID)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		running, err := client.Collect(other.RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseRunning}))
		if err != nil || len(running) < 2 {
			return fmt.Errorf("%d of the other owner's runs running (%v), want both slots", len(running), err)
		}
		return nil
	})
	// The queuer holds no slot: its first runs take each daemon's spare
	// slot (engine.spare_workers), and only then do its runs queue.
	q0 := ds[0].tokenClient(quotaQueuer)
	var queuer []string
	for i := range 2 {
		res, err := q0.RunStart(ctx, apitypes.StartRequest{Flow: "hold", Input: json.RawMessage(`{"ms": 20000}`)})
		if err != nil {
			t.Fatalf("the queuer's run %d: %v", i, err)
		}
		queuer = append(queuer, res.RunID)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		running, err := client.Collect(q0.RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseRunning}))
		if err != nil || len(running) < 2 {
			return fmt.Errorf("%d of the queuer's runs running (%v), want one on each daemon's spare slot", len(running), err)
		}
		return nil
	})
	// Daemon 0 counts a run it accepted as queued until it sees it start;
	// one another daemon started leaves its count within a few rescue
	// passes (ForgetStarted): until then a start may be refused, and
	// changes nothing.
	for i := range 2 {
		testutil.Eventually(t, 60*time.Second, func() error {
			res, err := q0.RunStart(ctx, apitypes.StartRequest{Flow: "hold", Input: json.RawMessage(`{"ms": 1}`), RequestID: fmt.Sprint("queued-", i)})
			if err != nil {
				return fmt.Errorf("the queuer's queued run %d: %v", i, err)
			}
			queuer = append(queuer, res.RunID)
			return nil
		})
	}
	refused(ds[1].tokenClient(quotaQueuer), "hold", `{"ms": 1}`, "E_OWNER_QUOTA", "max_queued is 2")
	for _, d := range ds {
		if _, err := d.tokenClient(quotaOther).RunStart(ctx, apitypes.StartRequest{Flow: "pay", Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("the other owner refused for the others' quotas: %v", err)
		}
	}
	for _, id := range long {
		if _, err := other.RunCancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range queuer {
		if _, err := q0.RunCancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// tokenConfig writes a daemon config whose TCP listener (on a free port)
// takes each token of nameSecrets (name, secret, name, secret, ...),
// followed by extra, and returns its path.
func tokenConfig(t *testing.T, extra string, nameSecrets ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("tcp {\n  address = \"127.0.0.1:0\"\n")
	for i := 0; i+1 < len(nameSecrets); i += 2 {
		fmt.Fprintf(&b, "  token %q {\n    secret = %q\n  }\n", nameSecrets[i], nameSecrets[i+1])
	}
	b.WriteString("}\n" + extra)
	path := filepath.Join(t.TempDir(), "weir.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
