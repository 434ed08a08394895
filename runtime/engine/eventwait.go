package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// WaitEvent: a wait node with event = parks the run until an event of its
// owner's with that name and the key its match gave is accepted. Its wait
// id is the node's, NODE@VISIT.
const WaitEvent = "event"

// CodeEventWaits: MaxEventSlotWaits waits are open on the event name and
// key already.
const CodeEventWaits = "E_EVENT_WAITS"

// eventWait is what a wait for an event waits for, and, once taken, the
// event it received: kept in the continuation, so a crash between
// taking the event and following next takes it once.
type eventWait struct {
	Name     string         `json:"name"`
	Key      string         `json:"key"`
	Received *receivedEvent `json:"received,omitempty"`
}

type receivedEvent struct {
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// eventWaitNode is a wait node waiting for an event. On its first visit
// it computes the key; each time it runs it takes an event delivered to
// it or kept on its name and key, if there is one, and follows next with
// the payload as its result; else it parks (open on the slot, so the
// event's sender finds it) until its timeout, which takes the error wire.
func (s *stepper) eventWaitNode(ctx context.Context, node *flows.Node) bool {
	now := s.e.clock.Now()
	if s.cont.Waits == nil {
		s.cont.Waits = map[string]*waitState{}
	}
	ws := s.cont.Waits[node.ID]
	if ws == nil || ws.Event == nil {
		key, err := s.matchKey(node)
		if err != nil {
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
		}
		timeout := node.Timeout
		if timeout <= 0 {
			timeout = noTimeout
		}
		ws = &waitState{ID: WaitID(node.ID, s.cont.Visits[node.ID]), Kind: WaitEvent, Node: node.ID, Since: now, Until: now.Add(timeout),
			Shown: mustJSON(map[string]string{"event": node.Event, "key": key}), Event: &eventWait{Name: node.Event, Key: key}}
		s.cont.Waits[node.ID] = ws
	}
	if ws.Event.Received == nil {
		timedOut := !now.Before(ws.Until)
		full := false
		if !s.commit(ctx, func(tx store.Tx) error {
			got, open, err := takeEventTx(tx, s.run.Owner, s.run.ID, ws, !timedOut)
			switch {
			case err != nil:
				return err
			case got != nil:
				ws.Event.Received = &receivedEvent{ID: got.ID, Payload: got.Payload}
				if err := tx.ContinuationPut(s.run.ID, encodeContinuation(s.cont)); err != nil {
					return err
				}
				return appendEvent(tx, s.run.ID, evEventReceived, s.run.Attempt, node.ID, map[string]any{"event": got.ID, "wait": ws.ID, "name": got.Name, "key": got.Key}, now)
			case timedOut:
				return nil
			case !open:
				full = true
				return nil
			}
			return s.parkTx(tx, now, ws.Until, WaitEvent, "", map[string]any{"wait": ws.ID, "event": ws.Event.Name, "key": ws.Event.Key})
		}) {
			return false
		}
		switch {
		case full:
			delete(s.cont.Waits, node.ID)
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeEventWaits,
				Message: fmt.Sprintf("%d waits are open on event %s with key %q already", MaxEventSlotWaits, ws.Event.Name, ws.Event.Key)})
		case ws.Event.Received == nil && timedOut:
			delete(s.cont.Waits, node.ID)
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeWaitTimeout,
				Message: fmt.Sprintf("no event %s with key %q came before %s", ws.Event.Name, ws.Event.Key, ws.Until.Format(time.RFC3339))})
		case ws.Event.Received == nil:
			return false // parked
		}
	}
	r := ws.Event.Received
	delete(s.cont.Waits, node.ID)
	return s.resultDone(ctx, node, r.Payload, map[string]any{"event": r.ID, "wait": ws.ID})
}

// matchKey is the key node's match gives: a string.
func (s *stepper) matchKey(node *flows.Node) (string, error) {
	if node.Match == nil {
		return "", fmt.Errorf("wait %s for event %s has no match", node.ID, node.Event)
	}
	v, err := s.fe.call(s.evalCtx(), *node.Match, s.flowCtx())
	if err != nil {
		return "", err
	}
	key, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("match of %s returned %T, want a string: the key the event must carry", node.ID, v)
	}
	if err := store.CheckPart("event key", key); err != nil || len(key) > store.MaxIDBytes {
		return "", fmt.Errorf("match of %s returned %.70q, which no event can carry as its key (at most %d bytes, no NUL)", node.ID, key, store.MaxIDBytes)
	}
	return key, nil
}

// takeEventTx takes for the wait ws of owner's run runID the first event
// delivered to it, else the oldest kept on its name and key (an event
// that came before the wait opened), and closes the wait on the slot. With
// none there, it opens the wait on the slot when open is asked (a wait
// parking) or closes it (a wait timing out); full is a wait that could
// not be opened because MaxEventSlotWaits are open. Events a wait was
// delivered beyond the one it takes go back to the slot for the next.
func takeEventTx(tx store.Tx, owner, runID string, ws *waitState, open bool) (got *store.OwnerEvent, opened bool, err error) {
	slot, err := eventSlotTx(tx, owner, ws.Event.Name, ws.Event.Key)
	if err != nil {
		return nil, false, err
	}
	var others []store.EventSlotWait
	var candidates []string
	mine := 0
	for _, w := range slot.Waits {
		if w.RunID == runID && w.WaitID == ws.ID {
			candidates = append(candidates, w.Pending...)
			mine = len(candidates)
			continue
		}
		others = append(others, w)
	}
	candidates = append(candidates, slot.Kept...)
	for i, id := range candidates {
		ev, err := tx.OwnerEventGet(owner, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // retention removed it
		}
		if err != nil {
			return nil, false, err
		}
		slot.Waits, slot.Kept = others, append([]string(nil), candidates[i+1:]...)
		if i >= mine {
			// A kept event: this wait is its first receiver.
			ev.Delivered = append(ev.Delivered, runID+"/"+ws.ID)
			if err := tx.OwnerEventPut(ev); err != nil {
				return nil, false, err
			}
		}
		return ev, true, tx.EventSlotPut(slot)
	}
	slot.Kept = nil
	if open {
		if len(others) >= MaxEventSlotWaits {
			// Waits of runs that ended without an event (cancelled,
			// failed) stay until an event comes: drop them before
			// refusing.
			if others, err = stillWaitingTx(tx, owner, others); err != nil {
				return nil, false, err
			}
		}
		if len(others) >= MaxEventSlotWaits {
			return nil, false, nil
		}
		others = append(others, store.EventSlotWait{RunID: runID, WaitID: ws.ID, Since: ws.Since})
	}
	slot.Waits = others
	return nil, open, tx.EventSlotPut(slot)
}

// stillWaitingTx is the waits of ws whose runs still wait.
func stillWaitingTx(tx store.Tx, owner string, ws []store.EventSlotWait) ([]store.EventSlotWait, error) {
	out := ws[:0:0]
	for _, w := range ws {
		t, err := eventWaiterTx(tx, owner, w.RunID)
		if err != nil {
			return nil, err
		}
		if t != nil {
			out = append(out, w)
		}
	}
	return out, nil
}
