package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const storageToken = "storage-token-0123456789abcdef"

// TestOwnerStorageQuotaOnARealDaemon: a token owner with a storage quota
// of 4 KiB stores two runs of 3 KiB inputs; once the daemon has measured
// (at its start, then every minute) its next start and its events are
// refused with E_OWNER_QUOTA (429), while the daemon's own OS user, with
// no quota, goes on starting runs.
func TestOwnerStorageQuotaOnARealDaemon(t *testing.T) {
	e2e(t, "starts a real daemon")
	cfg := tokenConfig(t, `
owner "tight" {
  storage = "4KiB"
}
`, "tight", storageToken)
	d := newDaemon(t)
	d.serveArgs = []string{"--config", cfg}
	ctx := context.Background()
	d.start("")
	d.register(`flow(name = "keep", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"n": len(ctx.input["pad"])})])`)
	big := json.RawMessage(`{"pad": "` + strings.Repeat("x", 3<<10) + `"}`)
	tight := d.tokenClient(storageToken)
	for i := range 2 {
		if _, err := tight.RunStart(ctx, apitypes.StartRequest{Flow: "keep", Input: big, RequestID: fmt.Sprint("t-", i)}); err != nil {
			t.Fatalf("the tight owner's run %d before any measure: %v", i, err)
		}
	}
	d.stop()
	d.start("") // measures at its start
	tight = d.tokenClient(storageToken)
	_, err := tight.RunStart(ctx, apitypes.StartRequest{Flow: "keep", Input: big, RequestID: "t-2"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != "E_OWNER_QUOTA" || ce.HTTPStatus != 429 || !strings.Contains(ce.Message, "storage quota is 4.0 KiB") {
		t.Fatalf("the tight owner over its storage: %v, want 429 E_OWNER_QUOTA naming the quota", err)
	}
	if _, err := tight.SendEvent(ctx, apitypes.EventSendRequest{ID: "e-1", Name: "a.b"}); client.ErrorCode(err) != "E_OWNER_QUOTA" {
		t.Fatalf("the tight owner's event over its storage: %v, want E_OWNER_QUOTA", err)
	}
	for i := range 3 {
		res, err := d.startRun("keep", string(big), fmt.Sprint("root-", i))
		if err != nil {
			t.Fatalf("the daemon's own user refused for another owner's storage: %v", err)
		}
		if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("root's run ended %s", v.Phase)
		}
	}
	d.stop()
}
