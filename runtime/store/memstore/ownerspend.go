package memstore

import (
	"cmp"

	"github.com/weirhq/weir/runtime/store"
)

func spendKey(owner string, minute int64, host string) string {
	return owner + sep + u64(uint64(minute)) + sep + host
}

func (t *tx) OwnerSpendAdd(s store.OwnerSpend) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckOwnerSpend(s); err != nil {
		return err
	}
	k := spendKey(s.Owner, s.Minute, s.Host)
	if cur, ok := peek[store.OwnerSpend](t, tOwnerSpend, k); ok {
		s.Cost += cur.Cost
	}
	return put(t, tOwnerSpend, k, &s)
}

func (t *tx) OwnerSpendList(p store.OwnerSpendListParams) ([]store.OwnerSpend, error) {
	keep := func(s *store.OwnerSpend) bool { return (p.Owner == "" || s.Owner == p.Owner) && s.Minute >= p.Since }
	less := func(a, b *store.OwnerSpend) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Minute, b.Minute), cmp.Compare(a.Host, b.Host))
	}
	rows, err := list(t, tOwnerSpend, keep, less, 0)
	if err != nil {
		return nil, err
	}
	out := make([]store.OwnerSpend, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out, nil
}

func (t *tx) OwnerSpendPrune(before int64) (int, error) {
	n := 0
	err := deleteWhere(t, tOwnerSpend, func(s *store.OwnerSpend) bool {
		if s.Minute < before {
			n++
			return true
		}
		return false
	})
	return n, err
}
