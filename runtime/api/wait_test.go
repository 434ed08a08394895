package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

func (a answer) waitResult(t *testing.T) apitypes.RunWaitResult {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("wait answered %d %s", a.status, a.body)
	}
	var r apitypes.RunWaitResult
	if err := DecodeStrict(a.body, &r); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
	return r
}

// TestRunWaitUntilDecision: a script holds GET /v1/runs/{id}/wait until
// a decision is open (never a phase, which a fan-out or a child shares),
// sees the wait's id, kind and what the decider is shown, decides it by
// id, and holds again until the run ends; a second decision is
// E_ALREADY_DECIDED; conditions and timeouts that make no sense are
// refused.
func TestRunWaitUntilDecision(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	id := b.start(t, alice, "gate", `{}`, "")

	r := b.send(t, alice, "GET", "/v1/runs/"+id+"/wait?until=decision", nil).waitResult(t)
	if !r.Met || len(r.Decisions) != 1 {
		t.Fatalf("until=decision: %+v", r)
	}
	d := r.Decisions[0]
	if d.ID != "approve@1" || d.Kind != apitypes.WaitHuman || d.Node != "approve" || d.RunID != id || string(d.Shown) != `{"request":{"to":"ann"}}` || d.Since.IsZero() {
		t.Errorf("decision %+v", d)
	}
	if r := b.send(t, alice, "GET", "/v1/runs/"+id+"/wait?until=decision:approve@1", nil).waitResult(t); !r.Met {
		t.Errorf("until=decision:approve@1: %+v", r)
	}
	if r := b.send(t, alice, "GET", "/v1/runs/"+id+"/wait?until=decision:approve", nil).waitResult(t); !r.Met {
		t.Errorf("until=decision:approve (the node): %+v", r)
	}
	// A condition that cannot hold yet answers unmet at the timeout.
	if r := b.send(t, alice, "GET", "/v1/runs/"+id+"/wait?until=decision:other&timeout=1ms", nil).waitResult(t); r.Met || r.Run.Phase != apitypes.PhaseWaiting {
		t.Errorf("until=decision:other: %+v, want unmet with the run waiting", r)
	}
	var run apitypes.Run
	if err := json.Unmarshal(b.send(t, alice, "GET", "/v1/runs/"+id, nil).body, &run); err != nil {
		t.Fatal(err)
	}
	if len(run.Waits) != 1 || run.Waits[0].ID != "approve@1" {
		t.Errorf("the run shows waits %+v", run.Waits)
	}

	a := b.send(t, alice, "POST", "/v1/runs/"+id+"/waits/approve@1/approve", apitypes.DecideRequest{Payload: json.RawMessage(`{"yes":1}`)})
	var dr apitypes.DecideResponse
	if err := json.Unmarshal(a.body, &dr); a.status != http.StatusOK || err != nil || dr.Wait != "approve@1" || dr.Node != "approve" || dr.Kind != apitypes.WaitHuman {
		t.Fatalf("approve by id: %d %s", a.status, a.body)
	}
	if r := b.send(t, alice, "GET", "/v1/runs/"+id+"/wait?until=terminal", nil).waitResult(t); !r.Met || r.Run.Phase != apitypes.PhaseCompleted {
		t.Fatalf("until=terminal: %+v", r)
	}
	if r := b.send(t, alice, "GET", "/v1/runs/"+id+"/wait?until=decision", nil).waitResult(t); r.Met || r.Run.Phase != apitypes.PhaseCompleted {
		t.Errorf("until=decision on an ended run: %+v, want unmet and completed", r)
	}
	for _, target := range []string{"approve", "approve@1"} {
		a := b.send(t, alice, "POST", "/v1/runs/"+id+"/waits/"+target+"/reject", apitypes.DecideRequest{Reason: "late"})
		if e := a.errorBody(t); a.status != http.StatusConflict || e.Code != apitypes.CodeAlreadyDecided {
			t.Errorf("second decision on %s: %d %s", target, a.status, a.body)
		}
	}
	for _, q := range []string{"until=soon", "until=decision:", "timeout=-1s", "timeout=x", "until=terminal&until=decision"} {
		a := b.send(t, alice, "GET", "/v1/runs/"+id+"/wait?"+q, nil)
		if e := a.errorBody(t); a.status != http.StatusBadRequest || e.Code != apitypes.CodeBadRequest {
			t.Errorf("%s: %d %s", q, a.status, a.body)
		}
	}
	if a := b.send(t, bob, "GET", "/v1/runs/"+id+"/wait", nil); a.status != http.StatusNotFound {
		t.Errorf("another owner's wait: %d %s", a.status, a.body)
	}
}

// TestGetRunWait: GET /v1/runs/{id}?wait= answers when the run ends, told
// by the engine's commit (the fake clock never moves, and no read is
// timed), or, when the wait passes on the engine's clock, with the run as
// a plain GET shows it; until=PHASE answers at that phase; bad waits and
// conditions are refused, another owner's run is missing.
func TestGetRunWait(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Now())
	b := setup(t, engine.Config{Clock: fake})
	id := b.start(t, alice, "gate", `{}`, "")
	b.waitPhase(t, "alice", id, func(p store.Phase) bool { return p == store.PhaseWaiting })

	// until=waiting holds already; wait=0s is the run now.
	for _, q := range []string{"?wait=30s&until=waiting", "?wait=0s"} {
		var run apitypes.Run
		if a := b.send(t, alice, "GET", "/v1/runs/"+id+q, nil); a.status != http.StatusOK || json.Unmarshal(a.body, &run) != nil || run.Phase != apitypes.PhaseWaiting {
			t.Fatalf("%s: %d %s", q, a.status, a.body)
		}
	}

	// The wait passes on the engine's clock: the run as GET shows it.
	held := func(q string) <-chan answer {
		before := fake.Tickers()
		ch := make(chan answer, 1)
		go func() { ch <- b.send(t, alice, "GET", "/v1/runs/"+id+q, nil) }()
		testutil.Eventually(t, 10*time.Second, func() error {
			if fake.Tickers() <= before {
				return fmt.Errorf("the wait has not started")
			}
			return nil
		})
		return ch
	}
	ch := held("?wait=20s")
	fake.Advance(20 * time.Second)
	a := <-ch
	plain := b.send(t, alice, "GET", "/v1/runs/"+id, nil)
	if a.status != http.StatusOK || !bytes.Equal(a.body, plain.body) {
		t.Fatalf("at the wait's end: %d %s, want the plain GET's %s", a.status, a.body, plain.body)
	}

	// The run ends: the held GET answers with the ended run at once.
	ch = held("?wait=30s")
	if a := b.send(t, alice, "POST", "/v1/runs/"+id+"/waits/approve/approve", apitypes.DecideRequest{Payload: json.RawMessage(`{}`)}); a.status != http.StatusOK {
		t.Fatalf("approve: %d %s", a.status, a.body)
	}
	var run apitypes.Run
	if a := <-ch; a.status != http.StatusOK || json.Unmarshal(a.body, &run) != nil || run.Phase != apitypes.PhaseCompleted || len(run.Output) == 0 {
		t.Fatalf("held until the end: %d %s", a.status, a.body)
	}

	for _, q := range []string{"wait=x", "wait=-1s", "wait=31s", "wait=1h", "until=terminal", "wait=1s&until=soon",
		"wait=1s&until=decision", "wait=1s&until=decision:approve", "wait=1s&wait=2s", "wait=1s&timeout=1s"} {
		a := b.send(t, alice, "GET", "/v1/runs/"+id+"?"+q, nil)
		if e := a.errorBody(t); a.status != http.StatusBadRequest || e.Code != apitypes.CodeBadRequest {
			t.Errorf("%s: %d %s", q, a.status, a.body)
		}
	}
	if a := b.send(t, bob, "GET", "/v1/runs/"+id+"?wait=30s", nil); a.status != http.StatusNotFound {
		t.Errorf("another owner's run: %d %s", a.status, a.body)
	}
}

// TestRunWaitUntilPastItsDeadline: a wait whose deadline passed before
// its first answer (a slow start on a loaded machine) still answers the
// run as it is, with the deadline's error: the CLI then says "still
// waiting after", not a bare "context deadline exceeded".
func TestRunWaitUntilPastItsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	id := b.start(t, alice, "gate", `{}`, "")
	_, cl := newClients(t, b)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	res, err := cl.RunWaitUntil(ctx, id, "decision:other")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline's", err)
	}
	if res == nil || res.Run == nil || res.Met {
		t.Fatalf("answer %+v, want the run as it is, unmet", res)
	}
}
