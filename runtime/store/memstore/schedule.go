package memstore

import (
	"cmp"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

func (t *tx) SchedulePut(s *store.Schedule) error {
	return putChecked(t, tSchedule, s.Owner+sep+s.Name, s, store.CheckSchedule)
}

func (t *tx) ScheduleGet(owner, name string) (*store.Schedule, error) {
	return get[store.Schedule](t, tSchedule, owner+sep+name)
}

func (t *tx) ScheduleDelete(owner, name string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting(fmt.Sprintf("schedule %s of %s", name, owner), tSchedule, owner+sep+name)
}

func (t *tx) ScheduleList(p store.ScheduleListParams) ([]*store.Schedule, error) {
	keep := func(s *store.Schedule) bool { return p.Owner == "" || s.Owner == p.Owner }
	less := func(a, b *store.Schedule) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Name, b.Name))
	}
	return list(t, tSchedule, keep, less, p.Limit)
}

func (t *tx) ScheduleListDue(now time.Time, limit int) ([]*store.Schedule, error) {
	keep := func(s *store.Schedule) bool { return !s.Paused && !s.Next.After(now) }
	less := func(a, b *store.Schedule) int {
		return cmp.Or(a.Next.Compare(b.Next), cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Name, b.Name))
	}
	return list(t, tSchedule, keep, less, limit)
}
