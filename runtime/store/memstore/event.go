package memstore

import (
	"cmp"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// ownerEventSeq names owner's counter of event numbers in tCounter: a
// table entry, so that a discarded function gives its numbers back.
func ownerEventSeq(owner string) string { return "owner-event-seq" + sep + owner }

func (t *tx) OwnerEventPut(e *store.OwnerEvent) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckOwnerEvent(e); err != nil {
		return err
	}
	k := e.Owner + sep + e.ID
	if old, ok := peek[store.OwnerEvent](t, tOwnerEvent, k); ok {
		e.Seq = old.Seq
		return put(t, tOwnerEvent, k, e)
	}
	var seq uint64
	if c, ok := peek[uint64](t, tCounter, ownerEventSeq(e.Owner)); ok {
		seq = *c
	}
	seq++
	if err := put(t, tCounter, ownerEventSeq(e.Owner), &seq); err != nil {
		return err
	}
	e.Seq = seq
	return put(t, tOwnerEvent, k, e)
}

func (t *tx) OwnerEventGet(owner, id string) (*store.OwnerEvent, error) {
	return get[store.OwnerEvent](t, tOwnerEvent, owner+sep+id)
}

func (t *tx) OwnerEventDelete(owner, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting(fmt.Sprintf("event %s of %s", id, owner), tOwnerEvent, owner+sep+id)
}

func (t *tx) OwnerEventList(p store.OwnerEventListParams) ([]*store.OwnerEvent, error) {
	less := func(a, b *store.OwnerEvent) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Seq, b.Seq))
	}
	return list(t, tOwnerEvent, p.Keeps, less, p.Limit)
}

func (t *tx) OwnerEventListBefore(before time.Time, limit int) ([]*store.OwnerEvent, error) {
	keep := func(e *store.OwnerEvent) bool { return e.AcceptedAt.Before(before) }
	less := func(a, b *store.OwnerEvent) int {
		return cmp.Or(a.AcceptedAt.Compare(b.AcceptedAt), cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.ID, b.ID))
	}
	return list(t, tOwnerEvent, keep, less, limit)
}

func (t *tx) OwnerEventCount(owner string) (int, error) {
	if err := t.Open(); err != nil {
		return 0, err
	}
	n := 0
	t.each(tOwnerEvent, func(_ string, e *entry) {
		if e.val.(*store.OwnerEvent).Owner == owner {
			n++
		}
	})
	return n, nil
}

func eventSlotKey(owner, name, key string) string { return owner + sep + name + sep + key }

func (t *tx) EventSlotGet(owner, name, key string) (*store.EventSlot, error) {
	return get[store.EventSlot](t, tEventSlot, eventSlotKey(owner, name, key))
}

// EventSlotPut needs nothing to serialize the read-then-write of a slot:
// Updates run one at a time.
func (t *tx) EventSlotPut(s *store.EventSlot) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckEventSlot(s); err != nil {
		return err
	}
	k := eventSlotKey(s.Owner, s.Name, s.Key)
	if len(s.Waits) == 0 && len(s.Kept) == 0 {
		t.del(tEventSlot, k)
		return nil
	}
	return put(t, tEventSlot, k, s)
}

func (t *tx) TriggerPut(tg *store.Trigger) error {
	return putChecked(t, tTrigger, tg.Owner+sep+tg.Name, tg, store.CheckTrigger)
}

func (t *tx) TriggerGet(owner, name string) (*store.Trigger, error) {
	return get[store.Trigger](t, tTrigger, owner+sep+name)
}

func (t *tx) TriggerDelete(owner, name string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting(fmt.Sprintf("trigger %s of %s", name, owner), tTrigger, owner+sep+name)
}

func byTriggerName(a, b *store.Trigger) int { return cmp.Compare(a.Name, b.Name) }

func (t *tx) TriggerListByEvent(owner, event string) ([]*store.Trigger, error) {
	keep := func(tg *store.Trigger) bool { return tg.Owner == owner && tg.Event == event }
	return list(t, tTrigger, keep, byTriggerName, 0)
}

func (t *tx) TriggerList(owner string, limit int) ([]*store.Trigger, error) {
	keep := func(tg *store.Trigger) bool { return tg.Owner == owner }
	return list(t, tTrigger, keep, byTriggerName, limit)
}
