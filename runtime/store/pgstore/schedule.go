package pgstore

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

func (t *storeTx) SchedulePut(s *store.Schedule) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckSchedule(s); err != nil {
		return err
	}
	return t.putRecord("sch\x00"+s.Owner+"\x00"+s.Name, s, `INSERT INTO schedules (owner, name, next_ns, paused, v, data)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (owner, name) DO UPDATE SET next_ns = excluded.next_ns, paused = excluded.paused, v = excluded.v, data = excluded.data`,
		s.Owner, s.Name, nanos(s.Next), s.Paused)
}

func (t *storeTx) ScheduleGet(owner, name string) (*store.Schedule, error) {
	return getOne[store.Schedule](t, []string{owner, name}, `SELECT v, data FROM schedules WHERE owner = $1 AND name = $2`, owner, name)
}

func (t *storeTx) ScheduleDelete(owner, name string) error {
	return t.deleteOne(fmt.Sprintf("schedule %s of %s", name, owner), `DELETE FROM schedules WHERE owner = $1 AND name = $2`, owner, name)
}

func (t *storeTx) ScheduleList(p store.ScheduleListParams) ([]*store.Schedule, error) {
	if p.Owner == "" {
		return listRecords[store.Schedule](t, `SELECT v, data FROM schedules ORDER BY owner, name`+limitClause(p.Limit))
	}
	if !text(p.Owner) {
		return nil, nil
	}
	return listRecords[store.Schedule](t, `SELECT v, data FROM schedules WHERE owner = $1 ORDER BY name`+limitClause(p.Limit), p.Owner)
}

func (t *storeTx) ScheduleListDue(now time.Time, limit int) ([]*store.Schedule, error) {
	return listRecords[store.Schedule](t, `SELECT v, data FROM schedules WHERE NOT paused AND next_ns <= $1
		ORDER BY next_ns, owner, name`+limitClause(limit), nanos(now))
}
