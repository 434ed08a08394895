package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// An agent that says on_unknown = "ask" parks a tool call whose outcome
// stays unknown on a wait of kind unknown, NODE@VISIT.TURN.CALL.unknown.N
// (DESIGN §12), as it parks a proposed call on its approval: the call's
// task leaves the unknown on the turn's call (callAsking), and the
// agent's step opens the wait among the continuation's per-call waits and
// applies the resolve's answer. While it waits, the call holds the turn's
// one at-most-once place (no other such call runs) and the model is not
// asked again.

// agentUnknowns applies the unknown waits of turn t's calls whose outcome
// is unknown: opening a wait for a call that has none, ending the call
// with the resolved result or, past the wait's deadline, E_OUTCOME_UNKNOWN,
// or clearing it to be queued once more (resolved not happened). t's calls
// change in memory (msg is its journaled answer); ends holds the calls to
// write and open the waits still open.
func (s *stepper) agentUnknowns(ctx context.Context, a *agentLoop, t *store.AgentTurn, msg chat.Message, now time.Time) (ends map[int]store.AgentCall, open []*waitState, err error) {
	node := a.node
	ends = map[int]store.AgentCall{}
	for i, c := range t.Calls {
		if !callAsking(c) {
			continue
		}
		base := WaitID(node.ID, a.visit, t.Turn, i)
		key := idemKey(s.run.ID, node.ID, a.visit, t.Turn, i)
		ws := s.callUnknownWait(base)
		switch decideCallUnknown(ws, now) {
		case unknownAsk:
			args := msg.ToolCalls[i].Arguments
			if len(c.Edited) > 0 {
				args = c.Edited // the call was made with a person's edit
			}
			var shown unknownShown
			if err := s.e.st.View(ctx, func(tx store.Tx) error {
				var err error
				shown, err = unknownShownTx(tx, key, c.Tool, args, c.Error)
				return err
			}); err != nil {
				return nil, nil, err
			}
			until := now.Add(unknownTimeout(node))
			if node.Timeout > 0 && a.started.Add(node.Timeout).Before(until) {
				until = a.started.Add(node.Timeout) // the loop's own deadline comes first
			}
			open = append(open, s.openCallUnknown(node, a.visit, base, []int{t.Turn, i}, shown, now, until))
			continue
		case unknownWaiting:
			open = append(open, ws)
			continue
		case unknownHappened:
			var out json.RawMessage
			if err := s.e.st.View(ctx, func(tx store.Tx) error {
				var err error
				out, err = resolvedResultTx(tx, key)
				return err
			}); err != nil {
				return nil, nil, err
			}
			c.Error = nil
			c = callEnded(c, out, nil)
		case unknownRemake:
			// The resolve recorded it not sent: its next task makes it
			// afresh, with a new started record.
			c.Error, c.Task = nil, ""
		case unknownExpired:
			c = callEnded(c, nil, unresolvedErr(c.Tool, ws))
		}
		s.settleCallUnknown(ws)
		t.Calls[i], ends[i] = c, c
	}
	return ends, open, nil
}

// unknownsUntil is the earliest deadline of open, or later when none is
// sooner.
func unknownsUntil(open []*waitState, later time.Time) time.Time {
	for _, ws := range open {
		if ws.Until.Before(later) {
			later = ws.Until
		}
	}
	return later
}

// awaitPeople parks the agent until a person decides one of its undecided
// approvals or resolves one of its open unknown waits.
func (s *stepper) awaitPeople(ctx context.Context, a *agentLoop, undecided, unknowns []*waitState, now time.Time) bool {
	if len(undecided) > 0 {
		return s.awaitApprovals(ctx, a, append(undecided, unknowns...))
	}
	return s.awaitUnknowns(ctx, unknowns, now)
}

// awaitUnknowns parks the agent on its calls' open unknown waits until a
// resolve wakes it or the first deadline passes.
func (s *stepper) awaitUnknowns(ctx context.Context, open []*waitState, now time.Time) bool {
	ids := make([]string, len(open))
	for i, ws := range open {
		ids[i] = ws.ID
	}
	s.commit(ctx, func(tx store.Tx) error {
		return s.parkTx(tx, now, unknownsUntil(open, now.Add(noTimeout)), WaitUnknown, "", map[string]any{"waits": ids})
	})
	return false
}
