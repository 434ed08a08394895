package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const (
	fairHeavy = "heavy-fleet-token-0123456789ab"
	fairLight = "light-fleet-token-0123456789ab"
)

// TestFleetSharesHoldAcrossDaemons: two daemons on one PostgreSQL schema,
// two slots each. A heavy owner queues 120 runs of 300 ms through both
// (nine seconds of the fleet's slots); then a light owner starts six. The
// fleet serves owners fairly in the claim, so the light runs take the
// next slots that free, on either daemon, ahead of the heavy backlog: they
// have all ended while most of the heavy runs still wait to start. (In
// the order of arrival they would wait the whole nine seconds.)
func TestFleetSharesHoldAcrossDaemons(t *testing.T) {
	e2e(t, "starts real daemons on PostgreSQL")
	u := pgtest.Schema(t)
	cfg := tokenConfig(t, "", "heavy", fairHeavy, "light", fairLight)
	var heavy, light []*client.Client
	var ds []*daemon
	for range 2 {
		d := newDaemon(t)
		d.serveArgs = []string{"--config", cfg, "--workers", "2", "--lease-timeout", fleetLease}
		d.start("", "WEIR_STORE="+u, "WEIR_STORE_SHARED=true")
		heavy, light = append(heavy, d.tokenClient(fairHeavy)), append(light, d.tokenClient(fairLight))
		ds = append(ds, d)
	}
	ds[0].register(`flow(name = "nap", nodes = [task("z", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})])`)
	ctx := context.Background()
	start := func(c *client.Client, id string) string {
		t.Helper()
		res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "nap", Input: json.RawMessage(`{"ms": 300}`), RequestID: id})
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		return res.RunID
	}
	const heavyRuns = 120
	for i := range heavyRuns {
		start(heavy[i%2], fmt.Sprintf("heavy-%d", i))
	}
	// The heavy owner holds every slot of the fleet before the light
	// owner comes.
	testutil.Eventually(t, 60*time.Second, func() error {
		running, err := client.Collect(heavy[0].RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseRunning}))
		if err != nil {
			return err
		}
		if len(running) < 4 {
			return fmt.Errorf("%d heavy runs running, want the fleet's 4 slots", len(running))
		}
		return nil
	})
	var lights []string
	for i := range 6 {
		lights = append(lights, start(light[i%2], fmt.Sprintf("light-%d", i)))
	}
	for i, id := range lights {
		var v *apitypes.Run
		testutil.Eventually(t, 60*time.Second, func() error {
			var err error
			if v, err = light[i%2].RunGet(ctx, id); err != nil {
				return err
			}
			if !v.Phase.Terminal() {
				return fmt.Errorf("light run %s is %s", id, v.Phase)
			}
			return nil
		})
		if v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("light run %s ended %s %+v", id, v.Phase, v.Error)
		}
	}
	queued, err := client.Collect(heavy[0].RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseQueued}))
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) < heavyRuns/2 {
		t.Fatalf("when the light owner's six runs had ended, %d of the heavy owner's %d still waited to start: want most, the light runs served ahead of the backlog", len(queued), heavyRuns)
	}
	t.Logf("the light owner's runs all ended with %d of %d heavy runs still queued", len(queued), heavyRuns)
	for _, d := range ds {
		d.stop()
	}
}
