package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// A run parked on an unknown outcome (an at-most-once call past its
// deadline, on a node that says on_unknown = "ask") shows its wait, and
// is resolved through the API and the Go client once; another owner, a
// body without happened and an approve there are refused.
func TestResolveRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	_, ac := newClients(t, b)
	bob, err := client.New(b.tcpURL, client.WithToken(bobToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	ctx := context.Background()
	src := `flow(name = "asks", nodes = [
    task("x", tool = "testkit.exclusive", args = {"ms": 60000}, at_most_once = True, timeout = "200ms", on_unknown = "ask", next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"got": ctx.results["x"]}),
])`
	if res, err := ac.FlowRegister(ctx, apitypes.SourceFile{Path: "asks.star", Src: src}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %+v %v", res, err)
	}
	started, err := ac.RunStart(ctx, apitypes.StartRequest{Flow: "asks"})
	if err != nil {
		t.Fatal(err)
	}
	id := started.RunID
	w, err := ac.RunWaitUntil(ctx, id, apitypes.UntilDecision)
	if err != nil || len(w.Decisions) != 1 || w.Decisions[0].Kind != apitypes.WaitUnknown || w.Decisions[0].ID != "x@1.unknown.1" ||
		!strings.Contains(string(w.Decisions[0].Shown), `"key":"`+id+`/x/1"`) {
		t.Fatalf("until decision: %+v %v", w, err)
	}
	wait := w.Decisions[0].ID

	_, err = bob.Resolve(ctx, id, wait, true, nil, "")
	apiError(t, "bob resolves alice's run", err, apitypes.CodeNotFound, 404)
	_, err = ac.RunApprove(ctx, id, wait, nil)
	apiError(t, "an approve of an unknown wait", err, apitypes.CodeNotWaiting, 409)
	if a := b.send(t, alice, "POST", "/v1/runs/"+id+"/waits/"+wait+"/resolve", map[string]any{"reason": "no answer"}); a.status != 400 || a.errorBody(t).Code != apitypes.CodeBadRequest {
		t.Errorf("a body without happened: %d", a.status)
	}
	_, err = ac.Resolve(ctx, id, wait, false, json.RawMessage(`{"peak": 1}`), "")
	apiError(t, "a result of a call that did not happen", err, apitypes.CodeBadRequest, 400)

	res, err := ac.Resolve(ctx, id, wait, true, json.RawMessage(`{"peak": 1}`), "seen in the log")
	if err != nil || res.Wait != wait || res.Node != "x" || !res.Happened {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	v, err := ac.RunWait(ctx, id, client.RunWaitParams{})
	if err != nil || v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"got":{"peak":1}`) {
		t.Fatalf("resolved run: %+v %v", v, err)
	}
	_, err = ac.Resolve(ctx, id, wait, false, nil, "")
	apiError(t, "a second resolve", err, apitypes.CodeAlreadyDecided, 409)
	evs, err := client.Collect(ac.RunEventsAll(ctx, id, client.EventListParams{}))
	if err != nil || !slices.ContainsFunc(evs, func(e apitypes.Event) bool {
		return e.Type == "resolved" && e.Detail["by"] == "alice" && e.Detail["reason"] == "seen in the log" && e.Detail["happened"] == true
	}) {
		t.Errorf("no resolved event with who, why and the answer: %v", err)
	}
}
