package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

const unitRedriveSrc = `
flow(name = "parks", nodes = [
    task("call", tool = "kit.fail", args = lambda ctx: ctx.input, retries = 1, on_exhausted = "park", next = "after"),
    task("after", tool = "kit.echo", args = lambda ctx: {"after": ctx.results["call"]}),
])

flow(name = "parks_by_default", on_exhausted = "park", nodes = [
    task("call", tool = "kit.fail", args = lambda ctx: ctx.input, retries = 1),
])

flow(name = "fails", nodes = [
    task("call", tool = "kit.fail", args = lambda ctx: ctx.input, retries = 1),
])

flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])
`

// parkedOnExhaustion runs flow until its task has used up its tries
// (retries = 1: two tries) and the run parks on its exhausted wait.
func (b *testBundle) parkedOnExhaustion(t *testing.T, flow, input string) string {
	t.Helper()
	id := b.start(t, flow, input, "")
	b.advanceUntil(t, id, 4*time.Second, "parked on exhaustion", func(r *store.Run) bool {
		return r.Phase == store.PhaseWaiting && count(b.events(t, id), evDeadLettered) == 1
	})
	return id
}

// redriveOne redrives one task as alice and returns its result.
func (b *testBundle) redriveOne(t *testing.T, p RedriveParams) RedriveResult {
	t.Helper()
	if p.Owner == "" {
		p.Owner = "alice"
	}
	ans, err := b.eng.Ops().Redrive(context.Background(), p)
	if err != nil {
		t.Fatalf("redrive %+v: %v", p, err)
	}
	if len(ans.Results) != 1 {
		t.Fatalf("redrive %+v: %d results, want 1", p, len(ans.Results))
	}
	return ans.Results[0]
}

func deadLetterOf(t *testing.T, b *testBundle, runID string) *store.DeadLetter {
	t.Helper()
	dls, err := b.eng.Ops().DeadLetterList(context.Background(), DeadLetterParams{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dls {
		if d.RunID == runID {
			return d
		}
	}
	t.Fatalf("run %s has no dead letter among %d", runID, len(dls))
	return nil
}

// A task whose node says on_exhausted = "park" is dead-lettered and its
// run parks on an exhausted wait that Waits and HumanWaits show; a redrive
// sends it back with its tries counted afresh and the same idempotency
// key, the run goes on, and the timeline says who redrove it and why.
func TestUnitRedriveResumesParkedRun(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{RetryBase: time.Second, RetryMax: 4 * time.Second}, unitRedriveSrc)
	ctx := context.Background()
	// Four planned failures: two tries before the park, then a try that
	// fails and one that answers — only if the redrive gave two tries.
	id := b.parkedOnExhaustion(t, "parks", `{"times": 3}`)
	dl := deadLetterOf(t, b, id)
	if dl.Node != "call" || dl.Tool != "kit.fail" || len(dl.Errors) != 2 || dl.Flow != "parks" {
		t.Fatalf("dead letter %+v: want node call, tool kit.fail, two errors", dl)
	}
	run, err := b.eng.Get(ctx, "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	waits, err := b.eng.Waits(ctx, run)
	if err != nil || len(waits) != 1 || waits[0].ID != "call@1.exhausted.1" || waits[0].Kind != WaitExhausted {
		t.Fatalf("waits %+v (%v): want call@1.exhausted.1 of kind exhausted", waits, err)
	}
	human, err := b.eng.HumanWaits(ctx, "alice", id)
	if err != nil || len(human) != 1 || human[0].ID != "call@1.exhausted.1" || !strings.Contains(string(human[0].Shown), dl.TaskID) {
		t.Fatalf("human waits %+v (%v): want the exhausted wait, showing the task", human, err)
	}
	// Parked with no deadline: time passing does not end it.
	b.clock.Advance(24 * time.Hour)
	if r, _ := b.eng.Get(ctx, "alice", id); r.Phase != store.PhaseWaiting || b.tools.Calls("kit.fail") != 2 {
		t.Fatalf("after a day: phase %s, %d calls; want still waiting after 2", r.Phase, b.tools.Calls("kit.fail"))
	}

	res := b.redriveOne(t, RedriveParams{TaskIDs: []string{dl.TaskID}, Reason: "fixed the upstream", RequestID: "fix-1"})
	if !res.Redriven || res.Err != nil || res.RunID != id || res.Wait != "call@1.exhausted.1" {
		t.Fatalf("redrive: %+v", res)
	}
	done := b.advanceUntil(t, id, 4*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	if done.Phase != store.PhaseCompleted || !strings.Contains(string(done.Output), `"tries":4`) {
		t.Fatalf("phase %s output %s error %+v: want completed on the 4th try", done.Phase, done.Output, done.Error)
	}
	b.kit.read(func() {
		if len(b.kit.fails) != 1 {
			t.Errorf("kit.fail saw %d idempotency keys, want 1 across the redrive: %v", len(b.kit.fails), b.kit.fails)
		}
	})
	evs, err := b.eng.Events(ctx, "alice", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		if ev.Type == evRedriven {
			found = ev.Detail["by"] == "alice" && ev.Detail["reason"] == "fixed the upstream" && ev.Detail["wait"] == "call@1.exhausted.1" && ev.Detail["request_id"] == "fix-1"
		}
	}
	if !found {
		t.Errorf("no redriven event with who, why and the wait in %v", b.events(t, id))
	}
	if dls, _ := b.eng.Ops().DeadLetterList(ctx, DeadLetterParams{Owner: "alice"}); len(dls) != 0 {
		t.Errorf("%d dead letters left after the redrive, want 0", len(dls))
	}

	// A second redrive of the same task, its run ended and its task gone:
	// there is no dead letter of it.
	again := b.redriveOne(t, RedriveParams{TaskIDs: []string{dl.TaskID}})
	if again.Redriven || again.Err == nil || again.Err.Code != CodeNotFound {
		t.Fatalf("second redrive: %+v, want E_NOT_FOUND", again)
	}
}

// A task redriven while its run is still parked is refused the second
// time as not dead; exhausted again, it parks on a wait of a new id.
func TestUnitRedriveTwiceAndParkAgain(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{RetryBase: time.Second, RetryMax: 4 * time.Second}, unitRedriveSrc)
	ctx := context.Background()
	id := b.parkedOnExhaustion(t, "parks_by_default", `{"times": 10}`)
	dl := deadLetterOf(t, b, id)
	if res := b.redriveOne(t, RedriveParams{TaskIDs: []string{dl.TaskID}}); !res.Redriven {
		t.Fatalf("first redrive: %+v", res)
	}
	// The run is back in the queue: the task is not dead.
	if res := b.redriveOne(t, RedriveParams{TaskIDs: []string{dl.TaskID}}); res.Redriven || res.Err == nil || res.Err.Code != CodeNotDead {
		t.Fatalf("second redrive: %+v, want E_NOT_DEAD", res)
	}
	b.advanceUntil(t, id, 4*time.Second, "parked again", func(r *store.Run) bool {
		return r.Phase == store.PhaseWaiting && count(b.events(t, id), evDeadLettered) == 2
	})
	run, _ := b.eng.Get(ctx, "alice", id)
	waits, err := b.eng.Waits(ctx, run)
	if err != nil || len(waits) != 1 || waits[0].ID != "call@1.exhausted.2" {
		t.Fatalf("waits %+v (%v): want call@1.exhausted.2", waits, err)
	}
	if n := b.tools.Calls("kit.fail"); n != 4 {
		t.Errorf("%d calls, want 4: two tries before each park", n)
	}
}

// A dead letter of a run that ended is refused E_RUN_ENDED, pointing at a
// fork; one of another owner's is E_NOT_FOUND and audited; bad requests
// are refused whole.
func TestUnitRedriveRefusals(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{RetryBase: time.Second, RetryMax: 4 * time.Second}, unitRedriveSrc)
	ctx := context.Background()
	ended := b.start(t, "fails", `{"times": 10}`, "")
	if r := b.advanceUntil(t, ended, 4*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() }); r.Phase != store.PhaseFailed {
		t.Fatalf("phase %s, want failed (no error wire)", r.Phase)
	}
	dl := deadLetterOf(t, b, ended)
	res := b.redriveOne(t, RedriveParams{TaskIDs: []string{dl.TaskID}})
	if res.Redriven || res.Err == nil || res.Err.Code != CodeRunEnded || !strings.Contains(res.Err.Message, "weir run fork "+ended+" --from call") {
		t.Fatalf("redrive of an ended run: %+v, want E_RUN_ENDED naming the fork", res)
	}
	if _, err := b.eng.Ops().DeadLetterList(ctx, DeadLetterParams{Owner: "alice"}); err != nil {
		t.Fatal(err)
	}

	parked := b.parkedOnExhaustion(t, "parks", `{"times": 10}`)
	pdl := deadLetterOf(t, b, parked)
	foreign := b.redriveOne(t, RedriveParams{Owner: "mallory", TaskIDs: []string{pdl.TaskID}})
	if foreign.Redriven || foreign.Err == nil || foreign.Err.Code != CodeNotFound {
		t.Fatalf("another owner's redrive: %+v, want E_NOT_FOUND", foreign)
	}
	if _, _, err := b.eng.Ops().DeadLetter(ctx, "mallory", pdl.TaskID); err == nil || err.(*Error).Code != CodeNotFound {
		t.Fatalf("another owner's read: %v, want E_NOT_FOUND", err)
	}
	var audited int
	if err := b.mem.View(ctx, func(tx store.Tx) error {
		evs, err := tx.EventList(store.EventListParams{RunID: AuditStream})
		for _, ev := range evs {
			if ev.Detail["caller"] == "mallory" {
				audited++
			}
		}
		return err
	}); err != nil || audited != 2 {
		t.Fatalf("%d audit events of mallory (%v), want 2", audited, err)
	}
	if dls, _ := b.eng.Ops().DeadLetterList(ctx, DeadLetterParams{Owner: "mallory"}); len(dls) != 0 {
		t.Fatalf("mallory lists %d dead letters", len(dls))
	}

	for name, p := range map[string]RedriveParams{
		"nothing named":      {Owner: "alice"},
		"ids and all":        {Owner: "alice", TaskIDs: []string{pdl.TaskID}, All: true},
		"flow and all":       {Owner: "alice", Flow: "parks", All: true},
		"ids and since":      {Owner: "alice", TaskIDs: []string{pdl.TaskID}, Since: unitEpoch},
		"empty id":           {Owner: "alice", TaskIDs: []string{""}},
		"reserved request":   {Owner: "alice", All: true, RequestID: "redrive:x"},
		"control in reason":  {Owner: "alice", All: true, Reason: "a\x1bb"},
		"too many task ids":  {Owner: "alice", TaskIDs: make([]string, MaxRedriveBatch+1)},
		"reason over bounds": {Owner: "alice", All: true, Reason: strings.Repeat("r", MaxRedriveReasonBytes+1)},
	} {
		if _, err := b.eng.Ops().Redrive(ctx, p); err == nil {
			t.Errorf("%s: accepted", name)
		} else if code := err.(*Error).Code; code != CodeBadRequest && code != CodeBadRequestID {
			t.Errorf("%s: %v, want E_BAD_REQUEST", name, err)
		}
	}
	if run, _ := b.eng.Get(ctx, "alice", parked); run.Phase != store.PhaseWaiting || deadLetterOf(t, b, parked) == nil {
		t.Fatal("a refused request changed the parked run")
	}
	// The selectors: by flow, the parked run's dead letter only (the ended
	// run's is refused, per task).
	ans, err := b.eng.Ops().Redrive(ctx, RedriveParams{Owner: "alice", Flow: "parks"})
	if err != nil || len(ans.Results) != 1 || !ans.Results[0].Redriven || ans.Results[0].RunID != parked {
		t.Fatalf("redrive --flow parks: %+v (%v)", ans, err)
	}
}

// A batch redrive is admitted within the owner's share of the queue: past
// its max_queued the rest are refused E_OWNER_QUOTA, per task, and stay
// dead-lettered for a later redrive.
func TestUnitRedriveWithinOwnerQueueShare(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Workers: 1, RetryBase: time.Second, RetryMax: 4 * time.Second,
		Owners: map[string]OwnerShare{"alice": {MaxQueued: 1}}}, unitRedriveSrc)
	ctx := context.Background()
	first := b.parkedOnExhaustion(t, "parks", `{"times": 2}`)
	second := b.parkedOnExhaustion(t, "parks", `{"times": 2}`)
	// The one slot is taken, so a redriven task stays queued.
	held := b.start(t, "held", `{"gate": "g"}`, "")
	b.wait(t, held, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	b.kitIs(t, "the held call at its gate", func(k *kit) bool { return k.atGate["g"] == 1 })

	ans, err := b.eng.Ops().Redrive(ctx, RedriveParams{Owner: "alice", All: true})
	if err != nil || len(ans.Results) != 2 {
		t.Fatalf("redrive --all: %+v (%v)", ans, err)
	}
	byRun := map[string]RedriveResult{}
	for _, r := range ans.Results {
		byRun[r.RunID] = r
	}
	if r := byRun[first]; !r.Redriven {
		t.Fatalf("first: %+v, want redriven", r)
	}
	if r := byRun[second]; r.Redriven || r.Err == nil || r.Err.Code != CodeOwnerQuota {
		t.Fatalf("second: %+v, want E_OWNER_QUOTA", r)
	}
	if deadLetterOf(t, b, second) == nil {
		t.Fatal("the refused dead letter is gone")
	}
	b.kit.open("g")
	for _, id := range []string{held, first} {
		if r := b.advanceUntil(t, id, 4*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() }); r.Phase != store.PhaseCompleted {
			t.Fatalf("%s: phase %s %+v", id, r.Phase, r.Error)
		}
	}
	if r := b.redriveOne(t, RedriveParams{Flow: "parks"}); !r.Redriven || r.RunID != second {
		t.Fatalf("later redrive of the second: %+v", r)
	}
	if r := b.advanceUntil(t, second, 4*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() }); r.Phase != store.PhaseCompleted {
		t.Fatalf("second: phase %s %+v", r.Phase, r.Error)
	}
}
