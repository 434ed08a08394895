package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// A turn's calls of the agent's flows are child runs that run together,
// beside the turn's tool calls: every one not started yet is started in
// one write, which records each child in the turn (so a crash can neither
// lose a child nor start a second) and takes each child's escrow out of
// the run's remainder. The agent parks on the first child still running;
// when it ends the agent looks at them all again and parks on the next,
// so the turn goes on once the last has ended, however they are ordered.

// startFlowCalls starts the children of the calls of the agent's flows in
// turn t that have none yet. A call whose child cannot be made (an
// unknown flow, an input its schema refuses, a cycle, a budget that
// cannot hold its escrow) ends with why, told to the model. false: the
// write failed and the step ends.
func (s *stepper) startFlowCalls(ctx context.Context, a *agentLoop, t *store.AgentTurn, msg chat.Message, calls []int) bool {
	e, node := s.e, a.node
	var fresh []int
	for _, i := range calls {
		if t.Calls[i].Child == "" {
			fresh = append(fresh, i)
		}
	}
	if len(fresh) == 0 {
		return true
	}
	type start struct {
		call  int
		child *store.Run
		task  *store.Task
		entry string
	}
	var starts []start
	next := *t
	next.Calls = slices.Clone(t.Calls)
	s.written(&next)
	share := s.flowCallShare(ctx, t, fresh)
	for _, i := range fresh {
		child, task, entry, rerr := s.prepareAgentChild(ctx, a, t.Calls[i].Tool, msg.ToolCalls[i].Arguments, share)
		if rerr != nil {
			next.Calls[i] = callEnded(next.Calls[i], nil, rerr)
			continue
		}
		next.Calls[i].Child = child.ID
		starts = append(starts, start{call: i, child: child, task: task, entry: entry})
	}
	var merged *store.AgentTurn
	err := s.commitE(ctx, func(tx store.Tx) error {
		for _, st := range starts {
			if err := escrowTx(tx, s.run.ID, st.child); err != nil {
				return err
			}
			if err := e.journal.insertRun(tx, st.child, st.task, st.entry, map[string]any{"parent": s.run.ID, "node": node.ID, "turn": t.Turn, "call": st.call}); err != nil {
				return err
			}
		}
		var err error
		merged, err = putTurnTx(tx, &next)
		return err
	})
	if err != nil {
		for _, st := range starts {
			s.unreserveChild(st.child.Reserve)
		}
		if !errors.Is(err, errEscrowRefused) {
			s.cancelSeen(ctx, err)
			return false
		}
		// The run's recorded figures cannot hold the children's escrow
		// together: none is started, and each call says so.
		ends := map[int]store.AgentCall{}
		for _, st := range starts {
			ends[st.call] = callEnded(t.Calls[st.call], nil, s.escrowRefusal("a child run of flow "+t.Calls[st.call].Tool, st.child.Reserve, s.remainder()))
		}
		for _, i := range fresh {
			if c := next.Calls[i]; c.Done {
				ends[i] = c
			}
		}
		return s.agentCallsDone(ctx, t, ends, 0, nil)
	}
	*t = *merged
	if len(starts) > 0 {
		e.wake.kick()
	}
	return true
}

// flowCallShare is what the child of a call of a flow that declares no
// budget holds in escrow when calls are started together: the run's
// remainder less the budgets the other flows declare, shared equally
// between the calls of flows without one (all of it for one alone, as a
// subflow takes); 0 under a run without a budget.
func (s *stepper) flowCallShare(ctx context.Context, t *store.AgentTurn, fresh []int) int64 {
	if s.run.Budget == 0 {
		return 0
	}
	var declared int64
	n := 0
	for _, i := range fresh {
		cfe, err := s.e.book.latest(ctx, t.Calls[i].Tool)
		switch {
		case err != nil:
			// Refused when its child is prepared.
		case cfe.flow.Budget > 0:
			declared += cfe.flow.Budget
		default:
			n++
		}
	}
	if n == 0 || s.syncAccount(ctx) != nil {
		return 0
	}
	return max(1, (s.remainder()-declared)/int64(n))
}

// agentFlowCalls ends the calls of the agent's flows in turn t whose
// child ended (its output, or its error, is the call's result) and parks
// the agent on the first child still running. loop says every one ended
// and the agent goes on in this worker.
func (s *stepper) agentFlowCalls(ctx context.Context, a *agentLoop, t *store.AgentTurn, calls []int) (loop, more bool) {
	e, node := s.e, a.node
	var started []int
	for _, i := range calls {
		if c := t.Calls[i]; !c.Done && c.Child != "" {
			started = append(started, i)
		}
	}
	if len(started) == 0 {
		return true, false
	}
	children := map[int]*store.Run{}
	err := e.st.View(ctx, func(tx store.Tx) error {
		for _, i := range started {
			child, err := tx.RunGet(t.Calls[i].Child)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			children[i] = child
		}
		return nil
	})
	if ctx.Err() != nil {
		return false, false
	}
	ends := map[int]store.AgentCall{}
	var running []int
	for _, i := range started {
		c := t.Calls[i]
		switch child := children[i]; {
		case err != nil:
			ends[i] = callEnded(c, nil, &store.RunError{Code: CodeChildUnreadable, Message: fmt.Sprintf("child run %s of the call of %s cannot be read: %v", c.Child, c.Tool, err)})
		case child == nil:
			ends[i] = callEnded(c, nil, &store.RunError{Code: CodeChildVanished, Message: fmt.Sprintf("child run %s of the call of %s no longer exists", c.Child, c.Tool)})
		case !child.Phase.Terminal():
			running = append(running, i)
		case child.Phase == store.PhaseCompleted:
			ends[i] = callEnded(c, child.Output, nil)
		case child.Error != nil:
			ends[i] = callEnded(c, nil, &store.RunError{Code: child.Error.Code, Message: fmt.Sprintf("child run %s of %s: %s", c.Child, c.Tool, child.Error.Message)})
		default:
			ends[i] = callEnded(c, nil, &store.RunError{Code: CodeChildFailed, Message: fmt.Sprintf("child run %s of %s ended %s", c.Child, c.Tool, child.Phase)})
		}
	}
	if len(running) == 0 {
		delete(s.cont.Waits, node.ID)
		if s.task.WaitChild != "" {
			s.task.WaitChild, s.task.WaitKind = "", ""
			s.taskDirty = true
		}
	}
	if len(ends) > 0 && !s.agentCallsDone(ctx, t, ends, 0, nil) {
		return false, false
	}
	if len(running) == 0 {
		return true, false
	}
	s.parkOnFlowCall(ctx, a, t, running[0], len(running))
	return false, false
}

// parkOnFlowCall parks the agent on the child of call i of turn t, one of
// n still running; a child that ended since it was read brings the agent
// straight back. The fallback clock backs up a wake that never comes.
func (s *stepper) parkOnFlowCall(ctx context.Context, a *agentLoop, t *store.AgentTurn, i, n int) {
	node, c := a.node, t.Calls[i]
	now := s.e.clock.Now()
	until := now.Add(subflowFallback())
	// The child wait's id places the call, as an approval's does.
	if s.cont.Waits == nil {
		s.cont.Waits = map[string]*waitState{}
	}
	s.cont.Waits[node.ID] = &waitState{ID: WaitID(node.ID, a.visit, t.Turn, i), Kind: WaitChild, Node: node.ID, Since: now,
		Until: until, Visit: a.visit, Call: []int{t.Turn, i}}
	detail := map[string]any{"flow": c.Tool, "turn": t.Turn, "call": i, "child": c.Child, "running": n}
	s.commit(ctx, func(tx store.Tx) error {
		readyAt := until
		if child, err := tx.RunGet(c.Child); err != nil || child.Phase.Terminal() {
			readyAt = now
		}
		return s.parkTx(tx, now, readyAt, WaitChild, c.Child, detail)
	})
}
