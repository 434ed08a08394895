package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// An agent's tool calls run as tasks of their own (store.TaskAgentCall):
// the dispatcher admits each with a worker slot and a budget slice, like
// a fan-out child, while the agent is parked and holds none — so agents
// waiting on their own calls can never take every slot. A call task
// writes its end into the turn record and wakes the agent in one
// transaction; the agent's own writes of the record keep ends it did not
// see (putTurnTx).

// evAgentCallDone records the end of an agent's tool call run as a task:
// its turn and call, its tool, its E_ code if it failed.
const evAgentCallDone = "agent_call_done"

// agentTurnTx reads turn n of a visit of an agent node: one record, so a
// call's end costs the same whatever the turn's number.
func agentTurnTx(tx store.Tx, runID, node string, visit, n int) (*store.AgentTurn, error) {
	t, err := tx.AgentTurnGet(runID, node, visit, n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("agent %s: turn %d of visit %d is not journaled: %w", node, n, visit, store.ErrNotFound)
	}
	return t, err
}

// putTurnTx writes next, keeping the call ends (and queued tasks and
// child runs) the stored record has and next does not: a call task may
// have written its end since next was read. A call task of an agent that
// says on_unknown = "ask" may have written its unknown outcome instead
// (pending, with its error): kept unless next has taken it (answered,
// cleared or queued anew).
func putTurnTx(tx store.Tx, next *store.AgentTurn) (*store.AgentTurn, error) {
	stored, err := agentTurnTx(tx, next.RunID, next.Node, next.Visit, next.Turn)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	case len(stored.Calls) == len(next.Calls):
		for i, c := range stored.Calls {
			n := &next.Calls[i]
			if c.Done && !n.Done {
				*n = c
			}
			if callAsking(c) {
				if !n.Done && n.Error == nil && n.Task == c.Task {
					*n = c
				}
				continue
			}
			if n.Task == "" {
				n.Task = c.Task
			}
			if n.Child == "" {
				n.Child = c.Child
			}
			if len(n.Edited) == 0 {
				n.Edited = c.Edited
			}
		}
	}
	return next, tx.AgentTurnPut(next)
}

// parkOnCallsTx parks the agent until its n calls in flight end (each
// wakes it) or the first of its open unknown waits passes its deadline;
// if one of them ended since t was read, the park comes straight back.
// The fallback clock backs up a wake that never comes.
func (s *stepper) parkOnCallsTx(tx store.Tx, t *store.AgentTurn, now time.Time, n int, unknowns []*waitState) error {
	readyAt := unknownsUntil(unknowns, now.Add(subflowFallback()))
	stored, err := agentTurnTx(tx, t.RunID, t.Node, t.Visit, t.Turn)
	if err != nil {
		return err
	}
	for i, c := range stored.Calls {
		if c.Done && i < len(t.Calls) && !t.Calls[i].Done {
			readyAt = now
		}
	}
	return s.parkTx(tx, now, readyAt, WaitChild, "", map[string]any{"calls": n, "turn": t.Turn})
}

// callAsking says the call's outcome is unknown and waits for a person
// (on_unknown = "ask"): its task left the error on it without ending it.
func callAsking(c store.AgentCall) bool { return !c.Done && c.Error != nil }

// agentCallEndTx writes the end of the call task t into its turn record,
// charges its cost (admitted on reserved) to the run and wakes the agent
// (if parked). A call that already ended, or that another task now makes,
// is left as it is. asks leaves the call pending with rerr, its outcome
// unknown, for the agent's step to open its unknown wait.
func agentCallEndTx(tx store.Tx, host string, t *store.Task, out json.RawMessage, rerr *store.RunError, cost, reserved int64, asks bool, now time.Time) (bool, error) {
	turn, err := agentTurnTx(tx, t.RunID, t.Node, t.Visit, t.Item)
	if err != nil {
		return false, err
	}
	if t.Call < 0 || t.Call >= len(turn.Calls) || turn.Calls[t.Call].Done || (asks && turn.Calls[t.Call].Task != t.ID) {
		return false, nil
	}
	end := callEnded(turn.Calls[t.Call], out, rerr)
	if asks {
		end = turn.Calls[t.Call]
		end.Error = rerr
	}
	end.Cost = cost
	turn.Calls[t.Call] = end
	if err := tx.AgentTurnPut(turn); err != nil {
		return false, err
	}
	if _, err := chargeTx(tx, host, t.RunID, t.Attempt, t.Node, cost, reserved, map[string]any{"tool": t.Tool, "turn": t.Item, "call": t.Call}, now); err != nil {
		return false, err
	}
	if !asks {
		// The call's end in the timeline, where its lease is: what a
		// trace's span of the call ends at.
		detail := map[string]any{"task": t.ID, "turn": t.Item, "call": t.Call, "tool": t.Tool}
		if rerr != nil {
			detail["code"] = rerr.Code
		}
		if err := appendEvent(tx, t.RunID, evAgentCallDone, t.Attempt, t.Node, detail, now); err != nil {
			return false, err
		}
	}
	tasks, err := tx.TaskListByRun(t.RunID)
	if err != nil {
		return false, err
	}
	for _, st := range tasks {
		if st.Kind == store.TaskStep {
			return wakeParkedTx(tx, st, now)
		}
	}
	return false, nil
}

// runAgentCall runs one agent's tool call held as a task: through
// callTool with the index [turn, call] (a non-idempotent tool's started
// record makes a rerun after a crash E_OUTCOME_UNKNOWN), its end written
// into the turn record, which wakes the agent. A call the run's budget
// cannot pay ends with E_BUDGET_EXHAUSTED, told to the model.
func (w *worker) runAgentCall(ctx context.Context, run *store.Run, overBudget bool) {
	e, t := w.e, w.task
	fe, err := e.book.version(ctx, run.Flow, run.Version)
	if err != nil {
		w.agentCallEnd(ctx, nil, nil, &store.RunError{Code: CodeFlowUnreadable, Message: err.Error()}, 0, false)
		return
	}
	node := fe.flow.Node(t.Node)
	var turn, firstTurn *store.AgentTurn
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		if turn, err = agentTurnTx(tx, run.ID, t.Node, t.Visit, t.Item); err != nil {
			return err
		}
		firstTurn, err = agentTurnTx(tx, run.ID, t.Node, t.Visit, 1)
		return err
	}); err != nil || node == nil || t.Call >= len(turn.Calls) || turn.Calls[t.Call].Done {
		if ctx.Err() == nil {
			w.itemDrop(ctx, nil) // its agent moved on: nothing to do
		}
		return
	}
	w.live.protected.Store(node.Protected)
	if w.cancelRequested() {
		// Queued before its run's cancel and leased after it: the call is
		// never made, and the agent's step finishes the run cancelled.
		w.itemDrop(ctx, nil)
		return
	}
	if overBudget {
		w.agentCallEnd(ctx, nil, nil, &store.RunError{Code: CodeBudgetExhausted,
			Message: fmt.Sprintf("run budget %d cannot pay for this call of %s (spent %d)", run.Budget, t.Tool, run.Spent)}, 0, false)
		return
	}
	var msg chat.Message
	if err := json.Unmarshal(turn.Response, &msg); err != nil || t.Call >= len(msg.ToolCalls) {
		w.agentCallEnd(ctx, nil, nil, &store.RunError{Code: CodeAgentTurns, Message: fmt.Sprintf("turn %d's journaled answer does not hold call %d", t.Item, t.Call)}, 0, false)
		return
	}
	a := &agentLoop{node: node, started: firstTurn.At}
	timeout, ok := a.callTimeout(e.clock.Now())
	if !ok {
		w.agentCallEnd(ctx, nil, nil, &store.RunError{Code: CodeAgentTimeout, Message: fmt.Sprintf("agent %s ran past its timeout %s before this call", node.ID, node.Timeout)}, 0, false)
		return
	}
	args := msg.ToolCalls[t.Call].Arguments
	if edited := turn.Calls[t.Call].Edited; len(edited) > 0 {
		args = edited // a person's edit, recorded when the call was queued
	}
	info, _ := e.tools.LookupTool(t.Tool)
	input, err := callInput(info.InputSchema, args)
	if err != nil {
		w.agentCallEnd(ctx, nil, nil, &store.RunError{Code: CodeBadInput, Message: fmt.Sprintf("input for %s: %v", t.Tool, err)}, 0, false)
		return
	}
	c := &toolCall{Run: run, Attempt: t.Attempt, Node: node, Visit: t.Visit, Index: []int{t.Item, t.Call}, Tool: t.Tool,
		Input: input, Timeout: timeout, TaskID: t.ID}
	o := w.callTool(ctx, c, func(fn func(tx store.Tx) error) error { return w.itemCommit(ctx, fn) })
	applyCall(ctx, agentCallSite{w}, c, o)
}

// agentCallEnd writes the call's end (with its done record when
// recordDone), wakes the agent and drops the task, in one transaction.
func (w *worker) agentCallEnd(ctx context.Context, c *toolCall, out json.RawMessage, rerr *store.RunError, cost int64, recordDone bool) {
	w.agentCallWrite(ctx, c, out, rerr, cost, recordDone, false)
}

// agentCallWrite is agentCallEnd, or (asks) the call left pending with its
// unknown outcome rerr: its started record stays, and only a resolve or
// the wait's timeout ends it.
func (w *worker) agentCallWrite(ctx context.Context, c *toolCall, out json.RawMessage, rerr *store.RunError, cost int64, recordDone, asks bool) {
	e, t := w.e, w.task
	now := e.clock.Now()
	var woke bool
	err := w.itemCommit(ctx, func(tx store.Tx) error {
		if recordDone && c != nil {
			if err := idemDoneTx(tx, c, c.key(), out, rerr, now); err != nil {
				return err
			}
		}
		var err error
		if woke, err = agentCallEndTx(tx, hostOf(w.e), t, out, rerr, cost, w.slice.Cost, asks, now); err != nil {
			return err
		}
		return w.dropTaskTx(tx)
	})
	if rerr := recordErr(err); rerr != nil && rerr.Class == ClassRun && out != nil {
		// The end with its result is too large for the store: the call
		// ends failed without it.
		w.agentCallEnd(ctx, c, nil, &store.RunError{Code: rerr.Code, Message: rerr.Message}, cost, recordDone)
		return
	}
	if err == nil {
		if !asks {
			failpoint.Hit(failpoint.AgentCallEnded)
		}
		w.setLease(nil, true)
		// Settled before the woken agent's step takes its account's
		// figures from the store, which holds the cost already.
		w.slice, _, _ = e.ledger.Reslice(w.slice, w.spent, 0)
		w.spent = 0
		if woke {
			e.wake.kick()
		}
	}
}
