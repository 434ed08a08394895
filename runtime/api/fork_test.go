package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// TestForkRoute: POST /v1/runs/{id}/fork answers 201 with Location and
// the fork, 200 with existing for the same request id, 404 for another
// owner, 400 for a bad point, a reserved request id or an unknown field;
// the fork's view carries forked_from and started_by, and the lineage
// lists the family.
func TestForkRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	id := b.start(t, alice, "echo", `{"x": 1}`, "")
	b.waitPhase(t, alice.name, id, store.Phase.Terminal)

	req := apitypes.ForkRequest{From: "e", Input: json.RawMessage(`{"x": 2}`), RequestID: "f1", Reason: "again"}
	a := b.send(t, alice, "POST", "/v1/runs/"+id+"/fork", req)
	var res apitypes.ForkResult
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &res) != nil || a.header.Get("Location") != "/v1/runs/"+res.RunID ||
		res.ForkedFrom != (apitypes.ForkRef{RunID: id, Node: "e", Visit: 1}) || len(res.Effects) != 0 {
		t.Fatalf("fork: %d %s %v", a.status, a.body, a.header)
	}
	a = b.send(t, alice, "POST", "/v1/runs/"+id+"/fork", req)
	var again apitypes.ForkResult
	if a.status != http.StatusOK || json.Unmarshal(a.body, &again) != nil || !again.Existing || again.RunID != res.RunID {
		t.Fatalf("the same fork again: %d %s", a.status, a.body)
	}
	b.waitPhase(t, alice.name, res.RunID, store.Phase.Terminal)
	a = b.send(t, alice, "GET", "/v1/runs/"+res.RunID, nil)
	var v apitypes.Run
	if a.status != http.StatusOK || json.Unmarshal(a.body, &v) != nil || v.ForkedFrom == nil || v.ForkedFrom.RunID != id || v.StartedBy != "fork:"+id+":e@1" {
		t.Fatalf("the fork's view: %d %s", a.status, a.body)
	}
	a = b.send(t, alice, "GET", "/v1/runs/"+res.RunID+"/lineage", nil)
	var fam []apitypes.Run
	if a.status != http.StatusOK || json.Unmarshal(a.body, &fam) != nil || len(fam) != 2 || fam[0].ID != id || fam[1].ID != res.RunID {
		t.Fatalf("lineage: %d %s", a.status, a.body)
	}
	for _, tt := range []struct {
		name   string
		c      caller
		body   any
		status int
		code   string
	}{
		{"another owner", bob, apitypes.ForkRequest{From: "e"}, http.StatusNotFound, engine.CodeNotFound},
		{"no such node", alice, apitypes.ForkRequest{From: "nope"}, http.StatusBadRequest, engine.CodeForkPoint},
		{"a reserved request id", alice, apitypes.ForkRequest{From: "e", RequestID: "fork:x"}, http.StatusBadRequest, engine.CodeBadRequestID},
		{"an unknown field", alice, `{"from": "e", "frm": 1}`, http.StatusBadRequest, engine.CodeBadRequest},
	} {
		a := b.send(t, tt.c, "POST", "/v1/runs/"+id+"/fork", tt.body)
		if a.status != tt.status || a.errorBody(t).Code != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, a.status, a.body, tt.status, tt.code)
		}
	}
}
