package badgerstore

import (
	"github.com/weirhq/weir/runtime/store"
)

// Cohort keys:
//
//	co/<run>\0<node>\0<visit(8)>            Cohort
//	ci/<run>\0<node>\0<visit(8)><index(8)>  CohortItem
const (
	pCohort     = "co/"
	pCohortItem = "ci/"
)

func cohortKey(prefix, runID, node string, visit int) []byte {
	return key(prefix, runID, sep, node, sep, u64Key(uint64(visit)))
}

func (t *storeTx) CohortPut(c *store.Cohort) error {
	return putChecked(t, cohortKey(pCohort, c.RunID, c.Node, c.Visit), c, func(c *store.Cohort) error { return checkID("cohort run/node", c.RunID, c.Node) })
}

func (t *storeTx) CohortGet(runID, node string, visit int) (*store.Cohort, error) {
	return getOne[store.Cohort](t, cohortKey(pCohort, runID, node, visit))
}

func (t *storeTx) CohortItemPut(it *store.CohortItem) error {
	return putChecked(t, key(string(cohortKey(pCohortItem, it.RunID, it.Node, it.Visit)), u64Key(uint64(it.Index))), it, store.CheckCohortItem)
}

func (t *storeTx) CohortItemGet(runID, node string, visit, index int) (*store.CohortItem, error) {
	return getOne[store.CohortItem](t, key(string(cohortKey(pCohortItem, runID, node, visit)), u64Key(uint64(index))))
}

func (t *storeTx) CohortItemList(runID, node string, visit int) ([]*store.CohortItem, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	lower := cohortKey(pCohortItem, runID, node, visit)
	return listJSON[store.CohortItem](t, lower, prefixEnd(lower), 0, nil)
}
