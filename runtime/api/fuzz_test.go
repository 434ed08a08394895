package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

var startSeeds = []string{
	`{"flow":"echo"}`,
	`{"flow":"echo","input":{"x":[1,2,{"y":null}]},"request_id":"r-1"}`,
	`{"flow":"echo","input":"\u0000"}`,
	`{"flow":"echo"} trailing`,
	`{"flow":"echo","bogus":true}`,
	`{"flow":1e999}`,
	`[`,
	``,
	`null`,
	`{"flow":"echo","input":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
}

// FuzzDecodeStartRequest: decoding never panics, and what it accepts is
// exactly one object of known fields that survives a round trip.
func FuzzDecodeStartRequest(f *testing.F) {
	for _, s := range startSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req apitypes.StartRequest
		if err := DecodeStrict(body, &req); err != nil {
			if !strings.HasPrefix(err.Error(), "malformed request body") {
				t.Fatalf("error %q does not say what is wrong", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", body, err)
		}
		var again apitypes.StartRequest
		if err := DecodeStrict(out, &again); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if again.Flow != req.Flow || again.RequestID != req.RequestID || !sameJSON(t, again.Input, req.Input) {
			t.Fatalf("round trip changed %+v into %+v", req, again)
		}
	})
}

// sameJSON compares two JSON values by meaning: escapes and spacing may
// differ (json.Marshal escapes <, > and & in raw messages).
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	decode := func(raw json.RawMessage) any {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("input %q is not JSON: %v", raw, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// FuzzDecodeRegisterRequest: the same for flow registrations.
func FuzzDecodeRegisterRequest(f *testing.F) {
	f.Add([]byte(`{"files":[{"path":"a.star","src":"flow(name = \"x\", nodes = [])"}]}`))
	f.Add([]byte(`{"files":[]}`))
	f.Add([]byte(`{"files":[{"path":"a.star","src":"","extra":1}]}`))
	f.Add([]byte(`{"files":null} {}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req apitypes.RegisterRequest
		if err := DecodeStrict(body, &req); err != nil {
			return
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var again apitypes.RegisterRequest
		if err := DecodeStrict(out, &again); err != nil || len(again.Files) != len(req.Files) {
			t.Fatalf("round trip of %s: %v %+v", out, err, again)
		}
	})
}

// FuzzStartEndpoint sends arbitrary bodies and query strings to POST
// /v1/runs of a real engine: every answer is a known status, every refusal
// is a JSON error, and only a 201 or 200 carries a run.
func FuzzStartEndpoint(f *testing.F) {
	for _, s := range startSeeds {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(`{"flow":"echo"}`), "limit=1")
	f.Add([]byte(`{"flow":"sleep","input":{"ms":"x"}}`), "")
	b := setup(f, engine.Config{Workers: 2})
	ctx := context.WithValue(context.Background(), peerKey, &Identity{Owner: "fuzz", Local: true, UID: -1})
	f.Fuzz(func(t *testing.T, body []byte, query string) {
		if len(body) > MaxStartBody+16 {
			return
		}
		req := httptest.NewRequestWithContext(ctx, "POST", "/v1/runs", bytes.NewReader(body))
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		b.srv.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusCreated, http.StatusOK:
			var res engine.StartResult
			if err := DecodeStrict(rec.Body.Bytes(), &res); err != nil || !strings.HasPrefix(res.RunID, "run_") {
				t.Fatalf("%d answer %s: %v", rec.Code, rec.Body, err)
			}
		case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge:
			var e engine.Error
			if err := DecodeStrict(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Class != engine.ClassProtocol {
				t.Fatalf("%d answer %s: %v", rec.Code, rec.Body, err)
			}
		default:
			t.Fatalf("unexpected status %d for %q?%s: %s", rec.Code, body, query, rec.Body)
		}
	})
}
