package badgerstore

import (
	"github.com/weirhq/weir/runtime/store"
)

// Agent turn keys:
//
//	at/<run>\0<node>\0<visit(8)><turn(8)>  AgentTurn
const pAgentTurn = "at/"

func (t *storeTx) AgentTurnPut(at *store.AgentTurn) error {
	return putChecked(t, key(string(cohortKey(pAgentTurn, at.RunID, at.Node, at.Visit)), u64Key(uint64(at.Turn))), at, store.CheckAgentTurn)
}

func (t *storeTx) AgentTurnGet(runID, node string, visit, turn int) (*store.AgentTurn, error) {
	return getOne[store.AgentTurn](t, key(string(cohortKey(pAgentTurn, runID, node, visit)), u64Key(uint64(turn))))
}

func (t *storeTx) AgentTurnList(p store.AgentTurnListParams) ([]*store.AgentTurn, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	lower := cohortKey(pAgentTurn, p.RunID, p.Node, p.Visit)
	return listJSON[store.AgentTurn](t, lower, prefixEnd(lower), 0, nil)
}

func (t *storeTx) AgentTurnDeleteRun(runID string) error {
	return t.deletePrefix(key(pAgentTurn, runID, sep))
}
