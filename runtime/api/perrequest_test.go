package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// Ids a caller sends become store keys: one no key can hold, or one with
// control characters, is that request's E_BAD_REQUEST (E_BAD_REQUEST_ID
// for a request id); admission stays
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
		code := engine.CodeBadRequest
		if strings.HasPrefix(tc.name, "request id") {
			code = engine.CodeBadRequestID
		}
		if a.status != 400 || e.Code != code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %d %+v, want 400 %s with %q", tc.name, a.status, e, code, tc.msg)
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

// A request id is checked as it was sent: encoding/json turns an invalid
// UTF-8 byte or a lone surrogate escape into U+FFFD, so "order-\xff" and
// "order-\xfe" were one id and the second start was answered as the first
// (existing), its work never done. Both are refused with E_BAD_REQUEST_ID,
// as are U+FFFD itself (what another transport's decoder leaves) and the
// prefixes reserved for runs the daemon starts; nothing is stored.
func TestRequestIDCheckedAsSent(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	body := func(lit string) string { return `{"flow":"echo","input":{"x":1},"request_id":"` + lit + `"}` }
	for _, c := range []struct{ name, lit, msg string }{
		{"invalid byte ff", "order-\xff", "not valid UTF-8 (byte 0xff"},
		{"invalid byte fe", "order-\xfe", "not valid UTF-8 (byte 0xfe"},
		{"truncated sequence", "order-\xe2\x82", "not valid UTF-8"},
		{"encoded surrogate", "order-\xed\xa0\x80", "not valid UTF-8"},
		{"lone high surrogate", `order-\ud800`, `lone surrogate escape \ud800`},
		{"high surrogate then a letter", `order-\ud800x`, `lone surrogate escape \ud800`},
		{"two high surrogates", `order-\ud800\ud800`, `lone surrogate escape \ud800`},
		{"lone low surrogate", `order-\uDC00`, `lone surrogate escape \uDC00`},
		{"U+FFFD escaped", `order-\ufffd`, "U+FFFD"},
		{"U+FFFD raw", "order-\xef\xbf\xbd", "U+FFFD"},
		{"schedule prefix", "schedule:nightly", `reserved for runs the daemon starts itself`},
		{"event prefix", "event:push-1", `starts with "event:"`},
		{"fork prefix", "fork:run_1", `starts with "fork:"`},
		{"redrive prefix", "redrive:batch", `starts with "redrive:"`},
	} {
		a := b.send(t, alice, "POST", "/v1/runs", body(c.lit)) // raw bytes; `...` holds JSON escapes
		if e := a.errorBody(t); a.status != 400 || e.Code != engine.CodeBadRequestID || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: %d %s, want 400 %s with %q", c.name, a.status, a.body, engine.CodeBadRequestID, c.msg)
		}
	}
	var runs []*store.Run
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		runs, err = tx.RunList(store.RunListParams{Owner: "alice", Limit: 100})
		return err
	}); err != nil || len(runs) != 0 {
		t.Fatalf("refused starts stored %d runs (%v)", len(runs), err)
	}
	// What is a character passes: a surrogate pair, a prefix that is not
	// reserved, the reserved words elsewhere in the id.
	for i, lit := range []string{`order-\ud83d\ude00`, "order-\u00e9", "é-order", "schedule-nightly", "my:schedule:1"} {
		a := b.send(t, alice, "POST", "/v1/runs", body(lit))
		if a.status != 201 {
			t.Errorf("id %d %s: %d %s", i, lit, a.status, a.body)
		}
	}
}
