package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// OwnerEvent is one accepted event of an owner (DESIGN §12): sent to POST
// /v1/events or turned from a webhook's delivery, deduplicated on (Owner,
// ID) like a run start, and kept for the event retention so that a wait
// that opens after it still receives it. (Event is the entry of a run's
// timeline.)
type OwnerEvent struct {
	Owner string `json:"owner"`
	// ID is the sender's id of the event (a webhook's delivery id): the
	// same id again is the same event.
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadHash tells a re-sent event from another under the same id.
	PayloadHash string `json:"payload_hash"`
	// Seq orders the owner's events: it grows with every event accepted.
	Seq uint64 `json:"seq"`
	// Delivered lists the waits that received the event ("RUN/WAIT").
	Delivered []string `json:"delivered,omitempty"`
	// TriggersPending says the runs of the triggers on Name have not all
	// been started yet (a crash between acceptance and their starts):
	// the delivery service starts them, each once by its derived request
	// id, and clears it.
	TriggersPending bool `json:"triggers_pending,omitempty"`
	// Started is what each trigger on Name did with the event, once done.
	Started    []EventStart `json:"started,omitempty"`
	AcceptedAt time.Time    `json:"accepted_at"`
}

// EventStart is what one trigger did with an event: the run it started,
// or why it started none.
type EventStart struct {
	Trigger string `json:"trigger"`
	RunID   string `json:"run_id,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

// EventSlot is where waits and events of one (Owner, Name, Key) meet: the
// waits open on it and the events kept that no wait has received yet,
// oldest first. Whoever comes second — the event or the wait — finds the
// other in the slot; both read and write this one record in their
// transaction, so the store serializes them and neither is lost.
type EventSlot struct {
	Owner string `json:"owner"`
	Name  string `json:"name"`
	Key   string `json:"key"`
	// Waits are the waits open on the slot, oldest first.
	Waits []EventSlotWait `json:"waits,omitempty"`
	// Kept are the ids of the events no wait has received, oldest first.
	Kept []string `json:"kept,omitempty"`
}

// EventSlotWait is a wait open on an event slot.
type EventSlotWait struct {
	RunID  string    `json:"run_id"`
	WaitID string    `json:"wait_id"`
	Since  time.Time `json:"since"`
	// Pending are the ids of the events delivered to the wait that its
	// run has not taken yet, oldest first: the run takes the first when
	// it wakes.
	Pending []string `json:"pending,omitempty"`
}

// Trigger is an on_event() declaration stored for its owner: each event
// of Event starts a run of Flow, with a request id derived from the
// event's id and the trigger's Name.
type Trigger struct {
	Owner string `json:"owner"`
	Name  string `json:"name"`
	Event string `json:"event"`
	Flow  string `json:"flow"`
	// InputFn and FilterFn name the declaration's callables ("": none),
	// evaluated from the sources SourceHash names.
	InputFn    string    `json:"input_fn,omitempty"`
	FilterFn   string    `json:"filter_fn,omitempty"`
	SourceHash string    `json:"source_hash,omitempty"`
	Source     string    `json:"source,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// OwnerEventListParams selects events: one owner's in Seq order, or every
// owner's (Owner "") in (owner, Seq) order.
type OwnerEventListParams struct {
	Owner string
	// AfterSeq lists only the events after it (paging), compared with
	// each owner's own Seq.
	AfterSeq uint64
	// Undelivered lists only the events no wait received.
	Undelivered bool
	// TriggersPending lists only the events whose triggers' runs are not
	// all started, of every owner when Owner is "".
	TriggersPending bool
	Limit           int // 0: all
}

// Keeps says whether e passes the filters of p other than Limit; the
// backends filter with it, so they agree on what a filter means.
func (p OwnerEventListParams) Keeps(e *OwnerEvent) bool {
	return (p.Owner == "" || e.Owner == p.Owner) && e.Seq > p.AfterSeq &&
		(!p.Undelivered || len(e.Delivered) == 0) && (!p.TriggersPending || e.TriggersPending)
}

// EventTx is the part of Tx that keeps events, their slots and the
// triggers.
type EventTx interface {
	// OwnerEventPut inserts or replaces the event (Owner, ID); the store
	// sets Seq on insert (one more than the owner's last, and writes it
	// into e) and keeps the stored one on replace (also writing it into
	// e).
	OwnerEventPut(e *OwnerEvent) error
	OwnerEventGet(owner, id string) (*OwnerEvent, error)
	// OwnerEventDelete removes an event (ErrNotFound if missing). The
	// owner's Seq goes on from its last value, never reused.
	OwnerEventDelete(owner, id string) error
	OwnerEventList(p OwnerEventListParams) ([]*OwnerEvent, error)
	// OwnerEventListBefore lists up to limit (0: all) events of every
	// owner accepted before t, the oldest first (ties by owner, then
	// id): what retention removes.
	OwnerEventListBefore(t time.Time, limit int) ([]*OwnerEvent, error)
	// OwnerEventCount counts owner's stored events (retention bounds
	// it).
	OwnerEventCount(owner string) (int, error)

	// EventSlotGet returns the slot (ErrNotFound if none); EventSlotPut
	// writes it, and removes it when it holds no waits and no events.
	EventSlotGet(owner, name, key string) (*EventSlot, error)
	EventSlotPut(s *EventSlot) error

	// TriggerPut inserts or replaces the trigger (Owner, Name).
	TriggerPut(t *Trigger) error
	TriggerGet(owner, name string) (*Trigger, error)
	// TriggerDelete removes a trigger (ErrNotFound if missing).
	TriggerDelete(owner, name string) error
	// TriggerListByEvent lists owner's triggers on event, by name.
	TriggerListByEvent(owner, event string) ([]*Trigger, error)
	// TriggerList lists owner's triggers by name, at most limit (0: all).
	TriggerList(owner string, limit int) ([]*Trigger, error)
}

// CheckOwnerEvent refuses an event the store cannot key.
func CheckOwnerEvent(e *OwnerEvent) error {
	if err := CheckID("event owner", e.Owner); err != nil {
		return err
	}
	return CheckID("event id", e.ID)
}

// CheckEventSlot refuses a slot the store cannot key: its owner and name
// are ids, its key may be empty.
func CheckEventSlot(s *EventSlot) error {
	if err := CheckID("event slot owner/name", s.Owner, s.Name); err != nil {
		return err
	}
	if err := CheckPart("event slot key", s.Key); err != nil {
		return err
	}
	return checkThreeParts("event slot owner, name and key", s.Owner, s.Name, s.Key)
}

// CheckTrigger refuses a trigger the store cannot key: by (owner, name),
// and by (owner, event, name) for TriggerListByEvent.
func CheckTrigger(t *Trigger) error {
	if err := CheckID("trigger owner/name/event", t.Owner, t.Name, t.Event); err != nil {
		return err
	}
	return checkThreeParts("trigger owner, event and name", t.Owner, t.Event, t.Name)
}

// checkThreeParts refuses a key of three parts longer together than two
// at MaxIDBytes: more would not fit one PostgreSQL index entry (see
// MaxIDBytes), and a refusal there would read as a fault of the store.
func checkThreeParts(what, a, b, c string) error {
	if n := len(a) + len(b) + len(c); n > 2*MaxIDBytes {
		return fmt.Errorf("%w: %s of %d bytes together, more than %d", ErrBadID, what, n, 2*MaxIDBytes)
	}
	return nil
}
