package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Owner events are kept under oe/ with three indexes (keys.go): oeq/ for
// an owner's list in Seq order, oea/ for retention's oldest first across
// owners, and oep/ for the few events whose triggers' runs are pending,
// so the delivery service reads those without walking every kept event.
// Undelivered is a filter on the oeq/ walk: an owner keeps a bounded
// number of events, and an index would be rewritten with every delivery.
//
// An event's Seq and its owner's count are counters under x/, read and
// written in the function's transaction: functions run one after another
// on the committer (badgerstore.go), so no two read the same value.

func ownerEventKey(owner, id string) []byte { return key(pOwnerEvent, owner, sep, id) }

// ownerEventIndexKeys are e's entries in the indexes.
func ownerEventIndexKeys(e *store.OwnerEvent) [][]byte {
	ks := [][]byte{
		key(pOwnerEventSeq, e.Owner, sep, u64Key(e.Seq), e.ID),
		key(pOwnerEventAt, timeKey(e.AcceptedAt), e.Owner, sep, e.ID),
	}
	if e.TriggersPending {
		ks = append(ks, key(pOwnerEventPending, e.Owner, sep, u64Key(e.Seq), e.ID))
	}
	return ks
}

func (t *storeTx) setKeys(ks [][]byte) error {
	for _, k := range ks {
		if err := t.kv.set(k, nil); err != nil {
			return err
		}
	}
	return nil
}

func (t *storeTx) delKeys(ks [][]byte) error {
	for _, k := range ks {
		if err := t.kv.del(k); err != nil {
			return err
		}
	}
	return nil
}

func (t *storeTx) OwnerEventPut(e *store.OwnerEvent) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckOwnerEvent(e); err != nil {
		return err
	}
	old, err := t.OwnerEventGet(e.Owner, e.ID)
	switch {
	case err == nil:
		e.Seq = old.Seq
		if err := t.delKeys(ownerEventIndexKeys(old)); err != nil {
			return err
		}
	case errors.Is(err, store.ErrNotFound):
		if e.Seq, err = t.counter(kOwnerEventSeq + e.Owner); err != nil {
			return err
		}
		e.Seq++
		if err := t.kv.set([]byte(kOwnerEventSeq+e.Owner), encodeU64(e.Seq)); err != nil {
			return err
		}
		if err := t.addCounter(kOwnerEventCount+e.Owner, 1); err != nil {
			return err
		}
	default:
		return err
	}
	if err := t.setKeys(ownerEventIndexKeys(e)); err != nil {
		return err
	}
	return t.putJSON(ownerEventKey(e.Owner, e.ID), e)
}

func (t *storeTx) OwnerEventGet(owner, id string) (*store.OwnerEvent, error) {
	return getOne[store.OwnerEvent](t, ownerEventKey(owner, id))
}

func (t *storeTx) OwnerEventDelete(owner, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, err := t.OwnerEventGet(owner, id)
	if err != nil {
		return fmt.Errorf("event %s of %s: %w", id, owner, err)
	}
	if err := t.delKeys(ownerEventIndexKeys(old)); err != nil {
		return err
	}
	if err := t.addCounter(kOwnerEventCount+owner, -1); err != nil {
		return err
	}
	return t.kv.del(ownerEventKey(owner, id))
}

// OwnerEventList walks oeq/ (oep/ for TriggersPending) from AfterSeq on
// for one owner, or the whole index for every owner.
func (t *storeTx) OwnerEventList(p store.OwnerEventListParams) ([]*store.OwnerEvent, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := pOwnerEventSeq
	if p.TriggersPending {
		prefix = pOwnerEventPending
	}
	lower, upper := []byte(prefix), prefixEnd([]byte(prefix))
	if p.Owner != "" {
		lower = key(prefix, p.Owner, sep)
		upper = prefixEnd(lower)
		if p.AfterSeq == ^uint64(0) {
			return nil, nil
		}
		lower = key(string(lower), u64Key(p.AfterSeq+1))
	}
	// Past the prefix: owner, sep, seq(8), id.
	record := func(k []byte) []byte {
		rest := k[len(prefix):]
		i := bytes.IndexByte(rest, 0)
		return ownerEventKey(string(rest[:i]), string(rest[i+1+8:]))
	}
	return t.ownerEventsByIndex(lower, upper, record, p.Keeps, p.Limit)
}

func (t *storeTx) OwnerEventListBefore(before time.Time, limit int) ([]*store.OwnerEvent, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	// Past the prefix: accepted(12), then owner, sep, id as in oe/.
	record := func(k []byte) []byte {
		return key(pOwnerEvent, string(k[len(pOwnerEventAt)+timeKeyLen:]))
	}
	return t.ownerEventsByIndex([]byte(pOwnerEventAt), key(pOwnerEventAt, timeKey(before)), record, nil, limit)
}

// ownerEventsByIndex reads the events the index entries in [lower, upper)
// name (record maps an entry to its event's key), keeping those keep
// accepts (nil: all), up to limit (<= 0: all).
func (t *storeTx) ownerEventsByIndex(lower, upper []byte, record func(k []byte) []byte, keep func(*store.OwnerEvent) bool, limit int) ([]*store.OwnerEvent, error) {
	var out []*store.OwnerEvent
	err := t.kv.scan(lower, upper, true, func(k, _ []byte) (bool, error) {
		e := new(store.OwnerEvent)
		if err := t.getJSON(record(k), e); err != nil {
			return false, fmt.Errorf("badgerstore: event index entry %q: %w", k, err)
		}
		if keep == nil || keep(e) {
			out = append(out, e)
		}
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// OwnerEventCount reads the owner's counter: retention asks with every
// event accepted, and a walk would cost the owner's whole bound.
func (t *storeTx) OwnerEventCount(owner string) (int, error) {
	if err := t.Open(); err != nil {
		return 0, err
	}
	n, err := t.counter(kOwnerEventCount + owner)
	return int(n), err
}

func eventSlotKey(owner, name, k string) []byte { return key(pEventSlot, owner, sep, name, sep, k) }

func (t *storeTx) EventSlotGet(owner, name, k string) (*store.EventSlot, error) {
	return getOne[store.EventSlot](t, eventSlotKey(owner, name, k))
}

// EventSlotPut needs nothing more to serialize the read-then-write of a
// slot than the committer running functions one after another.
func (t *storeTx) EventSlotPut(s *store.EventSlot) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckEventSlot(s); err != nil {
		return err
	}
	k := eventSlotKey(s.Owner, s.Name, s.Key)
	if len(s.Waits) == 0 && len(s.Kept) == 0 {
		return t.kv.del(k)
	}
	return t.putJSON(k, s)
}

func triggerKey(owner, name string) []byte { return key(pTrigger, owner, sep, name) }

func triggerEventKey(tg *store.Trigger) []byte {
	return key(pTriggerEvent, tg.Owner, sep, tg.Event, sep, tg.Name)
}

func (t *storeTx) TriggerPut(tg *store.Trigger) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckTrigger(tg); err != nil {
		return err
	}
	return putIndexed(t, triggerKey(tg.Owner, tg.Name), tg, triggerIndexKeys)
}

// triggerIndexKeys is a trigger's entry under its event.
func triggerIndexKeys(tg *store.Trigger) [][]byte { return [][]byte{triggerEventKey(tg)} }

func (t *storeTx) TriggerGet(owner, name string) (*store.Trigger, error) {
	return getOne[store.Trigger](t, triggerKey(owner, name))
}

func (t *storeTx) TriggerDelete(owner, name string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return deleteIndexed(t, triggerKey(owner, name), fmt.Sprintf("trigger %s of %s", name, owner), triggerIndexKeys)
}

func (t *storeTx) TriggerListByEvent(owner, event string) ([]*store.Trigger, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pTriggerEvent, owner, sep, event, sep)
	var out []*store.Trigger
	err := t.kv.scan(prefix, prefixEnd(prefix), true, func(k, _ []byte) (bool, error) {
		tg := new(store.Trigger)
		if err := t.getJSON(triggerKey(owner, string(k[len(prefix):])), tg); err != nil {
			return false, fmt.Errorf("badgerstore: trigger index entry %q: %w", k, err)
		}
		out = append(out, tg)
		return true, nil
	})
	return out, err
}

func (t *storeTx) TriggerList(owner string, limit int) ([]*store.Trigger, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pTrigger, owner, sep)
	return listJSON[store.Trigger](t, prefix, prefixEnd(prefix), limit, nil)
}
