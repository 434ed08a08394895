package pgstore

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/runtime/store"
)

// OwnerEventPut keeps the Seq of an event already stored, or draws the
// next of its owner from owner_event_seqs (0007_events.sql says why that
// row serializes the owner's acceptances).
func (t *storeTx) OwnerEventPut(e *store.OwnerEvent) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckOwnerEvent(e); err != nil {
		return err
	}
	var seq int64
	err := t.queryRow(`SELECT seq FROM owner_events WHERE owner = $1 AND id = $2`, e.Owner, e.ID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		err = t.queryRow(`INSERT INTO owner_event_seqs (owner, seq) VALUES ($1, 1)
			ON CONFLICT (owner) DO UPDATE SET seq = owner_event_seqs.seq + 1 RETURNING seq`, e.Owner).Scan(&seq)
	}
	if err != nil {
		return t.fail(err)
	}
	e.Seq = uint64(seq)
	return t.putRecord("oe\x00"+e.Owner+"\x00"+e.ID, e, `INSERT INTO owner_events (owner, id, seq, accepted_ns, undelivered, triggers_pending, v, data)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (owner, id) DO UPDATE SET accepted_ns = excluded.accepted_ns, undelivered = excluded.undelivered,
			triggers_pending = excluded.triggers_pending, v = excluded.v, data = excluded.data`,
		e.Owner, e.ID, seq, nanos(e.AcceptedAt), len(e.Delivered) == 0, e.TriggersPending)
}

func (t *storeTx) OwnerEventGet(owner, id string) (*store.OwnerEvent, error) {
	return getOne[store.OwnerEvent](t, []string{owner, id}, `SELECT v, data FROM owner_events WHERE owner = $1 AND id = $2`, owner, id)
}

func (t *storeTx) OwnerEventDelete(owner, id string) error {
	return t.deleteOne(fmt.Sprintf("event %s of %s", id, owner), `DELETE FROM owner_events WHERE owner = $1 AND id = $2`, owner, id)
}

// OwnerEventList filters on the columns in one query: an owner's events
// walk owner_events_seq (owner_events_pending for the pending ones).
func (t *storeTx) OwnerEventList(p store.OwnerEventListParams) ([]*store.OwnerEvent, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if p.AfterSeq >= math.MaxInt64 || !text(p.Owner) {
		return nil, nil
	}
	where, args := []string{"seq > $1"}, []any{int64(p.AfterSeq)}
	order := "owner, seq"
	if p.Owner != "" {
		args = append(args, p.Owner)
		where = append(where, "owner = $2")
		order = "seq"
	}
	if p.Undelivered {
		where = append(where, "undelivered")
	}
	if p.TriggersPending {
		where = append(where, "triggers_pending")
	}
	return listRecords[store.OwnerEvent](t, `SELECT v, data FROM owner_events WHERE `+strings.Join(where, " AND ")+
		` ORDER BY `+order+limitClause(p.Limit), args...)
}

func (t *storeTx) OwnerEventListBefore(before time.Time, limit int) ([]*store.OwnerEvent, error) {
	return listRecords[store.OwnerEvent](t, `SELECT v, data FROM owner_events WHERE accepted_ns < $1
		ORDER BY accepted_ns, owner, id`+limitClause(limit), nanos(before))
}

func (t *storeTx) OwnerEventCount(owner string) (int, error) {
	if err := t.Open(); err != nil {
		return 0, err
	}
	if !text(owner) {
		return 0, nil
	}
	var n int
	if err := t.queryRow(`SELECT count(*) FROM owner_events WHERE owner = $1`, owner).Scan(&n); err != nil {
		return 0, t.fail(err)
	}
	return n, nil
}

func (t *storeTx) EventSlotGet(owner, name, key string) (*store.EventSlot, error) {
	return getOne[store.EventSlot](t, []string{owner, name, key},
		`SELECT v, data FROM event_slots WHERE owner = $1 AND name = $2 AND key = $3`, owner, name, key)
}

// EventSlotPut relies on SERIALIZABLE: of two transactions that read the
// slot and then write it, one fails with a serialization failure and
// runs again on what the other wrote.
func (t *storeTx) EventSlotPut(s *store.EventSlot) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckEventSlot(s); err != nil {
		return err
	}
	if len(s.Waits) == 0 && len(s.Kept) == 0 {
		t.put(`DELETE FROM event_slots WHERE owner = $1 AND name = $2 AND key = $3`, s.Owner, s.Name, s.Key)
		return nil
	}
	return t.putRecord("es\x00"+s.Owner+"\x00"+s.Name+"\x00"+s.Key, s, `INSERT INTO event_slots (owner, name, key, v, data)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (owner, name, key) DO UPDATE SET v = excluded.v, data = excluded.data`,
		s.Owner, s.Name, s.Key)
}

func (t *storeTx) TriggerPut(tg *store.Trigger) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckTrigger(tg); err != nil {
		return err
	}
	return t.putRecord("tg\x00"+tg.Owner+"\x00"+tg.Name, tg, `INSERT INTO triggers (owner, name, event, v, data)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (owner, name) DO UPDATE SET event = excluded.event, v = excluded.v, data = excluded.data`,
		tg.Owner, tg.Name, tg.Event)
}

func (t *storeTx) TriggerGet(owner, name string) (*store.Trigger, error) {
	return getOne[store.Trigger](t, []string{owner, name}, `SELECT v, data FROM triggers WHERE owner = $1 AND name = $2`, owner, name)
}

func (t *storeTx) TriggerDelete(owner, name string) error {
	return t.deleteOne(fmt.Sprintf("trigger %s of %s", name, owner), `DELETE FROM triggers WHERE owner = $1 AND name = $2`, owner, name)
}

func (t *storeTx) TriggerListByEvent(owner, event string) ([]*store.Trigger, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(owner, event) {
		return nil, nil
	}
	return listRecords[store.Trigger](t, `SELECT v, data FROM triggers WHERE owner = $1 AND event = $2 ORDER BY name`, owner, event)
}

func (t *storeTx) TriggerList(owner string, limit int) ([]*store.Trigger, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(owner) {
		return nil, nil
	}
	return listRecords[store.Trigger](t, `SELECT v, data FROM triggers WHERE owner = $1 ORDER BY name`+limitClause(limit), owner)
}
