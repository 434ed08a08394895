package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// A start over the caller's own quota is 429 E_OWNER_QUOTA with a
// Retry-After, naming the owner's quota; another owner still starts.
func TestOwnerQuotaIs429WithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{LeaseTimeout: 10 * time.Minute, Owners: map[string]engine.OwnerShare{"alice": {MaxRunning: 1}}})
	running := b.start(t, alice, "sleep", `{"ms":60000}`, "")
	b.waitPhase(t, "alice", running, func(p store.Phase) bool { return p == store.PhaseRunning })

	a := b.send(t, alice, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":2}`)})
	e := a.errorBody(t)
	if a.status != http.StatusTooManyRequests || e.Code != apitypes.CodeOwnerQuota {
		t.Fatalf("a start over max_running: %d %s", a.status, a.body)
	}
	if got, want := a.header.Get("Retry-After"), strconv.Itoa(int(engine.OwnerQuotaRetryAfter/time.Second)); got != want {
		t.Errorf("Retry-After %q, want %q", got, want)
	}
	if a := b.send(t, bob, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":3}`)}); a.status != http.StatusCreated {
		t.Errorf("bob's start: %d %s", a.status, a.body)
	}
	if a := b.send(t, alice, "POST", "/v1/runs/"+running+"/cancel", nil); a.status != http.StatusOK {
		t.Errorf("cancel: %d %s", a.status, a.body)
	}
}

// Retry-After is whole seconds, rounded up, never 0.
func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", time.Hour: "3600"} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%s) = %s, want %s", d, got, want)
		}
	}
}

// GET /v1/stats/owners shows every owner to the daemon's own OS user on
// the socket, and only the caller's own to a token user.
func TestStatsOwnersVisibility(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{LeaseTimeout: 10 * time.Minute, Owners: map[string]engine.OwnerShare{"carol": {Weight: 2}}})
	running := b.start(t, alice, "sleep", `{"ms":60000}`, "")
	b.waitPhase(t, "alice", running, func(p store.Phase) bool { return p == store.PhaseRunning })
	defer b.send(t, alice, "POST", "/v1/runs/"+running+"/cancel", nil)
	read := func(c caller) apitypes.OwnerStatsList {
		t.Helper()
		a := b.send(t, c, "GET", "/v1/stats/owners", nil)
		var l apitypes.OwnerStatsList
		if err := json.Unmarshal(a.body, &l); err != nil || a.status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.name, a.status, a.body)
		}
		return l
	}
	names := func(l apitypes.OwnerStatsList) map[string]bool {
		m := map[string]bool{}
		for _, o := range l.Owners {
			m[o.Owner] = true
		}
		return m
	}
	if l := read(alice); l.All || len(l.Owners) != 1 || l.Owners[0].Owner != "alice" || l.Owners[0].Running != 1 {
		t.Errorf("alice sees %+v, want only her own", l)
	}
	if l := read(bob); l.All || len(l.Owners) != 1 || l.Owners[0].Owner != "bob" || l.Owners[0].Running != 0 {
		t.Errorf("bob sees %+v, want only his own", l)
	}
	if l, n := read(local), names(read(local)); !l.All || !n["carol"] || !n["alice"] || n["bob"] {
		t.Errorf("the operator sees %+v, want every owner with work (alice) or a share of its own (carol), and nobody else", l)
	}
}
