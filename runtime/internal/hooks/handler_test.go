package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/clock"
)

const (
	ghSecret     = "gh-secret-0123456789"
	stripeSecret = "whsec_0123456789abcdef"
)

// accepted records what Accept was handed, deduplicating on (owner, id)
// as the event store does; err, if set, is what it fails with.
type accepted struct {
	mu     sync.Mutex
	events []Event
	owners []string
	seen   map[string]bool
	err    error
}

func (a *accepted) accept(_ context.Context, owner string, ev Event) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return false, a.err
	}
	a.events = append(a.events, ev)
	a.owners = append(a.owners, owner)
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	dup := a.seen[owner+"\x00"+ev.ID]
	a.seen[owner+"\x00"+ev.ID] = true
	return dup, nil
}

func (a *accepted) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.events)
}

type testBundle struct {
	handler *Handler
	mux     *http.ServeMux
	clock   *clock.Fake
	got     *accepted
}

func testHooks() []Hook {
	return []Hook{
		{Name: "github", Owner: "acme", Secret: []byte(ghSecret), Scheme: GitHub, Event: "github", EventHeader: "X-GitHub-Event",
			IDHeader: "X-GitHub-Delivery", Key: "/repository/full_name"},
		{Name: "stripe", Owner: "billing", Secret: []byte(stripeSecret), Scheme: Stripe, Event: "stripe.event", IDKey: "/id", Key: "/data/object/customer"},
		{Name: "generic", Secret: []byte("generic-secret"), Scheme: HMACSHA256, SignatureHeader: "X-Acme-Signature", Event: "acme.thing",
			IDHeader: "X-Acme-Delivery", MaxBody: MinBody},
	}
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{clock: clock.NewFake(time.Unix(1700000000, 0)), got: &accepted{}}
	h, err := NewHandler(b.got.accept, testHooks(), Options{Clock: b.clock})
	if err != nil {
		t.Fatal(err)
	}
	b.handler = h
	b.mux = http.NewServeMux()
	b.mux.Handle("/v1/hooks/{name}", h)
	return b
}

// post sends body to hook with the headers, returning the answer's status
// and decoded body.
func (b *testBundle) post(t *testing.T, hook, body string, hdr http.Header) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/hooks/"+hook, strings.NewReader(body))
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	b.mux.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body.String())
	}
	return rec.Code, out, rec.Header()
}

const pushBody = `{"ref":"refs/heads/main","repository":{"full_name":"acme/widgets","id":42}}`

func githubDelivery(body, delivery string) http.Header {
	return header(GitHubHeader, "sha256="+sign(ghSecret, body), "X-GitHub-Delivery", delivery, "X-GitHub-Event", "push",
		"Content-Type", "application/json")
}

func TestGitHubDeliveryBecomesEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out, _ := b.post(t, "github", pushBody, githubDelivery(pushBody, "72d3162e-cc78-11e3-81ab-4c9367dc0958"))
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %v", status, out)
	}
	if out["event_id"] != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || out["duplicate"] != false {
		t.Fatalf("answer %v", out)
	}
	want := Event{Name: "github.push", ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Key: "acme/widgets", Payload: json.RawMessage(pushBody)}
	if len(b.got.events) != 1 || fmt.Sprint(b.got.events[0]) != fmt.Sprint(want) || b.got.owners[0] != "acme" {
		t.Fatalf("accepted %v for %v, want %v for acme", b.got.events, b.got.owners, want)
	}
}

// A replayed delivery (a provider's retry, or someone resending what they
// saw) passes the signature check — it is signed — and is handed over
// with the same event id, so the acceptance makes it a duplicate.
func TestReplayedDeliveryIsTheSameEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hdr := githubDelivery(pushBody, "d-1")
	for i, wantDup := range []bool{false, true} {
		status, out, _ := b.post(t, "github", pushBody, hdr)
		if status != http.StatusAccepted || out["event_id"] != "d-1" || out["duplicate"] != wantDup {
			t.Fatalf("delivery %d: %d %v, want 202 d-1 duplicate=%t", i+1, status, out, wantDup)
		}
	}
	if len(b.got.events) != 2 || b.got.events[0].ID != b.got.events[1].ID {
		t.Fatalf("accept saw %v, want the same id twice", b.got.events)
	}
}

func stripeDelivery(at time.Time, body string) http.Header {
	return header(StripeHeader, stripeHeader(at.Unix(), body, stripeSecret))
}

const chargeBody = `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"charge.succeeded","data":{"object":{"customer":"cus_9s6XKzkNRiz8i3"}}}`

// Stripe sends no delivery id header: the event's id is in the body.
func TestStripeDeliveryTakesItsIDFromTheBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out, _ := b.post(t, "stripe", chargeBody, stripeDelivery(b.clock.Now(), chargeBody))
	if status != http.StatusAccepted || out["event_id"] != "evt_1NG8Du2eZvKYlo2CUI79vXWy" {
		t.Fatalf("%d %v", status, out)
	}
	if ev := b.got.events[0]; ev.Name != "stripe.event" || ev.Key != "cus_9s6XKzkNRiz8i3" || b.got.owners[0] != "billing" {
		t.Fatalf("accepted %+v for %s", ev, b.got.owners[0])
	}
}

func TestStripeToleranceOnTheClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	signedAt := b.clock.Now()
	b.clock.Advance(DefaultTolerance + time.Second)
	status, out, _ := b.post(t, "stripe", chargeBody, stripeDelivery(signedAt, chargeBody))
	if status != http.StatusUnauthorized || !strings.Contains(fmt.Sprint(out["message"]), "tolerance") {
		t.Fatalf("a delivery signed %s ago: %d %v, want 401 naming the tolerance", DefaultTolerance+time.Second, status, out)
	}
	status, _, _ = b.post(t, "stripe", chargeBody, stripeDelivery(b.clock.Now().Add(DefaultTolerance+time.Second), chargeBody))
	if status != http.StatusUnauthorized {
		t.Fatalf("a delivery signed in the future: %d, want 401", status)
	}
	if b.got.count() != 0 {
		t.Fatalf("accepted %v", b.got.events)
	}
}

// Every refusal says why in the API's error shape and accepts nothing.
func TestRefusals(t *testing.T) {
	t.Parallel()
	signed := func(body string, extra ...string) http.Header {
		h := githubDelivery(body, "d-1")
		for i := 0; i < len(extra); i += 2 {
			if extra[i+1] == "" {
				h.Del(extra[i])
			} else {
				h.Set(extra[i], extra[i+1])
			}
		}
		return h
	}
	big := `{"x":"` + strings.Repeat("a", MinBody) + `"}`
	tests := []struct {
		name, hook, body string
		hdr              http.Header
		status           int
		code, says       string
	}{
		{"unknown hook", "gitlab", pushBody, signed(pushBody), 404, apitypes.CodeNotFound, `no hook "gitlab"`},
		{"bad signature", "github", pushBody, signed(pushBody, GitHubHeader, "sha256="+sign("guess", pushBody)), 401, apitypes.CodeIdentity, "does not match"},
		{"tampered body", "github", pushBody, signed(strings.Replace(pushBody, "main", "evil", 1)), 401, apitypes.CodeIdentity, "does not match"},
		{"no signature", "github", pushBody, signed(pushBody, GitHubHeader, ""), 401, apitypes.CodeIdentity, "no X-Hub-Signature-256 header"},
		{"malformed signature", "github", pushBody, signed(pushBody, GitHubHeader, "sha1=00"), 401, apitypes.CodeIdentity, "sha256=<hex>"},
		{"over max_body", "generic", big, header("X-Acme-Signature", sign("generic-secret", big), "X-Acme-Delivery", "1"), 413, apitypes.CodeTooLarge, "max_body of 1024 bytes"},
		{"not JSON", "github", "ref=main", signed("ref=main"), 400, apitypes.CodeBadRequest, "not JSON"},
		{"a form", "github", "payload=%7B%7D", signed("payload=%7B%7D", "Content-Type", "application/x-www-form-urlencoded"), 400, apitypes.CodeBadRequest, "set its content type to application/json"},
		{"no delivery id", "github", pushBody, signed(pushBody, "X-GitHub-Delivery", ""), 400, apitypes.CodeBadRequest, "no X-GitHub-Delivery header"},
		{"delivery id not printable", "github", pushBody, signed(pushBody, "X-GitHub-Delivery", "d\x7f1"), 400, apitypes.CodeBadRequest, "control character"},
		{"no event header", "github", pushBody, signed(pushBody, "X-GitHub-Event", ""), 400, apitypes.CodeBadRequest, "no X-GitHub-Event header"},
		{"bad event header", "github", pushBody, signed(pushBody, "X-GitHub-Event", "push event"), 400, apitypes.CodeBadRequest, "event name"},
		{"key is an object", "github", `{"repository":{"full_name":{}}}`, signed(`{"repository":{"full_name":{}}}`), 400, apitypes.CodeBadRequest, "an object, not a string or number"},
		{"key too long", "github", `{"repository":{"full_name":"` + strings.Repeat("k", MaxKeyBytes+1) + `"}}`,
			signed(`{"repository":{"full_name":"` + strings.Repeat("k", MaxKeyBytes+1) + `"}}`), 400, apitypes.CodeBadRequest, "at most 256 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			status, out, _ := b.post(t, tt.hook, tt.body, tt.hdr)
			if status != tt.status || out["code"] != tt.code || !strings.Contains(fmt.Sprint(out["message"]), tt.says) {
				t.Fatalf("got %d %v, want %d %s saying %q", status, out, tt.status, tt.code, tt.says)
			}
			if b.got.count() != 0 {
				t.Fatalf("accepted %v", b.got.events)
			}
		})
	}
}

func TestStripeIDMissingFromBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"type":"charge.succeeded"}`
	status, out, _ := b.post(t, "stripe", body, stripeDelivery(b.clock.Now(), body))
	if status != 400 || !strings.Contains(fmt.Sprint(out["message"]), "no delivery id at id_key /id") {
		t.Fatalf("%d %v", status, out)
	}
}

// A body without the key's field is an event without a key (one hook
// takes every kind of delivery its provider sends); a number is a key as
// it is written.
func TestKeyAbsentOrNumber(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for body, want := range map[string]string{
		`{"zen":"Keep it logically awesome.","hook_id":1}`: "",
		`{"repository":{"full_name":12.50}}`:               "12.50",
		`{"repository":{"full_name":null}}`:                "",
	} {
		if status, out, _ := b.post(t, "github", body, githubDelivery(body, body)); status != 202 {
			t.Fatalf("%s: %d %v", body, status, out)
		}
		if got := b.got.events[len(b.got.events)-1].Key; got != want {
			t.Errorf("%s: key %q, want %q", body, got, want)
		}
	}
}

func TestMethodAndBodyBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := httptest.NewRecorder()
	b.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/hooks/github", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" || !strings.Contains(rec.Body.String(), apitypes.CodeMethod) {
		t.Fatalf("GET: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	// A body of unknown length over the bound is cut where it passes it:
	// the reader is never read to its end.
	endless := &countingReader{}
	req := httptest.NewRequest(http.MethodPost, "/v1/hooks/github", endless)
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	b.mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || endless.n > MaxBody+1 || rec.Header().Get("Connection") != "close" {
		t.Fatalf("endless body: %d after reading %d bytes, Connection %q", rec.Code, endless.n, rec.Header().Get("Connection"))
	}
	if b.got.count() != 0 {
		t.Fatal("accepted an over-long body")
	}
}

// countingReader is an endless body of 'a's that counts what was read.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	c.n += len(p)
	return len(p), nil
}

var _ io.Reader = (*countingReader)(nil)

type statusErr struct {
	status int
	err    error
}

func (e *statusErr) Error() string   { return e.err.Error() }
func (e *statusErr) Unwrap() error   { return e.err }
func (e *statusErr) HTTPStatus() int { return e.status }

func TestAcceptErrors(t *testing.T) {
	t.Parallel()
	quota := &engine.Error{Code: engine.CodeOwnerQuota, Class: engine.ClassProtocol, Message: "owner acme has 100 runs queued", RetryAfter: 1500 * time.Millisecond}
	tests := []struct {
		name       string
		err        error
		status     int
		code, says string
		retryAfter string
	}{
		{"status and engine error", &statusErr{429, quota}, 429, engine.CodeOwnerQuota, "100 runs queued", "2"},
		{"status alone", &statusErr{503, errors.New("the daemon is draining")}, 503, apitypes.CodeInternal, "draining", ""},
		{"no status", fmt.Errorf("badger: key /owners/acme/events/d-1: %w", io.ErrUnexpectedEOF), 500, apitypes.CodeInternal, "could not be accepted", ""},
		{"status out of range", &statusErr{200, errors.New("secret detail")}, 500, apitypes.CodeInternal, "could not be accepted", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.got.err = tt.err
			status, out, hdr := b.post(t, "github", pushBody, githubDelivery(pushBody, "d-1"))
			msg := fmt.Sprint(out["message"])
			if status != tt.status || out["code"] != tt.code || !strings.Contains(msg, tt.says) || hdr.Get("Retry-After") != tt.retryAfter {
				t.Fatalf("got %d %v Retry-After %q, want %d %s saying %q, Retry-After %q", status, out, hdr.Get("Retry-After"), tt.status, tt.code, tt.says, tt.retryAfter)
			}
			if status == 500 && (strings.Contains(msg, "badger") || strings.Contains(msg, "secret")) {
				t.Fatalf("a 500 leaks the error: %q", msg)
			}
		})
	}
}

// A reload's hooks replace the ones in force at once (a rotated secret
// signs from then on); a set that fails its checks changes nothing.
func TestSetHooks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rotated := testHooks()
	rotated[0].Secret = []byte("gh-rotated-secret")
	if err := b.handler.SetHooks(rotated); err != nil {
		t.Fatal(err)
	}
	rotated[0].Secret[0] = 'X' // the handler keeps its own copy
	if status, _, _ := b.post(t, "github", pushBody, githubDelivery(pushBody, "d-1")); status != 401 {
		t.Fatalf("the old secret after a rotation: %d, want 401", status)
	}
	hdr := githubDelivery(pushBody, "d-2")
	hdr.Set(GitHubHeader, "sha256="+sign("gh-rotated-secret", pushBody))
	if status, out, _ := b.post(t, "github", pushBody, hdr); status != 202 {
		t.Fatalf("the new secret: %d %v", status, out)
	}

	for name, bad := range map[string][]Hook{
		"twice":        append(testHooks(), testHooks()[0]),
		"no secret":    {{Name: "x", Scheme: GitHub, Event: "x", IDHeader: "X-Id"}},
		"unknown kind": {{Name: "x", Secret: []byte("s"), Scheme: "gitlab", Event: "x", IDHeader: "X-Id"}},
	} {
		if err := b.handler.SetHooks(bad); err == nil {
			t.Errorf("%s: SetHooks took it", name)
		}
	}
	if status, _, _ := b.post(t, "github", pushBody, hdr); status != 202 {
		t.Fatalf("after refused sets the rotated hook is gone: %d", status)
	}
	if _, err := NewHandler(nil, nil, Options{}); err == nil {
		t.Fatal("a handler without Accept")
	}
}

// Whatever body a provider (or anyone holding its secret) signs, making
// its event neither panics nor changes the payload: an event is the body
// as it came, or a refusal.
func FuzzHookEvent(f *testing.F) {
	f.Add([]byte(pushBody), "push")
	f.Add([]byte(`{"repository":{"full_name":["x"]}}`), "ping")
	f.Add([]byte(`[1,2,{"repository":null}]`), "a b")
	f.Add([]byte("\xff{"), "")
	hk := testHooks()[0]
	f.Fuzz(func(t *testing.T, body []byte, kind string) {
		ev, err := hk.event(header("X-GitHub-Delivery", "d-1", "X-GitHub-Event", kind), body)
		if err != nil {
			return
		}
		if string(ev.Payload) != string(body) || !json.Valid(ev.Payload) || ev.ID != "d-1" || !strings.HasPrefix(ev.Name, "github.") {
			t.Fatalf("event %+v of body %q", ev, body)
		}
	})
}
