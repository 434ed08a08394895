package badgerstore

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// scheduleDueKey is a schedule's entry in the due index; a paused one has
// none.
func scheduleDueKey(s *store.Schedule) []byte {
	if s.Paused {
		return nil
	}
	return key(pScheduleDue, timeKey(s.Next), s.Owner, sep, s.Name)
}

func (t *storeTx) SchedulePut(s *store.Schedule) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckSchedule(s); err != nil {
		return err
	}
	return putIndexed(t, key(pSchedule, s.Owner, sep, s.Name), s, scheduleIndexKeys)
}

// scheduleIndexKeys is a schedule's entry in the due order, if it has one.
func scheduleIndexKeys(s *store.Schedule) [][]byte {
	if k := scheduleDueKey(s); k != nil {
		return [][]byte{k}
	}
	return nil
}

func (t *storeTx) ScheduleGet(owner, name string) (*store.Schedule, error) {
	return getOne[store.Schedule](t, key(pSchedule, owner, sep, name))
}

func (t *storeTx) ScheduleDelete(owner, name string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return deleteIndexed(t, key(pSchedule, owner, sep, name), fmt.Sprintf("schedule %s of %s", name, owner), scheduleIndexKeys)
}

func (t *storeTx) ScheduleList(p store.ScheduleListParams) ([]*store.Schedule, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	lower := []byte(pSchedule)
	if p.Owner != "" {
		lower = key(pSchedule, p.Owner, sep)
	}
	return listJSON[store.Schedule](t, lower, prefixEnd(lower), p.Limit, nil)
}

// ScheduleListDue walks the due index up to now: the schedules not yet
// due, and the paused ones, cost nothing.
func (t *storeTx) ScheduleListDue(now time.Time, limit int) ([]*store.Schedule, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	keys, err := t.scanKeys([]byte(pScheduleDue), prefixEnd(key(pScheduleDue, timeKey(now))), limit)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Schedule, 0, len(keys))
	for _, k := range keys {
		var s store.Schedule
		if err := t.getJSON(key(pSchedule, string(k[len(pScheduleDue)+timeKeyLen:])), &s); err != nil {
			return nil, fmt.Errorf("badgerstore: due index entry %q: %w", k, err)
		}
		out = append(out, &s)
	}
	return out, nil
}
