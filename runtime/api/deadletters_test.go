package api

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// A run parked on exhaustion is listed, shown and redriven through the
// API and the Go client; another owner sees none of it; bad requests are
// refused whole.
func TestDeadLetterRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{RetryBase: time.Millisecond, RetryMax: time.Millisecond})
	_, alice := newClients(t, b)
	bob, err := client.New(b.tcpURL, client.WithToken(bobToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	ctx := context.Background()
	src := `flow(name = "parking", nodes = [task("f", tool = "testkit.fail", args = {"times": 3}, retries = 1, on_exhausted = "park")])`
	if res, err := alice.FlowRegister(ctx, apitypes.SourceFile{Path: "parking.star", Src: src}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %+v %v", res, err)
	}
	started, err := alice.RunStart(ctx, apitypes.StartRequest{Flow: "parking"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := alice.RunWait(ctx, started.RunID, client.RunWaitParams{Until: apitypes.PhaseWaiting}); err != nil || v.Phase != apitypes.PhaseWaiting {
		t.Fatalf("parked run: %+v %v", v, err)
	}

	for _, c := range []struct {
		f    client.DeadLetterFilter
		want int
	}{
		{client.DeadLetterFilter{}, 1},
		{client.DeadLetterFilter{Flow: "parking"}, 1},
		{client.DeadLetterFilter{Flow: "other"}, 0},
		{client.DeadLetterFilter{Tool: "testkit.fail", Since: "1h"}, 1},
		{client.DeadLetterFilter{Since: time.Now().Add(time.Hour).Format(time.RFC3339)}, 0},
	} {
		if dl, err := alice.DeadLetters(ctx, c.f); err != nil || len(dl) != c.want {
			t.Errorf("list %+v: %d (%v), want %d", c.f, len(dl), err, c.want)
		}
	}
	_, err = alice.DeadLetters(ctx, client.DeadLetterFilter{Since: "yesterday"})
	apiError(t, "a since that is no time", err, apitypes.CodeBadRequest, 400)
	dl, err := alice.DeadLetters(ctx, client.DeadLetterFilter{})
	if err != nil || len(dl) != 1 {
		t.Fatalf("dead letters: %+v %v", dl, err)
	}
	task := dl[0].TaskID

	d, err := alice.DeadLetter(ctx, task)
	if err != nil || d.DeadLetter.RunID != started.RunID || len(d.DeadLetter.Errors) != 2 || d.Run == nil ||
		!slices.ContainsFunc(d.Run.Waits, func(w apitypes.HumanWait) bool { return w.Kind == apitypes.WaitExhausted && w.ID == "f@1.exhausted.1" }) {
		t.Fatalf("show: %+v %v", d, err)
	}
	_, err = bob.DeadLetter(ctx, task)
	apiError(t, "bob shows alice's dead letter", err, apitypes.CodeNotFound, 404)
	if dl, err := bob.DeadLetters(ctx, client.DeadLetterFilter{}); err != nil || len(dl) != 0 {
		t.Errorf("bob lists %d dead letters (%v)", len(dl), err)
	}
	if res, err := bob.Redrive(ctx, apitypes.RedriveRequest{TaskIDs: []string{task}}); err != nil || len(res.Results) != 1 ||
		res.Results[0].Redriven || res.Results[0].Error == nil || res.Results[0].Error.Code != apitypes.CodeNotFound {
		t.Fatalf("bob redrives alice's dead letter: %+v %v", res, err)
	}
	_, err = alice.Redrive(ctx, apitypes.RedriveRequest{})
	apiError(t, "a redrive naming nothing", err, apitypes.CodeBadRequest, 400)
	_, err = alice.Redrive(ctx, apitypes.RedriveRequest{All: true, RequestID: "redrive:mine"})
	apiError(t, "a reserved request id", err, apitypes.CodeBadRequestID, 400)

	res, err := alice.Redrive(ctx, apitypes.RedriveRequest{TaskIDs: []string{task}, Reason: "fixed"})
	if err != nil || len(res.Results) != 1 || !res.Results[0].Redriven || res.Results[0].Wait != "f@1.exhausted.1" {
		t.Fatalf("redrive: %+v %v", res, err)
	}
	if v, err := alice.RunWait(ctx, started.RunID, client.RunWaitParams{}); err != nil || v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("redriven run: %+v %v", v, err)
	}
	evs, err := client.Collect(alice.RunEventsAll(ctx, started.RunID, client.EventListParams{}))
	if err != nil || !slices.ContainsFunc(evs, func(e apitypes.Event) bool {
		return e.Type == "redriven" && e.Detail["by"] == "alice" && e.Detail["reason"] == "fixed"
	}) {
		t.Errorf("no redriven event with who and why: %v", err)
	}
	if res, err := alice.Redrive(ctx, apitypes.RedriveRequest{TaskIDs: []string{task}}); err != nil || res.Results[0].Redriven || res.Results[0].Error == nil {
		t.Errorf("second redrive: %+v %v, want refused", res, err)
	}
}
