package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// Every refusal of a malformed request: its status, its stable code, and
// that nothing was written to the store.
func TestRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	runID := b.start(t, local, "echo", `{"x":1}`, "r1")
	b.waitPhase(t, b.me, runID, store.Phase.Terminal)
	b.st.takeWrites()

	big := func(n int) string { return `{"flow":"echo","input":"` + strings.Repeat("x", n) + `"}` }
	tests := []struct {
		name         string
		as           caller
		method, path string
		body         any
		status       int
		code         string
		msg          string // a substring of the message
	}{
		{"unknown version", local, "GET", "/v2/runs", nil, 404, CodeAPIVersion, "this daemon speaks /v1/"},
		{"no version", local, "GET", "/runs", nil, 404, CodeAPIVersion, ""},
		{"unknown endpoint", local, "GET", "/v1/nothing", nil, 404, CodeNoRoute, "no endpoint GET /v1/nothing"},
		{"wrong method on runs", local, "DELETE", "/v1/runs", nil, 405, CodeMethod, "allowed: GET, POST"},
		{"wrong method on a run", local, "POST", "/v1/runs/" + runID, nil, 405, CodeMethod, "allowed: GET"},
		{"wrong method on cancel", local, "GET", "/v1/runs/" + runID + "/cancel", nil, 405, CodeMethod, "allowed: POST"},
		{"wrong method on reload", local, "GET", "/v1/admin/reload", nil, 405, CodeMethod, "allowed: POST"},
		{"wrong method on health", local, "PUT", "/v1/health", nil, 405, CodeMethod, ""},
		{"start: empty body", local, "POST", "/v1/runs", "", 400, engine.CodeBadRequest, "malformed request body"},
		{"start: not JSON", local, "POST", "/v1/runs", "flow=echo", 400, engine.CodeBadRequest, "malformed request body"},
		{"start: unknown field", local, "POST", "/v1/runs", `{"flow":"echo","owner":"bob"}`, 400, engine.CodeBadRequest, `unknown field "owner"`},
		{"start: trailing data", local, "POST", "/v1/runs", `{"flow":"echo"} {"flow":"echo"}`, 400, engine.CodeBadRequest, "data after the JSON value"},
		{"start: trailing bracket", local, "POST", "/v1/runs", `{"flow":"echo"}}`, 400, engine.CodeBadRequest, "data after the JSON value"},
		{"start: trailing form feed", local, "POST", "/v1/runs", "{\"flow\":\"echo\"}\f", 400, engine.CodeBadRequest, "data after the JSON value"},
		{"start: wrong type", local, "POST", "/v1/runs", `{"flow":7}`, 400, engine.CodeBadRequest, "malformed request body"},
		{"start: missing flow", local, "POST", "/v1/runs", `{"input":{"x":1}}`, 400, engine.CodeBadRequest, "flow is required"},
		{"start: unknown flow", local, "POST", "/v1/runs", `{"flow":"nope"}`, 404, engine.CodeUnknownFlow, `no flow named "nope" is registered`},
		{"start: misspelt flow", local, "POST", "/v1/runs", `{"flow":"ech"}`, 404, engine.CodeUnknownFlow, `no flow named "ech" is registered (did you mean "echo"?)`},
		{"start: oversized", local, "POST", "/v1/runs", big(MaxStartBody), 413, CodeTooLarge, "limit of 262144 bytes"},
		{"start: dedup conflict", local, "POST", "/v1/runs", `{"flow":"echo","input":{"x":2},"request_id":"r1"}`, 409, engine.CodeDedupConflict, "different input"},
		{"start: dedup conflict, another flow", local, "POST", "/v1/runs", `{"flow":"sleep","input":{"x":1},"request_id":"r1"}`, 409, engine.CodeDedupConflict, "run " + runID + ` of flow "echo", not flow "sleep"`},
		{"start: dedup conflict, unknown flow", local, "POST", "/v1/runs", `{"flow":"no_such_flow","input":{"x":1},"request_id":"r1"}`, 409, engine.CodeDedupConflict, "run " + runID + ` of flow "echo", not flow "no_such_flow"`},
		{"start: query parameter", local, "POST", "/v1/runs?owner=bob", `{"flow":"echo"}`, 400, engine.CodeBadRequest, `unknown query parameter "owner" (this endpoint takes none)`},
		{"register: oversized", local, "POST", "/v1/flows", `{"files":[{"path":"a.star","src":"` + strings.Repeat("#", MaxRegisterBody) + `"}]}`, 413, CodeTooLarge, "limit of 8388608 bytes"},
		{"register: no files", local, "POST", "/v1/flows", `{"files":[]}`, 400, engine.CodeBadRequest, "no files"},
		{"register: unknown field", local, "POST", "/v1/flows", `{"files":[{"path":"a.star","src":"","mode":1}]}`, 400, engine.CodeBadRequest, `unknown field "mode"`},
		{"cancel: body", local, "POST", "/v1/runs/" + runID + "/cancel", `{"force":true}`, 400, engine.CodeBadRequest, "takes no body"},
		{"cancel: oversized body", local, "POST", "/v1/runs/" + runID + "/cancel", strings.Repeat(" ", MaxSmallBody+1), 413, CodeTooLarge, ""},
		{"cancel: unknown run", local, "POST", "/v1/runs/run_nope/cancel", nil, 404, engine.CodeNotFound, "no run run_nope"},
		{"get: unknown run", local, "GET", "/v1/runs/run_nope", nil, 404, engine.CodeNotFound, "no run run_nope"},
		{"list: negative limit", local, "GET", "/v1/runs?limit=-1", nil, 400, engine.CodeBadRequest, "limit must be a whole number from 1 to 1000"},
		{"list: zero limit", local, "GET", "/v1/runs?limit=0", nil, 400, engine.CodeBadRequest, "limit"},
		{"list: huge limit", local, "GET", "/v1/runs?limit=1000000", nil, 400, engine.CodeBadRequest, "limit"},
		{"list: word limit", local, "GET", "/v1/runs?limit=ten", nil, 400, engine.CodeBadRequest, `got "ten"`},
		{"list: repeated limit", local, "GET", "/v1/runs?limit=1&limit=2", nil, 400, engine.CodeBadRequest, "repeated"},
		{"list: misspelt parameter", local, "GET", "/v1/runs?limt=1", nil, 400, engine.CodeBadRequest, `unknown query parameter "limt" (this endpoint takes limit, phase, after, flow, parent, order, before, request_id)`},
		{"list: control character in parent", local, "GET", "/v1/runs?parent=run_%01", nil, 400, engine.CodeBadRequest, "parent holds the control character U+0001"},
		{"list: long parent", local, "GET", "/v1/runs?parent=" + strings.Repeat("r", engine.MaxIDBytes+1), nil, 400, engine.CodeBadRequest, fmt.Sprintf("parent of %d bytes", engine.MaxIDBytes+1)},
		{"stream: control character in parent", local, "GET", "/v1/runs/stream?parent=run_%01", nil, 400, engine.CodeBadRequest, "parent holds the control character U+0001"},
		{"list: bad phase", local, "GET", "/v1/runs?phase=done", nil, 400, engine.CodeBadRequest, `phase "done" is not a phase`},
		{"list: malformed query", local, "GET", "/v1/runs?limit=%zz", nil, 400, engine.CodeBadRequest, "malformed query"},
		{"events: bad after", local, "GET", "/v1/runs/" + runID + "/events?after=last", nil, 400, engine.CodeBadRequest, "after must be a sequence number"},
		{"events: negative after", local, "GET", "/v1/runs/" + runID + "/events?after=-1", nil, 400, engine.CodeBadRequest, "after must be a sequence number"},
		{"events: bad limit", local, "GET", "/v1/runs/" + runID + "/events?limit=0", nil, 400, engine.CodeBadRequest, "limit must be a whole number from 1 to 10000"},
		{"deadletters: bad limit", local, "GET", "/v1/deadletters?limit=x", nil, 400, engine.CodeBadRequest, "limit"},
		{"stats: parameter", local, "GET", "/v1/stats?type=x", nil, 400, engine.CodeBadRequest, "unknown query parameter"},
		{"list: a body", local, "GET", "/v1/runs", `{"limit":1}`, 400, engine.CodeBadRequest, "GET takes no body"},
		{"get: 5 KiB of body", local, "GET", "/v1/runs/" + runID, strings.Repeat("x", 5<<10), 400, engine.CodeBadRequest, "GET takes no body"},
		{"wait: a body", alice, "GET", "/v1/runs/" + runID + "/wait?timeout=0s", "{}", 400, engine.CodeBadRequest, "GET takes no body"},
		{"health: white space", local, "GET", "/v1/health", " ", 400, engine.CodeBadRequest, "GET takes no body"},
		{"openapi: a body", local, "GET", "/v1/openapi.json", "{}", 400, engine.CodeBadRequest, "GET takes no body"},
		{"tcp: no token", caller{name: "anon"}, "GET", "/v1/runs", nil, 401, CodeIdentity, "Authorization: Bearer TOKEN"},
		{"tcp: unknown token", caller{name: "mallory", token: "mallory-token-0123456"}, "GET", "/v1/runs", nil, 401, CodeIdentity, "unknown bearer token"},
		{"tcp: no token, unknown version", caller{name: "anon"}, "GET", "/v9/x", nil, 401, CodeIdentity, ""},
		{"tcp: no token, start", caller{name: "anon"}, "POST", "/v1/runs", `{"flow":"echo"}`, 401, CodeIdentity, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := b.send(t, tt.as, tt.method, tt.path, tt.body)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.body)
			}
			e := a.errorBody(t)
			if e.Code != tt.code || e.Class != engine.ClassProtocol {
				t.Errorf("code %s class %s, want %s protocol: %s", e.Code, e.Class, tt.code, e.Message)
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q does not contain %q", e.Message, tt.msg)
			}
			if tt.status == 405 && a.header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			if tt.status == 401 && a.header.Get("WWW-Authenticate") != `Bearer realm="weir"` {
				t.Errorf("401 with WWW-Authenticate %q", a.header.Get("WWW-Authenticate"))
			}
		})
	}
	// Refused requests change nothing. The one write is the audit event of
	// the cancel of a missing run, which the engine cannot tell from
	// another owner's run.
	if w := b.st.takeWrites(); !slices.Equal(w, []string{"EventAppend " + engine.AuditStream}) {
		t.Errorf("refused requests wrote to the store: %q", w)
	}
	var runs []*store.Run
	_ = b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		runs, err = tx.RunList(store.RunListParams{})
		return err
	})
	if len(runs) != 1 {
		t.Errorf("%d runs in the store, want the one started", len(runs))
	}
}

// blockingBody is a request body that never ends until released: a
// server that reads it cannot answer.
type blockingBody struct {
	once    sync.Once
	release chan struct{}
	read    chan struct{}
}

func newBlockingBody() *blockingBody {
	return &blockingBody{release: make(chan struct{}), read: make(chan struct{})}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.read) })
	<-b.release
	return 0, io.ErrUnexpectedEOF
}

// An unknown version, a wrong method, an unknown path and a missing token
// are refused before the body is read: the server answers while the body
// is still being sent.
func TestRefusedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	tests := []struct {
		name   string
		as     caller
		method string
		path   string
		status int
	}{
		{"unknown version", local, "POST", "/v2/runs", 404},
		{"wrong method", local, "PUT", "/v1/runs", 405},
		{"unknown path", local, "POST", "/v1/runs/x/y/z", 404},
		{"no token", caller{name: "anon"}, "POST", "/v1/runs", 401},
		{"unknown query parameter", local, "POST", "/v1/runs?x=1", 400},
		{"a body on a GET", local, "GET", "/v1/runs", 400},
		{"a body on a held GET", local, "GET", "/v1/runs/run_nope?wait=30s", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := newBlockingBody()
			done := make(chan answer, 1)
			go func() { done <- b.send(t, tt.as, tt.method, tt.path, io.Reader(body)) }()
			select {
			case a := <-done:
				close(body.release)
				if a.status != tt.status {
					t.Errorf("status %d, want %d: %s", a.status, tt.status, a.body)
				}
			case <-time.After(10 * time.Second):
				close(body.release)
				t.Fatal("no answer while the body was still open: the server waited for it")
			}
		})
	}
}

// The bearer token is consulted on TCP only; on the Unix socket the kernel
// says who the caller is and an Authorization header changes nothing.
func TestIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	status := func(c caller, hdr ...string) apitypes.Status {
		t.Helper()
		a := b.send(t, c, "GET", "/v1/health", nil, hdr...)
		if a.status != 200 {
			t.Fatalf("health as %s: %d %s", c.name, a.status, a.body)
		}
		var s apitypes.Status
		if err := json.Unmarshal(a.body, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := status(local); s.Caller == nil || s.Caller.Owner != b.me || !s.Caller.Local {
		t.Errorf("local caller %+v, want %s on the socket", s.Caller, b.me)
	}
	if s := status(local, "Authorization", "Bearer "+aliceToken); s.Caller.Owner != b.me {
		t.Errorf("a token on the socket made the caller %q", s.Caller.Owner)
	}
	if s := status(alice); s.Caller.Owner != "alice" || s.Caller.Local {
		t.Errorf("alice's token gave %+v", s.Caller)
	}
	if s := status(caller{name: "bob", token: bobToken}, "Authorization", "bearer "+bobToken); s.Caller.Owner != "bob" {
		t.Errorf("the scheme is case-insensitive: %+v", s.Caller)
	}
	for _, h := range []string{"Basic " + aliceToken, aliceToken, "Bearer", "Bearer " + aliceToken + "x"} {
		a := b.send(t, caller{name: "raw"}, "GET", "/v1/health", nil, "Authorization", h)
		if a.status != 401 {
			t.Errorf("Authorization %q: %d, want 401", h, a.status)
		}
		a.errorBody(t)
	}
	// A reload swaps the tokens: the old one is refused, the new one works.
	b.srv.SetTokens(NewTokens(map[string]string{"carol-token-0123456789": "carol"}))
	if a := b.send(t, alice, "GET", "/v1/health", nil); a.status != 401 {
		t.Errorf("alice's revoked token: %d", a.status)
	}
	if s := status(caller{name: "carol", token: "carol-token-0123456789"}); s.Caller.Owner != "carol" {
		t.Errorf("carol's new token gave %+v", s.Caller)
	}
}

// fakeDaemon stands in for the process hosting the server, which the
// daemon's own tests (cmd/weir) exercise for real.
type fakeDaemon struct {
	mu      sync.Mutex
	reloads int
	rescans int
	err     error
	info    apitypes.ConfigInfo
	st      store.Store
}

func (d *fakeDaemon) Audit(ctx context.Context, after uint64, limit int) ([]*store.Event, error) {
	var evs []*store.Event
	err := d.st.View(ctx, func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: engine.AuditStream, AfterSeq: after, Limit: limit})
		return err
	})
	return evs, err
}

func (d *fakeDaemon) Reload(ctx context.Context) (*apitypes.ReloadResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reloads++
	if d.err != nil {
		return nil, d.err
	}
	prev := d.info.Version
	d.info.Version++
	return &apitypes.ReloadResult{Changed: true, Previous: prev, Config: d.info}, nil
}

func (d *fakeDaemon) RescanPlugins(ctx context.Context) (*apitypes.PluginRescan, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rescans++
	return &apitypes.PluginRescan{Added: []string{"mail"}, Upgraded: []string{}, Removed: []string{}, Unavailable: []apitypes.PluginProblem{}, Tools: 1}, nil
}

func (d *fakeDaemon) ServersDown() []apitypes.ServerDown { return nil }

func (d *fakeDaemon) ConfigInfo() apitypes.ConfigInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

func TestAdminReload(t *testing.T) {
	t.Parallel()
	d := &fakeDaemon{info: apitypes.ConfigInfo{Version: 4, File: "/etc/weir.hcl"}}
	// Alice's token maps to an owner named like the daemon's OS user: a
	// name in the config is still not the OS identity.
	b := setup(t, engine.Config{}, WithDaemon(d))
	d.st = b.st
	b.srv.SetTokens(NewTokens(map[string]string{aliceToken: b.me, bobToken: "bob"}))

	a := b.send(t, local, "POST", "/v1/admin/reload", nil)
	if a.status != 200 {
		t.Fatalf("reload as the daemon's user: %d %s", a.status, a.body)
	}
	var res apitypes.ReloadResult
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Previous != 4 || res.Config.Version != 5 {
		t.Errorf("reload answer %+v", res)
	}
	a = b.send(t, alice, "POST", "/v1/admin/reload", nil)
	if a.status != 403 || a.errorBody(t).Code != CodeForbidden {
		t.Errorf("reload over TCP as %q: %d %s", b.me, a.status, a.body)
	}
	if a := b.send(t, local, "POST", "/v1/admin/reload", `{"file":"/tmp/x"}`); a.status != 400 {
		t.Errorf("reload with a body: %d %s", a.status, a.body)
	}

	d.mu.Lock()
	d.err = &engine.Error{Code: CodeConfig, Class: engine.ClassProtocol, Message: "invalid config: weir.hcl:3: workers must be at least 1, got 0"}
	d.mu.Unlock()
	a = b.send(t, local, "POST", "/v1/admin/reload", nil)
	if e := a.errorBody(t); a.status != 422 || e.Code != CodeConfig || !strings.Contains(e.Message, "weir.hcl:3") {
		t.Errorf("invalid candidate: %d %+v", a.status, e)
	}
	// The status shows the config in force, still version 5.
	var s apitypes.Status
	if err := json.Unmarshal(b.send(t, local, "GET", "/v1/health", nil).body, &s); err != nil {
		t.Fatal(err)
	}
	if s.Config == nil || s.Config.Version != 5 || s.Config.File != "/etc/weir.hcl" {
		t.Errorf("status config %+v", s.Config)
	}
	d.mu.Lock()
	if d.reloads != 2 {
		t.Errorf("%d reloads reached the daemon, want 2 (the refused callers must not reach it)", d.reloads)
	}
	d.mu.Unlock()

	// The audit stream: bob's foreign read shows there, to the daemon's
	// user only.
	run := b.start(t, local, "echo", `{}`, "")
	if a := b.send(t, bob, "GET", "/v1/runs/"+run, nil); a.status != 404 {
		t.Fatalf("bob's foreign read: %d", a.status)
	}
	a = b.send(t, local, "GET", "/v1/admin/audit?limit=10", nil)
	var evs []*store.Event
	if err := json.Unmarshal(a.body, &evs); a.status != 200 || err != nil || len(evs) != 1 ||
		evs[0].Detail["caller"] != "bob" || evs[0].Detail["run"] != run || evs[0].Detail["action"] != "get" {
		t.Errorf("audit: %d %s", a.status, a.body)
	}
	if a := b.send(t, local, "GET", "/v1/admin/audit?after="+fmt.Sprint(evs[0].Seq), nil); a.status != 200 || string(a.body) != "[]\n" {
		t.Errorf("audit after the last event: %d %s", a.status, a.body)
	}
	if a := b.send(t, alice, "GET", "/v1/admin/audit", nil); a.status != 403 {
		t.Errorf("audit over TCP: %d %s", a.status, a.body)
	}
	if a := b.send(t, local, "GET", "/v1/admin/audit?limit=0", nil); a.status != 400 {
		t.Errorf("audit with limit 0: %d %s", a.status, a.body)
	}

	// The plugin rescan: the daemon's user only, no body.
	a = b.send(t, local, "POST", "/v1/admin/plugins/rescan", nil)
	var rs apitypes.PluginRescan
	if err := json.Unmarshal(a.body, &rs); a.status != 200 || err != nil || len(rs.Added) != 1 || rs.Tools != 1 {
		t.Errorf("rescan: %d %s", a.status, a.body)
	}
	if a := b.send(t, alice, "POST", "/v1/admin/plugins/rescan", nil); a.status != 403 {
		t.Errorf("rescan over TCP: %d %s", a.status, a.body)
	}
	if a := b.send(t, local, "POST", "/v1/admin/plugins/rescan", `{}`); a.status != 400 {
		t.Errorf("rescan with a body: %d %s", a.status, a.body)
	}
	d.mu.Lock()
	if d.rescans != 1 {
		t.Errorf("%d rescans reached the daemon, want 1", d.rescans)
	}
	d.mu.Unlock()

	// Another admin uid: the local caller is refused too.
	b2 := setup(t, engine.Config{}, WithDaemon(d), WithAdminUID(424242))
	if a := b2.send(t, local, "POST", "/v1/admin/reload", nil); a.status != 403 || !strings.Contains(a.errorBody(t).Message, "uid 424242") {
		t.Errorf("reload as another uid: %d %s", a.status, a.body)
	}
}

// A storage failure answers 503, closes admission, and shows in the health
// endpoint until an operator acts: repairing the disk does not reopen it.
func TestStorageFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	if a := b.send(t, local, "GET", "/v1/health", nil); a.status != 200 {
		t.Fatalf("health before: %d %s", a.status, a.body)
	}
	b.st.breakWith(errors.New("write /data/000001.vlog: no space left on device"))
	a := b.send(t, local, "POST", "/v1/runs", `{"flow":"echo"}`)
	e := a.errorBody(t)
	if a.status != 503 || e.Code != engine.CodeStorage || e.Class != engine.ClassStorage {
		t.Fatalf("start on a broken store: %d %+v", a.status, e)
	}
	b.st.breakWith(nil)
	for i := 0; i < 2; i++ {
		a = b.send(t, local, "GET", "/v1/health", nil)
		var s apitypes.Status
		if err := json.Unmarshal(a.body, &s); err != nil {
			t.Fatal(err)
		}
		// The reason is a fixed text naming the incident: the store's own
		// words (which can quote keys: owners, request ids) stay in the
		// daemon log.
		if a.status != 503 || s.Admission != engine.CodeStorage || !strings.Contains(s.Reason, "incident inc_") || strings.Contains(s.Reason, "no space left") {
			t.Errorf("health after the failure: %d %+v", a.status, s)
		}
		a = b.send(t, alice, "POST", "/v1/runs", `{"flow":"echo"}`)
		if e := a.errorBody(t); a.status != 503 || e.Code != engine.CodeStorage {
			t.Errorf("start after the failure: %d %+v", a.status, e)
		}
	}
}

// A draining daemon refuses starts with E_DRAINING (503) and its health
// says so, with the queued and held counts.
func TestDraining(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	a := b.send(t, local, "POST", "/v1/runs", `{"flow":"echo"}`)
	if e := a.errorBody(t); a.status != 503 || e.Code != engine.CodeDraining {
		t.Errorf("start while draining: %d %+v", a.status, e)
	}
	var s apitypes.Status
	a = b.send(t, local, "GET", "/v1/health", nil)
	if err := json.Unmarshal(a.body, &s); err != nil {
		t.Fatal(err)
	}
	if a.status != 503 || s.Admission != engine.CodeDraining || s.Slots != 64 {
		t.Errorf("health while draining: %d %+v", a.status, s)
	}
}

func TestMethodNotAllowedIsJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	a := b.send(t, local, "PATCH", "/v1/flows", nil)
	if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET, POST" {
		t.Errorf("PATCH /v1/flows: %d Allow %q", a.status, a.header.Get("Allow"))
	}
	a.errorBody(t)
}
