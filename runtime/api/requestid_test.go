package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// GET /v1/runs?request_id= finds the caller's own run by the request id it
// was started with, and nobody else's: alice and bob both start with the
// same request id and each finds only their own run; an id nobody of
// theirs used answers an empty list.
func TestListByRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	alices := b.start(t, alice, "gate", `{}`, "order-7")
	bobs := b.start(t, bob, "gate", `{}`, "order-7")
	other := b.start(t, alice, "gate", `{}`, "order-8")
	b.start(t, alice, "gate", `{}`, "")

	find := func(c caller, id string) []string {
		t.Helper()
		a := b.send(t, c, "GET", "/v1/runs?request_id="+url.QueryEscape(id), nil)
		if a.status != http.StatusOK {
			t.Fatalf("request_id %q as %s: %d %s", id, c.name, a.status, a.body)
		}
		var runs []apitypes.Run
		if err := json.Unmarshal(a.body, &runs); err != nil {
			t.Fatal(err)
		}
		if runs == nil {
			t.Errorf("request_id %q as %s answered %s, want a list", id, c.name, a.body)
		}
		var ids []string
		for _, r := range runs {
			if r.RequestID != id {
				t.Errorf("request_id %q found run %s of request id %q", id, r.ID, r.RequestID)
			}
			ids = append(ids, r.ID+" "+r.Owner)
		}
		return ids
	}
	for _, tc := range []struct {
		c    caller
		id   string
		want string
	}{
		{alice, "order-7", alices + " alice"},
		{bob, "order-7", bobs + " bob"},
		{alice, "order-8", other + " alice"},
		{bob, "order-8", ""},
		{local, "order-7", ""},
		{alice, "order-9", ""},
		// A reserved prefix may not start a run, but may be looked up.
		{alice, "schedule:nightly", ""},
	} {
		if got := strings.Join(find(tc.c, tc.id), ","); got != tc.want {
			t.Errorf("request_id %q as %s found %q, want %q", tc.id, tc.c.name, got, tc.want)
		}
	}

	for _, tc := range []struct{ name, query, want string }{
		{"empty", "request_id=", "request_id is empty"},
		{"with a filter", "request_id=order-7&phase=waiting", "give it without other parameters"},
		{"with a page", "request_id=order-7&limit=1", "give it without other parameters"},
		{"control character", "request_id=order%01", "request id holds the control character U+0001"},
		{"too long", "request_id=" + strings.Repeat("r", 257), "request id of 257 bytes"},
	} {
		a := b.send(t, alice, "GET", "/v1/runs?"+tc.query, nil)
		if a.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, a.status, a.body)
			continue
		}
		if e := a.errorBody(t); e.Code != engine.CodeBadRequest || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: %s %q, want %s with %q", tc.name, e.Code, e.Message, engine.CodeBadRequest, tc.want)
		}
	}
}
