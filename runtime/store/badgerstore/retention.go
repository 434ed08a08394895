package badgerstore

import "github.com/weirhq/weir/runtime/store"

// deletePrefix deletes every key with prefix. Deletes go through the
// transaction like any write, so a large run is bounded by the batch limit
// (the committer splits batches; one function too big fails alone).
func (t *storeTx) deletePrefix(prefix []byte) error {
	return t.deleteRange(prefix, prefixEnd(prefix))
}

// deleteRange deletes every key in [lower, upper).
func (t *storeTx) deleteRange(lower, upper []byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	keys, err := t.scanKeys(lower, upper, 0)
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
	return t.deleteRange(key(pEvent, runID, sep), key(pEvent, runID, sep, u64Key(beforeSeq)))
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
	return listJSON[store.Idem](t, prefix, prefixEnd(prefix), 0, nil)
}
