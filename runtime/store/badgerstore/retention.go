package badgerstore

import "github.com/weirhq/weir/runtime/store"

// deletePrefix deletes every key with prefix. Deletes go through the
// transaction like any write, so a large run is bounded by the batch limit
// (the committer splits batches; one function too big fails alone).
func (t *storeTx) deletePrefix(prefix []byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	keys, err := t.scanKeys(prefix, prefixEnd(prefix), 0)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := t.kv.del(k); err != nil {
			return err
		}
	}
	return nil
}

func (t *storeTx) EventDeleteRun(runID string) error {
	return t.deletePrefix(key(pEvent, runID, sep))
}

func (t *storeTx) EventDeleteBefore(runID string, beforeSeq uint64) error {
	if err := t.Writable(); err != nil {
		return err
	}
	keys, err := t.scanKeys(key(pEvent, runID, sep), key(pEvent, runID, sep, u64Key(beforeSeq)), 0)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := t.kv.del(k); err != nil {
			return err
		}
	}
	return nil
}

func (t *storeTx) CohortDeleteRun(runID string) error {
	if err := t.deletePrefix(key(pCohort, runID, sep)); err != nil {
		return err
	}
	return t.deletePrefix(key(pCohortItem, runID, sep))
}

func (t *storeTx) IdemDeleteRun(runID string) error {
	return t.deletePrefix(key(pIdem, runID, "/"))
}

func (t *storeTx) IdemListRun(runID string) ([]*store.Idem, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pIdem, runID, "/")
	var out []*store.Idem
	err := t.kv.scan(prefix, prefixEnd(prefix), false, func(_, v []byte) (bool, error) {
		r := new(store.Idem)
		if err := decodeJSON(v, r); err != nil {
			return false, err
		}
		out = append(out, r)
		return true, nil
	})
	return out, err
}
