package engine

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/weirhq/weir/flows"

	"github.com/weirhq/weir/runtime/store"
)

// Progress is what a run has done so far, for display. It travels with the
// run's attempt and phase: after recovery it may restart.
type Progress struct {
	Attempt int         `json:"attempt"`
	Phase   store.Phase `json:"phase"`
	// Node is the node the run is at ("" once its graph is done).
	Node string `json:"node,omitempty"`
	// Done counts the nodes that produced a result.
	Done int `json:"done"`
	// Visits counts node entries so far.
	Visits int `json:"visits"`
	// Agents shows each agent node's latest visit: turns, tokens, cost.
	Agents []AgentView `json:"agents,omitempty"`
	// Cohorts shows each fan-out's latest cohort.
	Cohorts []CohortView `json:"cohorts,omitempty"`
	// Tool is the running tool call's last progress report, if any.
	Tool *ToolProgress `json:"tool,omitempty"`
	// Items are the last progress reports of the fan-out items' running
	// tool calls, in item order.
	Items []ToolProgress `json:"items,omitempty"`
}

// Progress reads the run's continuation for display. run must have come
// from Get (ownership is checked there).
func (e *Engine) Progress(ctx context.Context, run *store.Run) (*Progress, error) {
	raw, err := readContinuation(ctx, e.st, run.ID)
	if err != nil {
		return nil, err
	}
	c, err := decodeContinuation(raw)
	if err != nil {
		return nil, err
	}
	p := &Progress{Attempt: run.Attempt, Phase: run.Phase, Node: c.Node, Done: len(c.Results)}
	lr, items := e.held.ofRun(run.ID)
	if lr != nil {
		p.Tool = lr.progress.Load()
	}
	for _, it := range items {
		if tp := it.progress.Load(); tp != nil {
			p.Items = append(p.Items, *tp)
		}
	}
	slices.SortFunc(p.Items, func(a, b ToolProgress) int { return cmp.Compare(itemOf(a), itemOf(b)) })
	for _, v := range c.Visits {
		p.Visits += v
	}
	fe, err := e.book.version(ctx, run.Flow, run.Version)
	if err != nil {
		return p, nil
	}
	err = e.st.View(ctx, func(tx store.Tx) error {
		for _, n := range fe.flow.Nodes {
			if n.Kind == flows.KindAgent && c.Visits[n.ID] > 0 {
				av, err := agentView(tx, run.ID, n.ID, c.Visits[n.ID])
				if err != nil {
					return err
				}
				p.Agents = append(p.Agents, av)
				continue
			}
			if n.Kind != flows.KindFanout || c.Visits[n.ID] == 0 {
				continue
			}
			co, err := tx.CohortGet(run.ID, n.ID, c.Visits[n.ID])
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			p.Cohorts = append(p.Cohorts, cohortView(co))
		}
		return nil
	})
	return p, err
}

// itemOf is the item of a progress report, or -1 for none.
func itemOf(tp ToolProgress) int {
	if tp.Item == nil {
		return -1
	}
	return *tp.Item
}
