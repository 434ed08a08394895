package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/internal/requestid"
	"github.com/weirhq/weir/runtime/store"
)

// Events (docs/design.md §8.11): an owner sends an event (POST
// /v1/events, `weir event send`, a webhook); it starts a run of each of
// the owner's triggers on its name and wakes the owner's runs waiting for
// its name and key. Acceptance, the deliveries to open waits and the
// keeping of an event no wait received are one transaction; the
// triggers' runs are started after it, each once by its derived request
// id, and an event whose runs were not all started (a crash, a refusal
// of admission) stays marked TriggersPending for the events service.
const (
	// MaxEventPayloadBytes bounds an event's payload.
	MaxEventPayloadBytes = 256 << 10
	// MaxOwnerEvents bounds the events kept per owner: accepting one
	// more drops the oldest.
	MaxOwnerEvents = 10_000
	// MaxEventSlotWaits bounds the waits open on one event name and key.
	MaxEventSlotWaits = 1_000
	// DefaultEventRetention is how long an event is kept when the
	// config says nothing (Config.EventRetention).
	DefaultEventRetention = 24 * time.Hour
)

// EventSendParams is one event an owner sends.
type EventSendParams struct {
	Owner string
	// ID is the sender's id of the event: the same id again is the same
	// event (a sender's retry, a webhook provider's redelivery).
	ID   string
	Name string
	// Key is what a wait's match must equal to receive the event.
	Key     string
	Payload json.RawMessage
}

// EventSendResult is an accepted event: the stored record (its
// deliveries and, once done, what its triggers started) and whether it
// had been accepted before under its id.
type EventSendResult struct {
	Event     *store.OwnerEvent
	Duplicate bool
}

// EventSend accepts an event of p.Owner's. An id sent before with the
// same name, key and payload answers the stored event (and starts the
// runs a crash left unstarted); with another, E_DEDUP_CONFLICT. An event
// nothing listens to is accepted and kept for the event retention.
func (o *Ops) EventSend(ctx context.Context, p EventSendParams) (*EventSendResult, error) {
	e := o.e
	if err := e.admission.checkDisk(); err != nil {
		return nil, err
	}
	if err := e.owners.checkStorage(p.Owner, e.cfg.Load().ShareOf(p.Owner)); err != nil {
		return nil, err
	}
	ev, err := newOwnerEvent(p)
	if err != nil {
		return nil, err
	}
	now := e.clock.Now()
	ev.AcceptedAt = now
	var dup, conflict bool
	var dropped int
	err = e.st.Update(ctx, func(tx store.Tx) error {
		dup, conflict, dropped = false, false, 0
		old, err := tx.OwnerEventGet(ev.Owner, ev.ID)
		switch {
		case err == nil:
			if old.PayloadHash != ev.PayloadHash {
				conflict = true
				return errSkip
			}
			dup, *ev = true, *old
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if dropped, err = boundOwnerEventsTx(tx, ev.Owner); err != nil {
			return err
		}
		triggers, err := tx.TriggerListByEvent(ev.Owner, ev.Name)
		if err != nil {
			return err
		}
		ev.TriggersPending = len(triggers) > 0
		if err := deliverEventTx(tx, ev, now); err != nil {
			return err
		}
		return tx.OwnerEventPut(ev)
	})
	switch {
	case conflict:
		return nil, protocolErr(CodeDedupConflict, "event id %q was accepted before with another name, key or payload; an event id names one event", ev.ID)
	case err != nil:
		return nil, e.admission.storageFailed(err)
	}
	e.stats.eventsDropped(dropped)
	if !dup && len(ev.Delivered) > 0 {
		e.wake.kick()
	}
	failpoint.Hit(failpoint.EventAccepted)
	if ev.TriggersPending {
		if err := (eventsHost{e}).StartTriggers(ctx, ev); err != nil {
			// The event is accepted: the events service starts what
			// is left.
			e.log.Warn("starting an event's triggers", "owner", ev.Owner, "event", ev.ID, "error", err)
		}
	}
	return &EventSendResult{Event: ev, Duplicate: dup}, nil
}

// newOwnerEvent checks p and makes the event it sends, its payload in
// canonical form ({} when none).
func newOwnerEvent(p EventSendParams) (*store.OwnerEvent, error) {
	if !flows.ValidEventName(p.Name) {
		return nil, protocolErr(CodeBadRequest, "event name %.130q: want dot-separated lower-case identifiers (ticket.created), at most %d bytes", p.Name, flows.MaxEventNameBytes)
	}
	if p.ID == "" {
		return nil, protocolErr(CodeBadRequest, "an event needs an id: the sender's, so that sending it again is the same event")
	}
	if err := store.CheckOwnerEvent(&store.OwnerEvent{Owner: p.Owner, ID: p.ID}); err != nil {
		return nil, protocolErr(CodeBadRequest, "%v", err)
	}
	if err := CheckPrintable("event id", p.ID, store.MaxIDBytes); err != nil {
		return nil, err
	}
	if err := CheckPrintable("event key", p.Key, store.MaxIDBytes); err != nil {
		return nil, err
	}
	if err := store.CheckEventSlot(&store.EventSlot{Owner: p.Owner, Name: p.Name, Key: p.Key}); err != nil {
		return nil, protocolErr(CodeBadRequest, "%v", err)
	}
	if len(p.Payload) > MaxEventPayloadBytes {
		return nil, protocolErr(CodeBadRequest, "event payload of %d bytes exceeds the limit of %d", len(p.Payload), MaxEventPayloadBytes)
	}
	payload := json.RawMessage("{}")
	if len(p.Payload) > 0 {
		canon, err := canonicalInput(p.Payload)
		if err != nil {
			return nil, protocolErr(CodeBadRequest, "event payload: %s", err.(*Error).Message)
		}
		payload = canon
	}
	sum := sha256.Sum256(mustJSON([]any{p.Name, p.Key, payload}))
	return &store.OwnerEvent{Owner: p.Owner, ID: p.ID, Name: p.Name, Key: p.Key, Payload: payload,
		PayloadHash: hex.EncodeToString(sum[:])}, nil
}

// deliverEventTx hands ev to every wait open on its name and key: each
// wait's run finds it among its pending events and is woken through the
// one wake path. A wait whose run has ended is dropped from the slot. An
// event no wait received is kept in the slot for the first wait to open.
func deliverEventTx(tx store.Tx, ev *store.OwnerEvent, now time.Time) error {
	slot, err := eventSlotTx(tx, ev.Owner, ev.Name, ev.Key)
	if err != nil {
		return err
	}
	open := slot.Waits[:0:0]
	for _, w := range slot.Waits {
		t, err := eventWaiterTx(tx, ev.Owner, w.RunID)
		if err != nil {
			return err
		}
		if t == nil {
			continue
		}
		w.Pending = append(w.Pending, ev.ID)
		if _, err := wakeParkedTx(tx, t, now); err != nil {
			return err
		}
		ev.Delivered = append(ev.Delivered, w.RunID+"/"+w.WaitID)
		open = append(open, w)
	}
	slot.Waits = open
	if len(ev.Delivered) == 0 {
		slot.Kept = append(slot.Kept, ev.ID)
	}
	return tx.EventSlotPut(slot)
}

// eventSlotTx reads the slot of (owner, name, key), empty if none.
func eventSlotTx(tx store.Tx, owner, name, key string) (*store.EventSlot, error) {
	slot, err := tx.EventSlotGet(owner, name, key)
	if errors.Is(err, store.ErrNotFound) {
		return &store.EventSlot{Owner: owner, Name: name, Key: key}, nil
	}
	return slot, err
}

// eventWaiterTx is the step task of owner's run runID, or nil when the run
// no longer waits (ended, removed, or not owner's).
func eventWaiterTx(tx store.Tx, owner, runID string) (*store.Task, error) {
	run, err := tx.RunGet(runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case run.Owner != owner || run.Phase.Terminal():
		return nil, nil
	}
	tasks, err := tx.TaskListByRun(runID)
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		if t.Kind == store.TaskStep {
			return t, nil
		}
	}
	return nil, nil
}

// boundOwnerEventsTx drops owner's oldest events until one more fits
// MaxOwnerEvents, and says how many it dropped.
func boundOwnerEventsTx(tx store.Tx, owner string) (int, error) {
	n, err := tx.OwnerEventCount(owner)
	if err != nil || n < MaxOwnerEvents {
		return 0, err
	}
	oldest, err := tx.OwnerEventList(store.OwnerEventListParams{Owner: owner, Limit: n - MaxOwnerEvents + 1})
	if err != nil {
		return 0, err
	}
	for _, ev := range oldest {
		if err := dropOwnerEventTx(tx, ev); err != nil {
			return 0, err
		}
	}
	return len(oldest), nil
}

// dropOwnerEventTx removes ev and every mention of it in its slot (kept,
// or pending at a wait): what retention and the bound on kept events do.
func dropOwnerEventTx(tx store.Tx, ev *store.OwnerEvent) error {
	slot, err := eventSlotTx(tx, ev.Owner, ev.Name, ev.Key)
	if err != nil {
		return err
	}
	without := func(ids []string) []string {
		return slices.DeleteFunc(ids, func(id string) bool { return id == ev.ID })
	}
	slot.Kept = without(slot.Kept)
	for i := range slot.Waits {
		slot.Waits[i].Pending = without(slot.Waits[i].Pending)
	}
	if err := tx.EventSlotPut(slot); err != nil {
		return err
	}
	err = tx.OwnerEventDelete(ev.Owner, ev.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// TriggerRequestID is the request id of the run trigger starts for the
// event id (DESIGN §12): an event sent again starts nothing new.
func TriggerRequestID(eventID, trigger string) string {
	return requestid.Derive("event:", eventID, trigger)
}

// StartTriggers starts the run of each of the owner's triggers on ev's
// name, each once by its derived request id, records what each did on
// the event and clears TriggersPending. A refusal that a later try could
// change (admission) leaves the event pending, for the events service.
func (h eventsHost) StartTriggers(ctx context.Context, ev *store.OwnerEvent) error {
	e := h.e
	var triggers []*store.Trigger
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		triggers, err = tx.TriggerListByEvent(ev.Owner, ev.Name)
		return err
	}); err != nil {
		return err
	}
	var started []store.EventStart
	var retry error
	for _, t := range triggers {
		s, err := h.startTrigger(ctx, t, ev)
		if err != nil {
			retry = errors.Join(retry, fmt.Errorf("trigger %s: %w", t.Name, err))
			continue
		}
		started = append(started, s)
	}
	if retry != nil {
		return retry
	}
	failpoint.Hit(failpoint.EventTriggered)
	return e.st.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.OwnerEventGet(ev.Owner, ev.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // retention removed it meanwhile
		}
		if err != nil {
			return err
		}
		cur.TriggersPending, cur.Started = false, started
		*ev = *cur
		return tx.OwnerEventPut(cur)
	})
}

// startTrigger starts t's run for ev, or says why it starts none: its
// filter said no, or the start can never succeed (its input function
// fails, its flow is gone or refuses the input).
func (h eventsHost) startTrigger(ctx context.Context, t *store.Trigger, ev *store.OwnerEvent) (store.EventStart, error) {
	e := h.e
	out := store.EventStart{Trigger: t.Name}
	rid := TriggerRequestID(ev.ID, t.Name)
	if res, err := startedBefore(ctx, e, ev.Owner, rid); res != nil || err != nil {
		if res != nil {
			out.RunID = res.RunID
		}
		return out, err
	}
	arg := map[string]any{"name": ev.Name, "id": ev.ID, "key": ev.Key, "payload": ev.Payload}
	// call calls one of t's functions on the event; skipped says why a
	// failure starts nothing.
	call := func(what, fn string) (v any, skipped string, err error) {
		v, err = e.book.declCall(ctx, ev.Owner, t.SourceHash, flows.CallableRef{Decl: flows.DeclTrigger + t.Name, Param: fn}, arg)
		var failed *declFailed
		if errors.As(err, &failed) {
			return nil, what + ": " + failed.Error(), nil
		}
		return v, "", err
	}
	if t.FilterFn != "" {
		v, skipped, err := call("filter", t.FilterFn)
		switch {
		case err != nil:
			return out, err
		case skipped != "":
			out.Skipped = skipped
			return out, nil
		case !truthy(v):
			out.Skipped = "filtered out"
			return out, nil
		}
	}
	input := ev.Payload
	if t.InputFn != "" {
		v, skipped, err := call("input", t.InputFn)
		if err != nil || skipped != "" {
			out.Skipped = skipped
			return out, err
		}
		if input, err = json.Marshal(v); err != nil {
			out.Skipped = "input: " + err.Error()
			return out, nil
		}
	}
	res, err := e.Submit(ctx, StartRequest{Owner: ev.Owner, Flow: t.Flow, Input: input, RequestID: rid, startedBy: "trigger:" + t.Name})
	var ee *Error
	if errors.As(err, &ee) && slices.Contains(tickNeverStarts, ee.Code) {
		out.Skipped = ee.Code + ": " + ee.Message
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.RunID = res.RunID
	return out, nil
}

// EventListParams select owner's events.
type EventListParams struct {
	Owner string
	// AfterSeq pages: only events after it.
	AfterSeq uint64
	// Undelivered lists only the events no wait received.
	Undelivered bool
	Limit       int
}

// Events lists owner's kept events in the order accepted.
func (o *Ops) Events(ctx context.Context, p EventListParams) ([]*store.OwnerEvent, error) {
	if p.Owner == "" {
		return nil, protocolErr(CodeBadRequest, "events are listed by their owner")
	}
	var out []*store.OwnerEvent
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.OwnerEventList(store.OwnerEventListParams{Owner: p.Owner, AfterSeq: p.AfterSeq, Undelivered: p.Undelivered, Limit: p.Limit})
		return err
	})
	if err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	return out, nil
}

// Triggers lists owner's triggers by name.
func (o *Ops) Triggers(ctx context.Context, owner string, limit int) ([]*store.Trigger, error) {
	var out []*store.Trigger
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.TriggerList(owner, limit)
		return err
	})
	if err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	return out, nil
}

// TriggerRemove removes one of owner's triggers; the runs it started are
// not touched.
func (o *Ops) TriggerRemove(ctx context.Context, owner, name string) error {
	if err := store.CheckTrigger(&store.Trigger{Owner: owner, Name: name, Event: "x"}); err != nil {
		return protocolErr(CodeBadRequest, "%v", err)
	}
	err := o.e.st.Update(ctx, func(tx store.Tx) error { return tx.TriggerDelete(owner, name) })
	switch {
	case errors.Is(err, store.ErrNotFound):
		return protocolErr(CodeNotFound, "no trigger %q (weir trigger ls lists yours)", name)
	case err != nil:
		return storageErr(err)
	}
	return nil
}

// putTriggers stores the triggers m declares as owner's, in the
// registration's transaction after the flows (as putSchedules).
func putTriggersTx(tx store.Tx, owner string, m *flows.Module, now time.Time) ([]RegisteredTrigger, error) {
	var out []RegisteredTrigger
	for _, t := range m.Triggers {
		w := &store.Trigger{Owner: owner, Name: t.Name, Event: t.Event, Flow: t.Flow, Source: t.Pos.String(), CreatedAt: now, UpdatedAt: now}
		if t.Input != nil || t.Filter != nil {
			w.SourceHash = t.SourceHash
			if err := putSource(tx, t.SourceHash, m.DeclSources(t.Decl())); err != nil {
				return nil, err
			}
		}
		if t.Input != nil {
			w.InputFn = t.Input.Param
		}
		if t.Filter != nil {
			w.FilterFn = t.Filter.Param
		}
		old, err := tx.TriggerGet(owner, t.Name)
		switch {
		case err == nil:
			w.CreatedAt = old.CreatedAt
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		if err := tx.TriggerPut(w); err != nil {
			return nil, fmt.Errorf("storing trigger %s: %w", t.Name, err)
		}
		out = append(out, RegisteredTrigger{Name: t.Name, Event: t.Event, Flow: t.Flow})
	}
	return out, nil
}

// RegisteredTrigger is a trigger a registration stored.
type RegisteredTrigger struct {
	Name  string `json:"name"`
	Event string `json:"event"`
	Flow  string `json:"flow"`
}

// eventsHost is the engine's side of the events service
// (internal/events).
type eventsHost struct{ e *Engine }

func (h eventsHost) Pending(ctx context.Context, limit int) ([]*store.OwnerEvent, error) {
	var out []*store.OwnerEvent
	err := h.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.OwnerEventList(store.OwnerEventListParams{TriggersPending: true, Limit: limit})
		return err
	})
	return out, err
}

// Expire removes events accepted before t, each with its mentions in its
// slot, a few at a time.
func (h eventsHost) Expire(ctx context.Context, before time.Time, limit int) (int, error) {
	var old []*store.OwnerEvent
	if err := h.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		old, err = tx.OwnerEventListBefore(before, limit)
		return err
	}); err != nil {
		return 0, err
	}
	const perTx = 50
	for i := 0; i < len(old); i += perTx {
		batch := old[i:min(i+perTx, len(old))]
		if err := h.e.st.Update(ctx, func(tx store.Tx) error {
			for _, ev := range batch {
				if err := dropOwnerEventTx(tx, ev); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return i, err
		}
	}
	return len(old), nil
}

// Retention is the configured event retention.
func (h eventsHost) Retention() time.Duration {
	if r := h.e.cfg.Load().EventRetention; r > 0 {
		return r
	}
	return DefaultEventRetention
}

func (h eventsHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }
