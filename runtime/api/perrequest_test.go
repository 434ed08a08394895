package api

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// Ids a caller sends become store keys: one no key can hold, or one with
// control characters, is that request's E_BAD_REQUEST; admission stays
// open for everyone and the health report says nothing of it.
func TestBadIDsArePerRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	runID := b.start(t, local, "echo", `{"x":1}`, "")
	b.waitPhase(t, b.me, runID, store.Phase.Terminal)
	start := func(requestID string) string {
		j, _ := json.Marshal(apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{}`), RequestID: requestID})
		return string(j)
	}
	long := strings.Repeat("r", 65000)
	tests := []struct {
		name         string
		method, path string
		body         any
		msg          string
	}{
		{"request id at badger's key limit", "POST", "/v1/runs", start(long), "request id of 65000 bytes: at most 256"},
		{"request id one over", "POST", "/v1/runs", start(strings.Repeat("r", engine.MaxRequestIDBytes+1)), "at most 256 bytes"},
		{"request id with NUL", "POST", "/v1/runs", start("a\x00b"), "control character U+0000"},
		{"request id with escape", "POST", "/v1/runs", start("a\x1b[2Jb"), "control character U+001B"},
		{"long run id", "GET", "/v1/runs/" + strings.Repeat("r", 5000), nil, "at most 256 bytes"},
		{"run id with NUL", "GET", "/v1/runs/" + url.PathEscape("run_\x00x"), nil, "control character U+0000"},
		{"cancel of a long run id", "POST", "/v1/runs/" + long + "/cancel", nil, "at most 256 bytes"},
		{"decision on a node with NUL", "POST", "/v1/runs/" + runID + "/waits/" + url.PathEscape("h\x00") + "/approve", `{}`, "control character U+0000"},
		{"list after a long cursor", "GET", "/v1/runs?after=" + strings.Repeat("r", 5000), nil, "after of 5000 bytes"},
	}
	for _, tc := range tests {
		a := b.send(t, local, tc.method, tc.path, tc.body)
		e := a.errorBody(t)
		if a.status != 400 || e.Code != engine.CodeBadRequest || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %d %+v, want 400 %s with %q", tc.name, a.status, e, engine.CodeBadRequest, tc.msg)
		}
		if len(e.Message) > 300 {
			t.Errorf("%s: the refusal quotes %d bytes", tc.name, len(e.Message))
		}
	}
	a := b.send(t, local, "GET", "/v1/health", nil)
	var s apitypes.Status
	if err := json.Unmarshal(a.body, &s); err != nil {
		t.Fatal(err)
	}
	if a.status != 200 || s.Admission != apitypes.AdmissionOpen {
		t.Fatalf("health after the refusals: %d %s", a.status, a.body)
	}
	b.waitPhase(t, "alice", b.start(t, alice, "echo", `{}`, strings.Repeat("é", engine.MaxRequestIDBytes/2)), store.Phase.Terminal)
}
