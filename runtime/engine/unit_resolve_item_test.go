package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// A fan-out that says on_unknown = "ask": item 0 of two loses its call's
// answer ctx.input["times"] times; item 1 answers at once.
const unitResolveItemSrc = `
flow(name = "fan_ask", nodes = [
    fanout("f", items = lambda ctx: [{"times": ctx.input["times"], "kind": "unknown"}, {"times": 0, "kind": "unknown"}],
           tool = "kit.lose", args = lambda ctx, item: item, at_most_once = True, width = 2, depth = 1, max_items = 2,
           on_unknown = "ask", unknown_timeout = "1h", next = "after"),
    task("after", tool = "kit.echo", args = lambda ctx: {"got": ctx.results["f"]["results"]}),
])
`

// parkedItem starts fan_ask with item 0 losing times answers and waits
// until its one open wait is want.
func (b *testBundle) parkedItem(t *testing.T, times int, want string) (string, HumanWait) {
	t.Helper()
	id := b.start(t, "fan_ask", `{"times": `+string(rune('0'+times))+`}`, "")
	hw := b.unknownWaitOf(t, id, want)
	// Item 1 has ended too before a test counts calls or moves the clock
	// (moved first, its queued task could pass its queue deadline).
	b.wait(t, id, "item 1 published", func(*store.Run) bool {
		return b.cohortIs(t, id, func(v CohortView) bool { return v.Published == 1 })
	})
	return id, hw
}

// An item whose call's outcome is unknown parks on NODE@VISIT.ITEM.unknown.N
// showing its tool, arguments, key and start; the cohort stays open with
// the item in flight (it neither failed nor matured). A result outside the
// output schema is E_BAD_RESULT and leaves the wait open; resolved
// happened, the item publishes the result, the cohort closes and the call
// is never made again; a second answer is E_ALREADY_DECIDED.
func TestUnitResolveItemHappened(t *testing.T) {
	t.Parallel()
	pt := &probeTools{schemas: map[string]string{"kit.lose": `{"type": "object", "required": ["tries"]}`}}
	b := setupUnit(t, Config{Tools: pt}, unitResolveItemSrc)
	ctx := context.Background()
	id, hw := b.parkedItem(t, 1, "f@1.0.unknown.1")
	var shown unknownShown
	if err := json.Unmarshal(hw.Shown, &shown); err != nil {
		t.Fatal(err)
	}
	if hw.Kind != WaitUnknown || hw.Node != "f" || shown.Tool != "kit.lose" || shown.Key != id+"/f/1/0" || shown.StartedAt.IsZero() ||
		!strings.Contains(string(shown.Arguments), `"times":1`) || shown.Error == nil || shown.Error.Code != CodeOutcomeUnknown || !hw.Until.Equal(hw.Since.Add(time.Hour)) {
		t.Fatalf("wait %+v shows %s", hw, hw.Shown)
	}
	if v := b.cohort(t, id); v.State != string(store.CohortOpen) || v.InFlight != 1 || v.Failed != 0 || v.Published != 1 {
		t.Fatalf("cohort %+v while item 0 waits: want open, item 0 in flight", v)
	}
	// Once the step has parked again after item 1's end.
	testutil.Eventually(t, waitTimeout, func() error {
		run, err := b.eng.Get(ctx, "alice", id)
		if err != nil {
			return err
		}
		if all, err := b.eng.Waits(ctx, run); err != nil || len(all) != 2 || all[0].ID != hw.ID || all[1].ID != "f@1" || all[1].Kind != WaitCohort {
			return fmt.Errorf("weir run get's waits %+v (%v), want %s and the step's cohort f@1", all, err, hw.ID)
		}
		return nil
	})
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: id, Node: hw.ID, Approve: true}); codeOf(err) != CodeNotWaiting || !strings.Contains(err.Error(), "weir run resolve") {
		t.Errorf("approve of an item's unknown wait: %v, want %s pointing at resolve", err, CodeNotWaiting)
	}
	resolve := b.resolver(id, hw.ID)
	if err := resolve(ResolveParams{Happened: true, Result: json.RawMessage(`{"sent": true}`)}); codeOf(err) != CodeBadResult {
		t.Fatalf("a result outside the output schema: %v, want %s", err, CodeBadResult)
	}
	b.unknownWaitOf(t, id, hw.ID) // still open
	if err := resolve(ResolveParams{Happened: true, Result: json.RawMessage(`{"tries": 1, "resolved": true}`), Reason: "seen in the log"}); err != nil {
		t.Fatal(err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":[{"resolved":true,"tries":1},{"tries":1}]`) {
		t.Fatalf("%s %s %+v, want completed with the resolved result first", run.Phase, run.Output, run.Error)
	}
	if n := b.tools.Calls("kit.lose"); n != 2 {
		t.Errorf("%d calls, want 2: one per item, the resolved one never made again", n)
	}
	if err := resolve(ResolveParams{Happened: true}); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("second resolve: %v, want %s", err, CodeAlreadyDecided)
	}
	if evs := b.detailsOf(t, id, evResolved); len(evs) != 1 || evs[0]["wait"] != hw.ID || evs[0]["reason"] != "seen in the log" {
		t.Errorf("resolved events %v", evs)
	}
}

// Resolved not happened, the item's call is made once more on a new
// task; unknown again, it parks on the item's next wait (.2), whose not
// happened makes it once more again.
func TestUnitResolveItemNotHappened(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitResolveItemSrc)
	ctx := context.Background()
	id, hw := b.parkedItem(t, 2, "f@1.0.unknown.1")
	if _, err := b.eng.Ops().Resolve(ctx, ResolveParams{Owner: "alice", RunID: id, WaitID: hw.ID}); err != nil {
		t.Fatal(err)
	}
	second := b.unknownWaitOf(t, id, "f@1.0.unknown.2")
	if n := b.tools.Calls("kit.lose"); n != 3 {
		t.Fatalf("%d calls after not happened, want 3 (item 1, item 0 twice)", n)
	}
	if _, err := b.eng.Ops().Resolve(ctx, ResolveParams{Owner: "alice", RunID: id, WaitID: hw.ID}); codeOf(err) != CodeAlreadyDecided {
		t.Errorf("the first wait again: %v, want %s", err, CodeAlreadyDecided)
	}
	if _, err := b.eng.Ops().Resolve(ctx, ResolveParams{Owner: "alice", RunID: id, WaitID: second.ID}); err != nil {
		t.Fatal(err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":[{"tries":3},{"tries":1}]`) {
		t.Fatalf("%s %s %+v", run.Phase, run.Output, run.Error)
	}
	if n := b.tools.Calls("kit.lose"); n != 4 {
		t.Errorf("%d calls, want 4: item 1 once, item 0 once and once more after each not happened", n)
	}
	if n := count(b.events(t, id), evToolStarted); n != 4 {
		t.Errorf("%d tool_started, want one per call", n)
	}
}

// Nobody resolves the item's wait before unknown_timeout: the item fails
// with E_OUTCOME_UNKNOWN naming the wait, as without "ask", and its call
// is not made again; an answer at the deadline is E_WAIT_EXPIRED.
func TestUnitResolveItemTimeout(t *testing.T) {
	t.Parallel()
	// The clock moves in 10-minute steps: a task queued across one must
	// not pass its queue deadline.
	b := setupUnit(t, Config{QueueTimeout: 1000 * time.Hour}, unitResolveItemSrc)
	ctx := context.Background()
	id, hw := b.parkedItem(t, 1, "f@1.0.unknown.1")
	wantExpiredAtDeadline(t, b.mem, id, hw)
	run := b.advanceUntil(t, id, 10*time.Minute, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":[{"tries":1}]`) {
		t.Fatalf("%s %s %+v, want completed with item 1's result alone", run.Phase, run.Output, run.Error)
	}
	err := b.mem.View(ctx, func(tx store.Tx) error {
		it, err := tx.CohortItemGet(id, "f", 1, 0)
		if err != nil {
			return err
		}
		if it.State != store.ItemFailed || it.Error == nil || it.Error.Code != CodeOutcomeUnknown || !strings.Contains(it.Error.Message, hw.ID) {
			t.Errorf("item 0 %s %+v, want failed %s naming %s", it.State, it.Error, CodeOutcomeUnknown, hw.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.tools.Calls("kit.lose"); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}

// A fan-out that does not say "ask" fails the item at once, as before.
func TestUnitItemUnknownFailsWithoutAsk(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, strings.Replace(unitResolveItemSrc, `on_unknown = "ask", unknown_timeout = "1h", `, "", 1))
	id := b.start(t, "fan_ask", `{"times": 1}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":[{"tries":1}]`) {
		t.Fatalf("%s %s %+v, want completed with item 1's result alone", run.Phase, run.Output, run.Error)
	}
	if n := b.tools.Calls("kit.lose"); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
	if ws, err := b.eng.HumanWaits(context.Background(), "alice", id); err != nil || len(ws) != 0 {
		t.Errorf("waits %+v (%v), want none", ws, err)
	}
}

// The probe comes first for an item as for a task, under the same rules:
// its not_happened makes the call once more, a second not_happened in a
// row is not acted on, and the item then asks; resolved not happened, the
// call is made once more again.
func TestUnitResolveItemAfterProbe(t *testing.T) {
	t.Parallel()
	pt := &probeTools{answers: map[string][]probeReply{"kit.lose": {{res: &tool.ReconcileResult{Answer: tool.NotHappened}}}}}
	b := setupUnit(t, Config{Tools: pt}, unitResolveItemSrc)
	id, hw := b.parkedItem(t, 2, "f@1.0.unknown.1")
	if got := b.answersOf(t, id); strings.Join(got, ",") != "not_happened,not_happened" {
		t.Fatalf("reconciled %v, want not_happened twice", got)
	}
	if n := b.tools.Calls("kit.lose"); n != 3 {
		t.Fatalf("%d calls before the wait, want 3 (item 1, item 0 and once more after the probe)", n)
	}
	if _, err := b.eng.Ops().Resolve(context.Background(), ResolveParams{Owner: "alice", RunID: id, WaitID: hw.ID}); err != nil {
		t.Fatal(err)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":[{"tries":3},{"tries":1}]`) {
		t.Fatalf("%s %s %+v", run.Phase, run.Output, run.Error)
	}
	if n := b.tools.Calls("kit.lose"); n != 4 {
		t.Errorf("%d calls, want 4", n)
	}
}
