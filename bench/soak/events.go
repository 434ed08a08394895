package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The soak sends events beside the workload, through every kill: pings,
// each of which starts one run of a trigger, and replies, each of which
// wakes the one run of the event kind waiting for it. A reply is often
// sent before its run reached its wait, or before the run was even
// answered (the event is kept for the wait that opens on it), and both
// kinds are sent again with their ids (a sender's retry: the same event,
// nothing new). The event-accepted and event-triggered failpoints kill
// the daemon between an event's acceptance and its triggers' runs, and
// between those runs and the event's record of them. The promises: every
// event started at most one run per trigger, and one for each accepted
// ping; a reply accepted is never lost (its run completes with it).

const invEvents = "every event started one run per trigger, none twice; no reply lost"

const (
	pingEvent   = "soak.ping"
	pingTrigger = "soak_ping"
	pingFlow    = "soak_ping"
	replyEvent  = "soak.reply"
)

var pingSrc = fmt.Sprintf(`
flow(
    name = %[1]q,
    nodes = [task("echo", tool = "testkit.echo", args = lambda ctx: {"ping": ctx.input["ping"]})],
)

on_event(%[2]q, flow = %[1]q, name = %[3]q)
`, pingFlow, pingEvent, pingTrigger)

// eventKind waits for the reply event whose key is its request id; the
// replier sends one for every run of it, the drain's last ones too.
var eventKind = &kind{
	name: "event", flow: "soak_event", weight: 1,
	src: fmt.Sprintf(`
flow(
    name = "soak_event",
    nodes = [
        wait("reply", event = %q, match = lambda ctx: ctx.input["id"], timeout = "1h", next = "ok"),
        task("ok", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "reply": ctx.results["reply"]}),
    ],
)
`, replyEvent),
	input: idInput,
	check: completedWith(func(in map[string]any) map[string]any {
		return map[string]any{"id": in["id"], "reply": map[string]any{"id": in["id"]}}
	}),
}

// eventsSent is what the client knows of the events it sent: the pings
// and replies whose send was answered accepted (a send whose answer a
// kill took may or may not have been).
type eventsSent struct {
	nextPing int
	pings    map[int]bool
	replied  map[string]bool // by the waiting run's request id
	early    int             // replies accepted before their run was answered
}

func (w *world) sent() *eventsSent {
	if w.events == nil {
		w.events = &eventsSent{pings: map[int]bool{}, replied: map[string]bool{}}
	}
	return w.events
}

func pingID(n int) string { return "ping-" + strconv.Itoa(n) }

// sendPings sends a new ping, and now and then one sent before again,
// which must be answered as that event.
func sendPings(ctx context.Context, w *world, c *client.Client) {
	w.mu.Lock()
	ev := w.sent()
	var n int
	if ev.nextPing > 0 && w.rng.IntN(4) == 0 {
		n = w.rng.IntN(ev.nextPing) + 1
	} else {
		ev.nextPing++
		n = ev.nextPing
	}
	again := ev.pings[n]
	w.mu.Unlock()
	res, err := c.SendEvent(ctx, apitypes.EventSendRequest{ID: pingID(n), Name: pingEvent, Payload: json.RawMessage(`{"ping":` + strconv.Itoa(n) + `}`)})
	if err != nil {
		countRefusal(w, "ping", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case again && !res.Duplicate:
		w.inline[invEvents] = append(w.inline[invEvents], fmt.Sprintf("ping %d sent again after an accepted send was accepted as a new event", n))
	case again:
		w.counts["pings re-sent"]++
	}
	w.sent().pings[n] = true
}

// sendReplies sends the reply of a run of the event kind, answered or
// not, that has none accepted yet, and now and then one accepted before
// again.
func sendReplies(ctx context.Context, w *world, c *client.Client) {
	w.mu.Lock()
	var todo, done []*submission
	for _, s := range w.subs {
		if s.kind != eventKind {
			continue
		}
		if w.sent().replied[s.reqID] {
			done = append(done, s)
		} else {
			todo = append(todo, s)
		}
	}
	var s *submission
	switch {
	case len(done) > 0 && (len(todo) == 0 || w.rng.IntN(4) == 0):
		s = done[w.rng.IntN(len(done))]
	case len(todo) > 0:
		s = todo[w.rng.IntN(len(todo))]
	}
	w.mu.Unlock()
	if s != nil {
		sendReply(ctx, w, c, s)
	}
}

// replyAll sends every reply not yet accepted (the drain's part: every
// run of the event kind gets its reply and may end).
func replyAll(ctx context.Context, w *world, c *client.Client) {
	w.mu.Lock()
	var todo []*submission
	for _, s := range w.subs {
		if s.kind == eventKind && !w.sent().replied[s.reqID] {
			todo = append(todo, s)
		}
	}
	w.mu.Unlock()
	for _, s := range todo {
		sendReply(ctx, w, c, s)
	}
}

func sendReply(ctx context.Context, w *world, c *client.Client, s *submission) {
	w.mu.Lock()
	again, known := w.sent().replied[s.reqID], s.runID != ""
	w.mu.Unlock()
	res, err := c.SendEvent(ctx, apitypes.EventSendRequest{ID: "reply-" + s.reqID, Name: replyEvent, Key: s.reqID, Payload: json.RawMessage(`{"id":"` + s.reqID + `"}`)})
	if err != nil {
		countRefusal(w, "reply", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case again && !res.Duplicate:
		w.inline[invEvents] = append(w.inline[invEvents], fmt.Sprintf("the reply of %s sent again after an accepted send was accepted as a new event", s.reqID))
	case again:
		w.counts["replies re-sent"]++
	case !known:
		w.sent().early++
	}
	w.sent().replied[s.reqID] = true
}

// countRefusal counts a send the daemon refused or did not answer: down,
// draining or full is the chaos's; a refusal of anything else breaks the
// events' contract.
func countRefusal(w *world, what string, err error) {
	switch code := client.ErrorCode(err); code {
	case "":
		// No answer: the daemon is down.
	case engine.CodeDraining, engine.CodeQueueFull, engine.CodeStorage, engine.CodeOwnerQuota:
		w.count(what + " refused " + code)
	default:
		w.violate(invEvents, "sending a %s: %v", what, err)
	}
}

// settleEvents waits, before the drain, until no event's triggers are
// still to start (the events service starts what a kill left, every few
// seconds), so the drain waits for their runs too.
func settleEvents(ctx context.Context, c *client.Client) error {
	deadline := time.Now().Add(time.Minute)
	for {
		evs, err := allEvents(ctx, c)
		if err != nil {
			return err
		}
		pending := 0
		for _, ev := range evs {
			if ev.TriggersPending {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d events still have triggers to start a minute after the chaos", pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func allEvents(ctx context.Context, c *client.Client) ([]apitypes.OwnerEvent, error) {
	var out []apitypes.OwnerEvent
	var after uint64
	for {
		page, err := c.Events(ctx, client.EventListOptions{After: after, Limit: apitypes.MaxListLimit})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < apitypes.MaxListLimit {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// checkEvents: every run a trigger started is the ping trigger's, for a
// ping that was sent, one per ping, and echoes its ping; every accepted
// ping has its run. (A lost reply shows as its run stuck at its wait,
// which the drain waits for: checkLost's.)
func checkEvents(w *world, f *final) []string {
	var bad []string
	byPing := map[int]string{}
	w.mu.Lock()
	sent := w.sent()
	w.mu.Unlock()
	for _, v := range f.triggered {
		id, ok := strings.CutPrefix(v.RequestID, "event:")
		id, trigger, ok2 := strings.Cut(id, ":")
		n, err := strconv.Atoi(strings.TrimPrefix(id, "ping-"))
		if !ok || !ok2 || trigger != pingTrigger || err != nil || v.StartedBy != "trigger:"+pingTrigger || v.Flow != pingFlow || n < 1 || n > sent.nextPing {
			bad = append(bad, fmt.Sprintf("run %s (%s, request id %q, started by %q) is not a run of trigger %s for a ping sent", v.ID, v.Flow, v.RequestID, v.StartedBy, pingTrigger))
			continue
		}
		if other, dup := byPing[n]; dup {
			bad = append(bad, fmt.Sprintf("ping %d started two runs of its trigger: %s and %s", n, other, v.ID))
			continue
		}
		byPing[n] = v.ID
		if v.Phase.Terminal() && !outputEquals(&v, map[string]any{"ping": float64(n)}) && !killedTooOften(&v, f.events[v.ID]) {
			bad = append(bad, fmt.Sprintf("run %s of ping %d ended %s with output %s (error %+v), want the ping echoed", v.ID, n, v.Phase, v.Output, v.Error))
		}
	}
	var missing []int
	for n := range sent.pings {
		if byPing[n] == "" {
			missing = append(missing, n)
		}
	}
	sort.Ints(missing)
	for _, n := range missing {
		bad = append(bad, fmt.Sprintf("ping %d was accepted and started no run of its trigger", n))
	}
	if len(sent.pings) == 0 {
		bad = append(bad, "no ping was accepted: the invariant held over nothing")
	}
	return bad
}

func eventsSummary(w *world, f *final) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	sent := w.sent()
	return fmt.Sprintf("%d pings accepted (%d sent again, each the same event), each started one run of its trigger through %d kills (event-accepted %d, event-triggered %d); %d replies accepted (%d before their run was answered, %d sent again), each woke its run, %d completed",
		len(sent.pings), w.counts["pings re-sent"], sumCounts(f.kills), f.kills["event-accepted"], f.kills["event-triggered"],
		len(sent.replied), sent.early, w.counts["replies re-sent"], countFlowPhase(f, eventKind.flow, apitypes.PhaseCompleted))
}
