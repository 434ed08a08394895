package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The client package is tested here, against the real server over a real
// engine, store and plugin, on the bundle's Unix socket and TCP listener.

// clientFlows are registered through the client by the tests below.
const clientFlows = `
flow(name = "gate", nodes = [wait("ok", timeout = "1h", next = "go", error = "no"), task("go", tool = "testkit.echo"), task("no", tool = "testkit.echo")])
flow(name = "failing", nodes = [task("f", tool = "testkit.fail", args = {"times": 5}, retries = 1)])
`

func newClients(t *testing.T, b *bundle) (unix, alice *client.Client) {
	t.Helper()
	unix = client.NewUnix(b.sock)
	t.Cleanup(unix.Close)
	alice, err := client.New(b.tcpURL, client.WithToken(aliceToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alice.Close)
	return unix, alice
}

// apiError asserts that err is an answer of the API with code and status.
func apiError(t *testing.T, what string, err error, code string, status int) {
	t.Helper()
	var ae *client.Error
	if !errors.As(err, &ae) {
		t.Errorf("%s: %v, want an API error %s", what, err, code)
		return
	}
	if ae.Code != code || ae.HTTPStatus != status || ae.Message == "" {
		t.Errorf("%s: %d %s %q, want %d %s", what, ae.HTTPStatus, ae.Code, ae.Message, status, code)
	}
	if client.ErrorCode(err) != code {
		t.Errorf("%s: ErrorCode says %q", what, client.ErrorCode(err))
	}
}

func TestClientRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	c, _ := newClients(t, b)
	ctx := context.Background()

	st, err := c.Health(ctx)
	if err != nil || !st.Open() || st.Caller == nil || st.Caller.Owner != b.me || !st.Caller.Local {
		t.Fatalf("health %+v %v", st, err)
	}

	// Start with a request id: again gives the same run, another input is
	// refused.
	req := apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":1}`), RequestID: "req-1"}
	first, err := c.RunStart(ctx, req)
	if err != nil || first.Existing || first.RunID == "" {
		t.Fatalf("start: %+v %v", first, err)
	}
	again, err := c.RunStart(ctx, req)
	if err != nil || !again.Existing || again.RunID != first.RunID {
		t.Errorf("start again: %+v %v, want run %s existing", again, err, first.RunID)
	}
	_, err = c.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n":2}`), RequestID: "req-1"})
	apiError(t, "start with another input", err, apitypes.CodeDedupConflict, 409)
	var ae *client.Error
	if errors.As(err, &ae) && ae.Class != apitypes.ClassProtocol {
		t.Errorf("dedup conflict class %q", ae.Class)
	}
	_, err = c.RunStart(ctx, apitypes.StartRequest{Flow: "nosuchflow"})
	apiError(t, "start of an unknown flow", err, apitypes.CodeUnknownFlow, 404)
	// The flow is part of what the id means: the same id and input naming
	// another flow, even one that does not exist, is refused too.
	_, err = c.RunStart(ctx, apitypes.StartRequest{Flow: "nosuchflow", Input: json.RawMessage(`{"n":1}`), RequestID: "req-1"})
	apiError(t, "start of another flow with the id", err, apitypes.CodeDedupConflict, 409)
	if err == nil || !strings.Contains(err.Error(), first.RunID) || !strings.Contains(err.Error(), `flow "echo"`) {
		t.Errorf("another flow with the id: %v, want it to name run %s and flow echo", err, first.RunID)
	}

	// Wait until it ends, seeing each read.
	seen := 0
	v, err := c.RunWait(ctx, first.RunID, client.RunWaitParams{Poll: time.Millisecond, Seen: func(*apitypes.Run) { seen++ }})
	if err != nil || v.Phase != apitypes.PhaseCompleted || seen == 0 {
		t.Fatalf("wait: %+v %v after %d reads", v, err, seen)
	}
	if v.ID != first.RunID || v.Flow != "echo" || v.Owner != b.me || v.RequestID != "req-1" || string(v.Input) != `{"n":1}` ||
		!strings.Contains(string(v.Output), `"n":1`) || v.Progress == nil || v.CreatedAt == "" {
		t.Errorf("completed run %+v", v)
	}
	got, err := c.RunGet(ctx, first.RunID)
	if err != nil || got.Phase != apitypes.PhaseCompleted {
		t.Errorf("get: %+v %v", got, err)
	}
	_, err = c.RunGet(ctx, "run_nothing")
	apiError(t, "get of a missing run", err, apitypes.CodeNotFound, 404)

	// Lists page: every run once, in id order, whatever the page size.
	var started []string // in start order
	started = append(started, first.RunID)
	for i := range 4 {
		sr, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)})
		if err != nil {
			t.Fatal(err)
		}
		started = append(started, sr.RunID)
	}
	one, err := c.RunList(ctx, client.RunListParams{Limit: apitypes.MaxListLimit})
	if err != nil || len(one) != 5 {
		t.Fatalf("one page: %d runs, %v", len(one), err)
	}
	paged, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Limit: 2}))
	if err != nil || !slices.EqualFunc(one, paged, func(a, b apitypes.Run) bool { return a.ID == b.ID }) {
		t.Errorf("paged by 2: %d runs %v, want the %d of one page in order", len(paged), err, len(one))
	}
	done, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseCompleted, Limit: 1}))
	if err != nil || len(done) == 0 || slices.ContainsFunc(done, func(r apitypes.Run) bool { return r.Phase != apitypes.PhaseCompleted }) {
		t.Errorf("completed runs: %+v %v", done, err)
	}
	_, err = c.RunList(ctx, client.RunListParams{Limit: apitypes.MaxListLimit + 1})
	apiError(t, "a page over the limit", err, apitypes.CodeBadRequest, 400)

	// Newest first is start order reversed (ids are random), a page at a
	// time from the last run listed; flow filters.
	newest, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Newest: true, Limit: 2}))
	ids := func(rs []apitypes.Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	want := slices.Clone(started)
	slices.Reverse(want)
	if err != nil || !slices.Equal(ids(newest), want) {
		t.Errorf("newest first paged by 2: %v %v, want %v", ids(newest), err, want)
	}
	echo, err := c.RunList(ctx, client.RunListParams{Newest: true, Flow: "echo"})
	if err != nil || !slices.Equal(ids(echo), want) {
		t.Errorf("flow echo: %v %v, want %v", ids(echo), err, want)
	}
	none, err := c.RunList(ctx, client.RunListParams{Newest: true, Flow: "nosuchflow"})
	if err != nil || len(none) != 0 {
		t.Errorf("flow nosuchflow: %v %v, want none", ids(none), err)
	}
	_, err = c.RunList(ctx, client.RunListParams{Before: first.RunID})
	apiError(t, "before in id order", err, apitypes.CodeBadRequest, 400)
	_, err = c.RunList(ctx, client.RunListParams{Newest: true, Before: "run_nothing"})
	apiError(t, "before a run that is not there", err, apitypes.CodeNotFound, 404)
	resp, err := b.unix.Get("http://weir/v1/runs?order=oldest")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("order=oldest: status %d, want 400", resp.StatusCode)
	}

	// Events page the same way.
	all, err := c.RunEvents(ctx, first.RunID, client.EventListParams{})
	if err != nil || len(all) < 3 || all[0].Type != "accepted" {
		t.Fatalf("events: %d %v", len(all), err)
	}
	pagedEvs, err := client.Collect(c.RunEventsAll(ctx, first.RunID, client.EventListParams{Limit: 2}))
	if err != nil || !slices.EqualFunc(all, pagedEvs, func(a, b apitypes.Event) bool { return a.Seq == b.Seq && a.Type == b.Type }) {
		t.Errorf("events paged by 2: %d %v, want the %d of one page", len(pagedEvs), err, len(all))
	}
	tail, err := client.Collect(c.RunEventsAll(ctx, first.RunID, client.EventListParams{After: all[0].Seq}))
	if err != nil || len(tail) != len(all)-1 {
		t.Errorf("events after the first: %d %v, want %d", len(tail), err, len(all)-1)
	}

	// Cancel: a sleeping run, then one that ended.
	sleepy, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "sleep", Input: json.RawMessage(`{"ms":60000}`)})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := c.RunCancel(ctx, sleepy.RunID); err != nil || a != apitypes.CancelRequested {
		t.Errorf("cancel of a sleeping run: %q %v", a, err)
	}
	if v, err := c.RunWait(ctx, sleepy.RunID, client.RunWaitParams{}); err != nil || v.Phase != apitypes.PhaseCancelled {
		t.Errorf("cancelled run: %+v %v", v, err)
	}
	if a, err := c.RunCancel(ctx, first.RunID); err != nil || a != apitypes.CancelAlreadyTerminal {
		t.Errorf("cancel of a completed run: %q %v", a, err)
	}
	_, err = c.RunCancel(ctx, "run_nothing")
	apiError(t, "cancel of a missing run", err, apitypes.CodeNotFound, 404)

	// A wait that ends with its context returns the last read.
	sleepy, err = c.RunStart(ctx, apitypes.StartRequest{Flow: "sleep", Input: json.RawMessage(`{"ms":60000}`)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	v, err = c.RunWait(wctx, sleepy.RunID, client.RunWaitParams{Until: apitypes.PhaseCompleted, Seen: func(*apitypes.Run) { cancel() }})
	if !errors.Is(err, context.Canceled) || v == nil || v.ID != sleepy.RunID || v.Phase.Terminal() {
		t.Errorf("wait with a cancelled context: %+v %v", v, err)
	}
	if _, err := c.RunCancel(ctx, sleepy.RunID); err != nil {
		t.Error(err)
	}

	if s, err := c.Stats(ctx); err != nil || s.Counts["accepted"] < 6 || s.Refusals == nil {
		t.Errorf("stats: %+v %v", s, err)
	}
	// The first scheduler tick takes a sample of the history.
	testutil.Eventually(t, 10*time.Second, func() error {
		h, err := c.StatsHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Interval != engine.HistoryInterval || h.Window != engine.HistoryWindow || len(h.Samples) == 0 ||
			h.Samples[0].Slots == 0 || h.Samples[0].Types == nil {
			return fmt.Errorf("stats history %+v", h)
		}
		return nil
	})
	if g, err := c.RunGraph(ctx, first.RunID, ""); err != nil || !strings.HasPrefix(g, "flowchart") {
		t.Errorf("run graph: %q %v", g, err)
	}
}

func TestClientFlowsWaitsAndDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	c, _ := newClients(t, b)
	ctx := context.Background()

	// A refused registration carries every diagnostic and stores nothing.
	_, err := c.FlowRegister(ctx, apitypes.SourceFile{Path: "broken.star", Src: `flow(name = "broken", nodes = [task("a", tool = "testkit.echo", next = "nowhere")])`})
	var de *client.DiagnosticsError
	if !errors.As(err, &de) || len(de.Diagnostics) != 1 || de.Diagnostics[0].Code != "E_UNKNOWN_NODE" ||
		de.Diagnostics[0].File != "broken.star" || de.Diagnostics[0].Line != 1 || !strings.Contains(err.Error(), "broken.star:1:") {
		t.Fatalf("broken registration: %v", err)
	}
	// Warnings alone register, and come back with the answer.
	warned, err := c.FlowRegister(ctx, apitypes.SourceFile{Path: "warned.star", Src: `flow(name = "warned", nodes = [
    fanout("fan", tool = "testkit.echo", items = [1], width = 1, depth = 1, max_items = 1, next = "use"),
    task("use", tool = "testkit.echo", args = lambda ctx: {"all": ctx.results["fan"]}),
])`})
	if err != nil || len(warned.Flows) != 1 || len(warned.Diagnostics) != 1 ||
		warned.Diagnostics[0].Code != "W_FANOUT_RESULT" || warned.Diagnostics[0].Severity != "warning" || warned.Diagnostics[0].Line != 3 {
		t.Fatalf("a registration with a warning: %+v %v", warned, err)
	}
	res, err := c.FlowRegister(ctx, apitypes.SourceFile{Path: "client.star", Src: clientFlows})
	if err != nil || len(res.Flows) != 2 || res.Flows[0].Name != "gate" || res.Flows[0].Nodes != 3 || len(res.Flows[0].Hash) != 64 {
		t.Fatalf("register: %+v %v", res, err)
	}
	fl, err := c.FlowList(ctx)
	names := make([]string, len(fl))
	for i, f := range fl {
		names[i] = f.Name
	}
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"echo", "failing", "gate", "sleep", "warned"}) {
		t.Errorf("flows %v %v", names, err)
	}
	if g, err := c.FlowGraph(ctx, "gate", client.FormatDot); err != nil || !strings.Contains(g, `"ok" -> "go"`) {
		t.Errorf("dot graph: %q %v", g, err)
	}
	_, err = c.FlowGraph(ctx, "gate", "png")
	apiError(t, "graph in an unknown format", err, apitypes.CodeBadRequest, 400)

	// A human wait: approve once; a second decision is refused.
	gate, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "gate"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.RunWait(ctx, gate.RunID, client.RunWaitParams{Until: apitypes.PhaseWaiting}); err != nil || v.Phase != apitypes.PhaseWaiting {
		t.Fatalf("gate run: %+v %v", v, err)
	}
	ws, err := c.RunWaits(ctx, gate.RunID)
	if err != nil || len(ws) != 1 || ws[0].Node != "ok" || ws[0].RunID != gate.RunID || ws[0].Until.IsZero() {
		t.Fatalf("waits %+v %v", ws, err)
	}
	// A node with no open wait: refused with the closest open one and the
	// run's open waits, as registration suggests a node.
	_, err = c.RunApprove(ctx, gate.RunID, "okk", nil)
	apiError(t, "approve a misspelt node", err, apitypes.CodeNotWaiting, 409)
	if err == nil || !strings.Contains(err.Error(), `no decision is open there (did you mean "ok"?); its open waits: ok@1 (node ok)`) {
		t.Errorf("approve a misspelt node: %v, want the closest node and the open waits", err)
	}
	_, err = c.RunStart(ctx, apitypes.StartRequest{Flow: "gat"})
	apiError(t, "start a misspelt flow", err, apitypes.CodeUnknownFlow, 404)
	if err == nil || !strings.Contains(err.Error(), `no flow named "gat" is registered (did you mean "gate"?)`) {
		t.Errorf("start a misspelt flow: %v, want the closest flow", err)
	}
	// A response answers an agent's proposed call; a wait node takes a
	// payload instead, and the refusal leaves it open.
	_, err = c.RunRespond(ctx, gate.RunID, "ok", json.RawMessage(`{"yes":true}`), "")
	apiError(t, "respond to a wait node", err, apitypes.CodeBadRequest, 400)
	dr, err := c.RunApprove(ctx, gate.RunID, "ok", json.RawMessage(`{"yes":true}`))
	if err != nil || dr.Decision != apitypes.DecisionApproved || dr.RunID != gate.RunID || dr.Node != "ok" {
		t.Errorf("approve: %+v %v", dr, err)
	}
	_, err = c.RunApprove(ctx, gate.RunID, "ok", nil)
	if code := client.ErrorCode(err); code != apitypes.CodeAlreadyDecided && code != apitypes.CodeNotWaiting {
		t.Errorf("second approval: %v", err)
	}
	if v, err := c.RunWait(ctx, gate.RunID, client.RunWaitParams{}); err != nil || v.Phase != apitypes.PhaseCompleted {
		t.Errorf("approved run: %+v %v", v, err)
	}
	gate, err = c.RunStart(ctx, apitypes.StartRequest{Flow: "gate"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunWait(ctx, gate.RunID, client.RunWaitParams{Until: apitypes.PhaseWaiting}); err != nil {
		t.Fatal(err)
	}
	if dr, err := c.RunReject(ctx, gate.RunID, "ok", "not now"); err != nil || dr.Decision != apitypes.DecisionRejected {
		t.Errorf("reject: %+v %v", dr, err)
	}
	if v, err := c.RunWait(ctx, gate.RunID, client.RunWaitParams{}); err != nil || v.Phase != apitypes.PhaseCompleted {
		t.Errorf("rejected run (it takes the error wire): %+v %v", v, err)
	}
	evs, err := client.Collect(c.RunEventsAll(ctx, gate.RunID, client.EventListParams{}))
	if err != nil || !slices.ContainsFunc(evs, func(e apitypes.Event) bool {
		return e.Type == "node_failed" && e.Detail["code"] == apitypes.CodeRejected
	}) {
		t.Errorf("the rejection is not in the timeline: %v", err)
	}

	// A tool that keeps failing: its task is dead-lettered with every
	// attempt's error.
	if dl, err := c.DeadLetterList(ctx, 0); err != nil || dl == nil || len(dl) != 0 {
		t.Errorf("dead letters before any: %+v %v", dl, err)
	}
	failing, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "failing"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.RunWait(ctx, failing.RunID, client.RunWaitParams{}); err != nil || v.Phase != apitypes.PhaseFailed || v.Error == nil || v.Error.Code != apitypes.CodeRetriesExhausted {
		t.Fatalf("failing run: %+v %v", v, err)
	}
	dl, err := c.DeadLetterList(ctx, 1)
	if err != nil || len(dl) != 1 || dl[0].RunID != failing.RunID || dl[0].Tool != "testkit.fail" || len(dl[0].Errors) != 2 {
		t.Errorf("dead letters %+v %v", dl, err)
	}
}

// Over TCP the bearer token says who the caller is; without one, or with
// another, the client gets the API's refusal.
func TestClientTCP(t *testing.T) {
	t.Parallel()
	d := &fakeDaemon{info: apitypes.ConfigInfo{Version: 2, File: "/etc/weir.hcl"}}
	b := setup(t, engine.Config{}, WithDaemon(d))
	d.st = b.st
	unix, alice := newClients(t, b)
	ctx := context.Background()

	st, err := alice.Health(ctx)
	if err != nil || st.Caller == nil || st.Caller.Owner != "alice" || st.Caller.Local || st.Config == nil || st.Config.Version != 2 {
		t.Fatalf("alice's health: %+v %v", st, err)
	}
	res, err := alice.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := alice.RunGet(ctx, res.RunID); err != nil || v.Owner != "alice" {
		t.Errorf("alice reads her run: %+v %v", v, err)
	}
	_, err = unix.RunGet(ctx, res.RunID)
	apiError(t, "the local user reads alice's run", err, apitypes.CodeNotFound, 404)

	anon, err := client.New(b.tcpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	_, err = anon.Health(ctx)
	apiError(t, "no token", err, apitypes.CodeIdentity, 401)
	wrong, err := client.New(b.tcpURL, client.WithToken("mallory-token-0123456"))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	_, err = wrong.RunList(ctx, client.RunListParams{})
	apiError(t, "unknown token", err, apitypes.CodeIdentity, 401)

	// The admin endpoints answer the daemon's own user on the socket only.
	rr, err := unix.AdminReload(ctx)
	if err != nil || !rr.Changed || rr.Previous != 2 || rr.Config.Version != 3 {
		t.Errorf("reload: %+v %v", rr, err)
	}
	_, err = alice.AdminReload(ctx)
	apiError(t, "reload over TCP", err, apitypes.CodeForbidden, 403)
	_, err = alice.AdminAudit(ctx, client.EventListParams{})
	apiError(t, "audit over TCP", err, apitypes.CodeForbidden, 403)
	audit, err := unix.AdminAudit(ctx, client.EventListParams{})
	if err != nil || len(audit) != 1 || audit[0].Detail["caller"] != b.me || audit[0].Detail["run"] != res.RunID {
		t.Errorf("audit: %+v %v, want the local user's refused read", audit, err)
	}
	if later, err := unix.AdminAudit(ctx, client.EventListParams{After: audit[0].Seq, Limit: 5}); err != nil || len(later) != 0 {
		t.Errorf("audit after the last: %+v %v", later, err)
	}
	d.mu.Lock()
	d.err = &engine.Error{Code: CodeConfig, Class: engine.ClassProtocol, Message: "invalid config"}
	d.mu.Unlock()
	_, err = unix.AdminReload(ctx)
	apiError(t, "invalid candidate", err, apitypes.CodeConfig, 422)
}

// A closed admission still answers the status, with 503, and a reason that
// names the incident but not the store's words (the daemon log has them).
func TestClientHealthWhileClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	c, _ := newClients(t, b)
	ctx := context.Background()
	b.st.breakWith(errors.New("disk on fire"))
	_, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "echo"})
	apiError(t, "start on a broken store", err, apitypes.CodeStorage, 503)
	st, err := c.Health(ctx)
	if err != nil || st.Open() || st.Admission != apitypes.CodeStorage || !strings.Contains(st.Reason, "incident inc_") || strings.Contains(st.Reason, "disk on fire") {
		t.Errorf("health of a closed daemon: %+v %v", st, err)
	}
}

// The client's own limits and failures: nothing listening, an answer
// over the limit, an address it cannot use.
func TestClientLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gone := client.NewUnix(t.TempDir() + "/nothing.sock")
	defer gone.Close()
	if _, err := gone.Health(ctx); !errors.Is(err, client.ErrNoDaemon) || client.ErrorCode(err) != "" {
		t.Errorf("no daemon: %v", err)
	}

	b := setup(t, engine.Config{})
	c, _ := newClients(t, b)
	if _, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`"` + strings.Repeat("x", 400) + `"`)}); err != nil {
		t.Fatal(err)
	}
	small := client.NewUnix(b.sock, client.WithMaxAnswer(200))
	defer small.Close()
	if _, err := small.RunList(ctx, client.RunListParams{}); !errors.Is(err, client.ErrTooLarge) {
		t.Errorf("an answer over the limit: %v", err)
	}
	if _, err := small.Health(ctx); err != nil {
		t.Errorf("an answer within the limit: %v", err)
	}

	for _, addr := range []string{"", "unix://", "http://", "http://h:1/v1", "http://h:1?x=1", "http://u:p@h:1", "http://h :1"} {
		if _, err := client.New(addr); err == nil {
			t.Errorf("address %q accepted", addr)
		}
	}
	for _, addr := range []string{b.sock, "unix://" + b.sock} {
		c, err := client.New(addr)
		if err != nil {
			t.Fatalf("address %q: %v", addr, err)
		}
		if st, err := c.Health(ctx); err != nil || !st.Open() || c.Addr() != b.sock {
			t.Errorf("address %q: %+v %v (addr %q)", addr, st, err, c.Addr())
		}
		c.Close()
	}
}

// The client refuses a request id that is not UTF-8 before sending it
// (json.Marshal would send U+FFFD for each bad byte, making "order-\xff"
// and "order-\xfe" one id); the daemon refuses U+FFFD and the reserved
// prefixes; all with E_BAD_REQUEST_ID, and none starts a run.
func TestClientRequestIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	_, alice := newClients(t, b)
	ctx := context.Background()
	for _, id := range []string{"order-\xff", "order-\xfe"} {
		_, err := alice.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"x":1}`), RequestID: id})
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Code != apitypes.CodeBadRequestID || ae.HTTPStatus != 0 || !strings.Contains(ae.Message, "not valid UTF-8") {
			t.Errorf("%q: %v, want a local %s", id, err, apitypes.CodeBadRequestID)
		}
	}
	for _, id := range []string{"order-\ufffd", "schedule:nightly", "fork:run_x"} {
		_, err := alice.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"x":1}`), RequestID: id})
		apiError(t, id, err, apitypes.CodeBadRequestID, 400)
	}
	page, err := alice.RunList(ctx, client.RunListParams{})
	if err != nil || len(page) != 0 {
		t.Fatalf("refused starts left runs: %+v %v", page, err)
	}
	res, err := alice.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"x":1}`), RequestID: "order-é"})
	if err != nil {
		t.Fatal(err)
	}
	// The run is found by its request id, by its owner only.
	if r, err := alice.RunByRequestID(ctx, "order-é"); err != nil || r.ID != res.RunID || r.RequestID != "order-é" {
		t.Errorf("alice's run by request id: %+v %v, want %s", r, err, res.RunID)
	}
	bob, err := client.New(b.tcpURL, client.WithToken(bobToken))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	_, err = bob.RunByRequestID(ctx, "order-é")
	apiError(t, "bob looks up alice's request id", err, apitypes.CodeNotFound, 200)
	_, err = alice.RunByRequestID(ctx, "order-\x01")
	apiError(t, "a request id with a control character", err, apitypes.CodeBadRequest, 400)
}
