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

// A start refused because the queue is full says when to send it again;
// other refusals say nothing of the kind.
func TestQueueFullSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	// One slot, held by a sleeping run; one queued run fills the queue.
	b := setup(t, engine.Config{Workers: 1, MaxQueued: 1, LeaseTimeout: 10 * time.Minute})
	running := b.start(t, alice, "sleep", `{"ms":60000}`, "")
	b.waitPhase(t, "alice", running, func(p store.Phase) bool { return p == store.PhaseRunning })
	queued := b.start(t, alice, "echo", `{"n":1}`, "q1")
	b.waitPhase(t, "alice", queued, func(p store.Phase) bool { return p == store.PhaseQueued })

	a := b.send(t, alice, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":2}`)})
	if e := a.errorBody(t); a.status != http.StatusTooManyRequests || e.Code != engine.CodeQueueFull {
		t.Fatalf("a start over max_queued: %d %s", a.status, a.body)
	}
	if got, want := a.header.Get("Retry-After"), strconv.Itoa(int(QueueFullRetryAfter/time.Second)); got != want || want == "0" {
		t.Errorf("Retry-After %q, want %q", got, want)
	}
	// A conflict is not cured by waiting.
	a = b.send(t, alice, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":3}`), RequestID: "q1"})
	if a.status != http.StatusConflict || a.header.Get("Retry-After") != "" {
		t.Errorf("a dedup conflict: %d with Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	// The sleeping run need not hold the engine's stop.
	if a := b.send(t, alice, "POST", "/v1/runs/"+running+"/cancel", nil); a.status != http.StatusOK {
		t.Errorf("cancel: %d %s", a.status, a.body)
	}
}

// A new run's 201 says where the run is, and that place answers it; a
// start answered with an existing run (200) creates nothing to point at.
func TestStartedRunHasALocation(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	for _, c := range []caller{local, alice} {
		a := b.send(t, c, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"x":1}`), RequestID: "loc-" + c.name})
		var res apitypes.StartResult
		if err := json.Unmarshal(a.body, &res); err != nil || a.status != http.StatusCreated {
			t.Fatalf("%s: start %d %s", c.name, a.status, a.body)
		}
		loc := a.header.Get("Location")
		if loc != "/v1/runs/"+res.RunID {
			t.Fatalf("%s: Location %q, want /v1/runs/%s", c.name, loc, res.RunID)
		}
		got := b.send(t, c, "GET", loc, nil)
		var run apitypes.Run
		if err := json.Unmarshal(got.body, &run); err != nil || got.status != http.StatusOK || run.ID != res.RunID {
			t.Errorf("%s: GET %s: %d %s", c.name, loc, got.status, got.body)
		}
		again := b.send(t, c, "POST", "/v1/runs", apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"x":1}`), RequestID: "loc-" + c.name})
		if again.status != http.StatusOK || again.header.Get("Location") != "" {
			t.Errorf("%s: the same start again: %d with Location %q", c.name, again.status, again.header.Get("Location"))
		}
	}
}
