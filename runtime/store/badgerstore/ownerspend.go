package badgerstore

import "github.com/weirhq/weir/runtime/store"

// spendKey is osp/OWNER sep MINUTE(8) HOST: an owner's rows in minute
// order, so the window is one range.
func spendKey(owner string, minute int64, host string) []byte {
	return key(pOwnerSpend, owner, sep, u64Key(uint64(minute)), host)
}

func (t *storeTx) OwnerSpendAdd(s store.OwnerSpend) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckOwnerSpend(s); err != nil {
		return err
	}
	k := spendKey(s.Owner, s.Minute, s.Host)
	var cur store.OwnerSpend
	switch err := t.getJSON(k, &cur); {
	case err == nil:
		s.Cost += cur.Cost
	case err != store.ErrNotFound:
		return err
	}
	return t.putJSON(k, &s)
}

func (t *storeTx) OwnerSpendList(p store.OwnerSpendListParams) ([]store.OwnerSpend, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	lower, upper := []byte(pOwnerSpend), prefixEnd([]byte(pOwnerSpend))
	if p.Owner != "" {
		prefix := key(pOwnerSpend, p.Owner, sep)
		lower, upper = spendKey(p.Owner, max(p.Since, 0), ""), prefixEnd(prefix)
	}
	rows, err := listJSON(t, lower, upper, 0, func(s *store.OwnerSpend) bool { return s.Minute >= p.Since })
	if err != nil {
		return nil, err
	}
	out := make([]store.OwnerSpend, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out, nil
}

func (t *storeTx) OwnerSpendPrune(before int64) (int, error) {
	if err := t.Writable(); err != nil {
		return 0, err
	}
	var old [][]byte
	err := t.kv.scan([]byte(pOwnerSpend), prefixEnd([]byte(pOwnerSpend)), false, func(k, v []byte) (bool, error) {
		var s store.OwnerSpend
		if err := decodeJSON(v, &s); err != nil {
			return false, err
		}
		if s.Minute < before {
			old = append(old, append([]byte(nil), k...))
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range old {
		if err := t.kv.del(k); err != nil {
			return 0, err
		}
	}
	return len(old), nil
}
