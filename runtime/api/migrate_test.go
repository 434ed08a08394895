package api

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// A run parked on a person's wait is migrated through the API and the Go
// client to the latest version of its flow, once it fits; the
// registration of a version it does not fit warns of it, a migration to
// that version is a conflict naming the misfit, another owner's is 404,
// and a run that ended is not parked.
func TestMigrateRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	_, ac := newClients(t, b)
	bob, err := client.New(b.tcpURL, client.WithToken(bobToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	ctx := context.Background()
	src := `flow(name = "held", nodes = [
    wait("hold", timeout = "1h", next = "after"),
    task("after", tool = "testkit.echo", args = {"v": 1}),
])`
	register := func(src string) *apitypes.RegisterResult {
		t.Helper()
		res, err := ac.FlowRegister(ctx, apitypes.SourceFile{Path: "held.star", Src: src})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	register(src)
	started, err := ac.RunStart(ctx, apitypes.StartRequest{Flow: "held"})
	if err != nil {
		t.Fatal(err)
	}
	id := started.RunID
	if _, err := ac.RunWaitUntil(ctx, id, apitypes.UntilDecision); err != nil {
		t.Fatal(err)
	}
	renamed := register(strings.ReplaceAll(src, `"hold"`, `"review"`))
	if len(renamed.Diagnostics) != 1 || renamed.Diagnostics[0].Code != string(engine.CodeParkedIncompatible) || !strings.Contains(renamed.Diagnostics[0].Message, id) {
		t.Fatalf("registration's warnings %+v", renamed.Diagnostics)
	}
	_, err = ac.RunMigrate(ctx, id, "")
	apiError(t, "a migration to a version the run does not fit", err, apitypes.CodeIncompatible, 409)
	_, err = bob.RunMigrate(ctx, id, "")
	apiError(t, "bob migrates alice's run", err, apitypes.CodeNotFound, 404)
	if a := b.send(t, alice, "POST", "/v1/runs/"+id+"/migrate", map[string]any{"to": "v0"}); a.status != 400 || a.errorBody(t).Code != apitypes.CodeBadRequest {
		t.Errorf("to another version than latest: %d", a.status)
	}

	register(strings.Replace(src, `{"v": 1}`, `{"v": 2}`, 1))
	res, err := ac.RunMigrate(ctx, id, "the fix")
	if err != nil || !res.Migrated || res.From == res.To || res.Flow != "held" || res.RunID != id {
		t.Fatalf("migrate: %+v %v", res, err)
	}
	if _, err := ac.RunApprove(ctx, id, "hold", nil); err != nil {
		t.Fatal(err)
	}
	v, err := ac.RunWait(ctx, id, client.RunWaitParams{})
	if err != nil || v.Phase != apitypes.PhaseCompleted || string(v.Output) != `{"v":2}` {
		t.Fatalf("migrated run: %+v %v", v, err)
	}
	evs, err := client.Collect(ac.RunEventsAll(ctx, id, client.EventListParams{}))
	if err != nil || !slices.ContainsFunc(evs, func(e apitypes.Event) bool {
		return e.Type == "migrated" && e.Detail["from"] == res.From && e.Detail["to"] == res.To && e.Detail["by"] == "alice" && e.Detail["reason"] == "the fix"
	}) {
		t.Errorf("no migrated event naming both versions, who and why: %v", err)
	}
	_, err = ac.RunMigrate(ctx, id, "")
	apiError(t, "a run that ended", err, apitypes.CodeNotWaiting, 409)
}
