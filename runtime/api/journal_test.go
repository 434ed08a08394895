package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// TestJournalRoute: GET /v1/runs/{id}/journal answers the owner the
// declarations of the tools the run's version calls (turns: [] for a
// flow without agents) and another owner 404, like a missing run.
func TestJournalRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	id := b.start(t, alice, "echo", `{"x": 1}`, "")
	b.waitPhase(t, alice.name, id, store.Phase.Terminal)
	a := b.send(t, alice, "GET", "/v1/runs/"+id+"/journal", nil)
	var j apitypes.RunJournal
	if a.status != http.StatusOK || json.Unmarshal(a.body, &j) != nil || j.Turns == nil || len(j.Tools) != 1 || j.Tools[0].Name == "" {
		t.Fatalf("journal: %d %s", a.status, a.body)
	}
	if a := b.send(t, bob, "GET", "/v1/runs/"+id+"/journal", nil); a.status != http.StatusNotFound || a.errorBody(t).Code != engine.CodeNotFound {
		t.Errorf("another owner's journal: %d %s", a.status, a.body)
	}
	if a := b.send(t, alice, "GET", "/v1/runs/"+id+"/journal?x=1", nil); a.status != http.StatusBadRequest {
		t.Errorf("an unknown parameter: %d %s", a.status, a.body)
	}
}
