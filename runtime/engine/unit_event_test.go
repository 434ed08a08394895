package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine/internal/events"
	"github.com/weirhq/weir/runtime/store"
)

const unitEventSrc = `
flow(name = "awaits", nodes = [
    wait("updated", event = "ticket.updated", match = lambda ctx: ctx.input["t"], timeout = "1h", next = "after", error = "late"),
    task("after", tool = "kit.echo", args = lambda ctx: {"got": ctx.results["updated"]}),
    task("late", tool = "kit.echo", args = lambda ctx: {"late": True}),
])

flow(name = "triage", nodes = [
    task("a", tool = "kit.echo", args = lambda ctx: {"input": ctx.input}),
])

on_event("ticket.created", flow = "triage",
    input = lambda ev: {"ticket": ev["key"], "title": ev["payload"]["title"]},
    filter = lambda ev: ev["payload"].get("title", "") != "spam")
`

// setupEvents is a unit engine with unitEventSrc registered as alice's.
func setupEvents(t *testing.T) *testBundle {
	t.Helper()
	b := setupUnit(t, Config{}, "")
	res, err := b.eng.RegisterAs(context.Background(), "alice", []SourceFile{{Path: "ev.star", Src: unitEventSrc}})
	if err != nil || res.Diagnostics.Err() != nil {
		t.Fatalf("register: %v %v", err, res.Diagnostics)
	}
	if len(res.Triggers) != 1 || res.Triggers[0].Name != "triage_on_ticket_created" {
		t.Fatalf("registered triggers %+v", res.Triggers)
	}
	return b
}

func (b *testBundle) send(t *testing.T, owner, id, name, key, payload string) *EventSendResult {
	t.Helper()
	res, err := b.eng.Ops().EventSend(context.Background(), EventSendParams{Owner: owner, ID: id, Name: name, Key: key, Payload: json.RawMessage(payload)})
	if err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
	return res
}

// eventWaiting waits until alice's run id is parked on its wait for an
// event.
func (b *testBundle) eventWaiting(t *testing.T, id string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, func() error {
		run := b.runRecord(t, id)
		ws, err := b.eng.Waits(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.Kind == WaitEvent {
				return nil
			}
		}
		return fmt.Errorf("run %s (%s) waits for %+v, not an event", id, run.Phase, ws)
	})
}

// An event wakes its owner's waits on its name and key, and no one
// else's; the payload is the wait's result. The same event again
// delivers nothing more; the same id with another payload is refused.
func TestUnitEventWakesItsWait(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	id := b.start(t, "awaits", `{"t": "T-1"}`, "")
	b.eventWaiting(t, id)
	if res := b.send(t, "alice", "e1", "ticket.updated", "T-2", `{"x": 0}`); len(res.Event.Delivered) != 0 {
		t.Fatalf("an event of another key was delivered: %+v", res.Event)
	}
	if res := b.send(t, "bob", "e2", "ticket.updated", "T-1", `{"x": 0}`); len(res.Event.Delivered) != 0 {
		t.Fatalf("bob's event reached alice's run: %+v", res.Event)
	}
	res := b.send(t, "alice", "e3", "ticket.updated", "T-1", `{"x": 1}`)
	if want := id + "/updated@1"; len(res.Event.Delivered) != 1 || res.Event.Delivered[0] != want || res.Duplicate {
		t.Fatalf("delivered %v, want [%s]", res.Event.Delivered, want)
	}
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"got":{"x":1}`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
	if again := b.send(t, "alice", "e3", "ticket.updated", "T-1", `{"x": 1}`); !again.Duplicate || len(again.Event.Delivered) != 1 {
		t.Errorf("sent again: %+v", again)
	}
	_, err := b.eng.Ops().EventSend(context.Background(), EventSendParams{Owner: "alice", ID: "e3", Name: "ticket.updated", Key: "T-1", Payload: json.RawMessage(`{"x": 2}`)})
	if codeOf(err) != CodeDedupConflict {
		t.Errorf("same id, other payload: %v, want %s", err, CodeDedupConflict)
	}
	// The keys the other two events carried are kept for a later wait.
	kept, err := b.eng.Ops().Events(context.Background(), EventListParams{Owner: "alice", Undelivered: true})
	if err != nil || len(kept) != 1 || kept[0].ID != "e1" {
		t.Errorf("alice's undelivered events %+v %v, want e1", kept, err)
	}
}

// An event sent before its wait opens is kept and taken by the first
// wait that opens on its name and key, once: the next wait parks.
func TestUnitEventBeforeItsWaitIsKept(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	b.send(t, "alice", "early", "ticket.updated", "T-9", `{"early": true}`)
	first := b.start(t, "awaits", `{"t": "T-9"}`, "")
	if run := b.waitTerminal(t, first); run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"early":true`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
	second := b.start(t, "awaits", `{"t": "T-9"}`, "")
	b.eventWaiting(t, second)
	if kept, _ := b.eng.Ops().Events(context.Background(), EventListParams{Owner: "alice", Undelivered: true}); len(kept) != 0 {
		t.Errorf("the taken event is still undelivered: %+v", kept)
	}
	if evs := b.events(t, first); !strings.Contains(strings.Join(evs, " "), evEventReceived) {
		t.Errorf("the first run's timeline %v has no %s", evs, evEventReceived)
	}
}

// Every wait open on the name and key when an event is accepted receives
// it.
func TestUnitEventReachesEveryOpenWait(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	ids := []string{b.start(t, "awaits", `{"t": "T-3"}`, ""), b.start(t, "awaits", `{"t": "T-3"}`, "")}
	for _, id := range ids {
		b.eventWaiting(t, id)
	}
	if res := b.send(t, "alice", "both", "ticket.updated", "T-3", `{"n": 3}`); len(res.Event.Delivered) != 2 {
		t.Fatalf("delivered to %v, want both waits", res.Event.Delivered)
	}
	for _, id := range ids {
		if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"n":3`) {
			t.Errorf("run %s: phase %s output %s", id, run.Phase, run.Output)
		}
	}
}

// A wait whose timeout passes takes its error wire and closes on the
// slot: an event after it is kept, not delivered to the ended wait.
func TestUnitEventWaitTimesOut(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	id := b.start(t, "awaits", `{"t": "T-4"}`, "")
	b.eventWaiting(t, id)
	run := b.advanceUntil(t, id, 10*time.Minute, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"late":true`) {
		t.Fatalf("phase %s output %s error %+v", run.Phase, run.Output, run.Error)
	}
	if res := b.send(t, "alice", "after", "ticket.updated", "T-4", `{}`); len(res.Event.Delivered) != 0 {
		t.Errorf("an event after the timeout was delivered to %v", res.Event.Delivered)
	}
}

// A trigger starts one run per event, with the input its function
// computes and the request id derived from the event and the trigger; an
// event sent again starts nothing; its filter skips an event with the
// reason kept on the event; another owner's event of that name starts
// none of alice's runs.
func TestUnitTriggerStartsOneRunPerEvent(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	ctx := context.Background()
	res := b.send(t, "alice", "t1", "ticket.created", "T-7", `{"title": "printer"}`)
	if len(res.Event.Started) != 1 || res.Event.Started[0].RunID == "" || res.Event.TriggersPending {
		t.Fatalf("started %+v pending %v", res.Event.Started, res.Event.TriggersPending)
	}
	runID := res.Event.Started[0].RunID
	run := b.runRecord(t, runID)
	if run.Owner != "alice" || run.Flow != "triage" || run.StartedBy != "trigger:triage_on_ticket_created" ||
		run.RequestID != TriggerRequestID("t1", "triage_on_ticket_created") || string(run.Input) != `{"ticket":"T-7","title":"printer"}` {
		t.Fatalf("run %+v", run)
	}
	if again := b.send(t, "alice", "t1", "ticket.created", "T-7", `{"title": "printer"}`); !again.Duplicate || again.Event.Started[0].RunID != runID {
		t.Errorf("sent again: %+v", again.Event)
	}
	if spam := b.send(t, "alice", "t2", "ticket.created", "T-8", `{"title": "spam"}`); len(spam.Event.Started) != 1 || spam.Event.Started[0].Skipped != "filtered out" {
		t.Errorf("filtered: %+v", spam.Event.Started)
	}
	if broken := b.send(t, "alice", "t3", "ticket.created", "T-9", `{"no_title": 1}`); len(broken.Event.Started) != 1 || !strings.Contains(broken.Event.Started[0].Skipped, "input: ") {
		t.Errorf("an input function that fails: %+v", broken.Event.Started)
	}
	if bob := b.send(t, "bob", "t1", "ticket.created", "T-7", `{"title": "printer"}`); len(bob.Event.Started) != 0 {
		t.Errorf("bob's event started %+v", bob.Event.Started)
	}
	runs, err := b.eng.List(ctx, "alice", store.RunListParams{Flow: "triage"})
	if err != nil || len(runs) != 1 {
		t.Errorf("alice's triage runs %d (%v), want 1", len(runs), err)
	}
}

// An event whose triggers' runs were not started (the daemon died between
// its acceptance and the starts) is started by the events service, once;
// events older than the retention are removed by it.
func TestUnitEventsServiceStartsPendingAndExpires(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	ctx := context.Background()
	b.eng.services.StopNamed("events") // the test drives the passes
	ev := &store.OwnerEvent{Owner: "alice", ID: "p1", Name: "ticket.created", Key: "T-1", Payload: json.RawMessage(`{"title":"x"}`),
		PayloadHash: "h", TriggersPending: true, AcceptedAt: b.clock.Now()}
	if err := b.st.Update(ctx, func(tx store.Tx) error { return tx.OwnerEventPut(ev) }); err != nil {
		t.Fatal(err)
	}
	svc := events.New(eventsHost{b.eng}, b.clock)
	if res := svc.RunOnce(ctx); res.Started != 1 || res.Pending != 0 {
		t.Fatalf("pass %+v", res)
	}
	if res := svc.RunOnce(ctx); res.Started != 0 {
		t.Fatalf("second pass started again: %+v", res)
	}
	if _, err := b.eng.GetByRequestID(ctx, "alice", TriggerRequestID("p1", "triage_on_ticket_created")); err != nil {
		t.Fatalf("the pending trigger's run: %v", err)
	}
	b.send(t, "alice", "kept", "ticket.updated", "T-5", `{}`)
	b.clock.Advance(DefaultEventRetention + time.Minute)
	if res := svc.RunOnce(ctx); res.Expired != 2 {
		t.Fatalf("expired %d, want both events", res.Expired)
	}
	id := b.start(t, "awaits", `{"t": "T-5"}`, "")
	b.eventWaiting(t, id) // the expired event is not taken
}

// Bad events are refused with the reason and store nothing.
func TestUnitEventSendRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	ctx := context.Background()
	big := `{"s": "` + strings.Repeat("x", MaxEventPayloadBytes) + `"}`
	for name, p := range map[string]EventSendParams{
		"bad name":    {Owner: "alice", ID: "x", Name: "Ticket Created"},
		"no id":       {Owner: "alice", Name: "ticket.created"},
		"too large":   {Owner: "alice", ID: "x", Name: "ticket.created", Payload: json.RawMessage(big)},
		"not json":    {Owner: "alice", ID: "x", Name: "ticket.created", Payload: json.RawMessage(`{`)},
		"control key": {Owner: "alice", ID: "x", Name: "ticket.created", Key: "a\x00b"},
	} {
		if _, err := b.eng.Ops().EventSend(ctx, p); codeOf(err) != CodeBadRequest {
			t.Errorf("%s: %v, want %s", name, err, CodeBadRequest)
		}
	}
	if evs, _ := b.eng.Ops().Events(ctx, EventListParams{Owner: "alice"}); len(evs) != 0 {
		t.Errorf("refused events were stored: %+v", evs)
	}
}

// fillSlot stores MaxEventSlotWaits waits of alice's on ticket.updated
// T-5, each of run runID (a run id that names no run: waits left by runs
// that ended or were removed).
func (b *testBundle) fillSlot(t *testing.T, runID string) {
	t.Helper()
	slot := &store.EventSlot{Owner: "alice", Name: "ticket.updated", Key: "T-5"}
	for i := range MaxEventSlotWaits {
		slot.Waits = append(slot.Waits, store.EventSlotWait{RunID: runID, WaitID: fmt.Sprintf("w@%d", i+1), Since: b.clock.Now()})
	}
	if err := b.mem.Update(context.Background(), func(tx store.Tx) error { return tx.EventSlotPut(slot) }); err != nil {
		t.Fatal(err)
	}
}

// A slot full of the waits of runs that no longer wait (cancelled, ended
// another way) does not refuse a new wait: they are dropped when the slot
// is full, and the new wait opens and receives its event.
func TestUnitEventWaitsOfEndedRunsDoNotFillTheSlot(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	b.fillSlot(t, "run_gone")
	id := b.start(t, "awaits", `{"t": "T-5"}`, "")
	b.eventWaiting(t, id)
	if res := b.send(t, "alice", "e5", "ticket.updated", "T-5", `{"n": 5}`); len(res.Event.Delivered) != 1 {
		t.Fatalf("delivered to %v, want the new wait", res.Event.Delivered)
	}
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s error %+v", run.Phase, run.Error)
	}
}

// The bound holds for waits whose runs still wait: the next run to reach
// a wait on a full slot takes its error wire with E_EVENT_WAITS.
func TestUnitEventWaitsBoundedPerSlot(t *testing.T) {
	t.Parallel()
	b := setupEvents(t)
	first := b.start(t, "awaits", `{"t": "T-5"}`, "")
	b.eventWaiting(t, first)
	b.fillSlot(t, first)
	next := b.start(t, "awaits", `{"t": "T-5"}`, "")
	run := b.waitTerminal(t, next)
	// The fake clock never moved: the error wire is the bound's, not the
	// timeout's.
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"late":true`) {
		t.Fatalf("the wait on a full slot: phase %s output %s error %+v, want its error wire", run.Phase, run.Output, run.Error)
	}
}
