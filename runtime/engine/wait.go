package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// noTimeout parks a wait that declares no timeout: it wakes only by a
// decision.
const noTimeout = 100 * 365 * 24 * time.Hour

// waitNode parks the run until a decision or the wait's timeout, and on
// waking follows the decision: the approval's payload is the node's
// result; a rejection or the timeout takes the error wire.
func (s *stepper) waitNode(ctx context.Context, node *flows.Node) bool {
	e := s.e
	now := e.now()
	if s.cont.Waits == nil {
		s.cont.Waits = map[string]*waitState{}
	}
	ws := s.cont.Waits[node.ID]
	if ws == nil {
		timeout := node.Timeout
		if timeout <= 0 {
			timeout = noTimeout
		}
		ws = &waitState{Until: now.Add(timeout)}
		s.cont.Waits[node.ID] = ws
		detail := map[string]any{}
		if node.Args != nil {
			req, err := s.args(node)
			if err != nil {
				delete(s.cont.Waits, node.ID)
				return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
			}
			detail["request"] = json.RawMessage(req)
		}
		s.commit(ctx, func(tx store.Tx) error { return s.parkTx(tx, now, ws.Until, "human", "", detail) })
		return false
	}
	switch d := ws.Decision; {
	case d != nil && d.Approved:
		delete(s.cont.Waits, node.ID)
		payload := d.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("{}")
		}
		return s.resultDone(ctx, node, payload, map[string]any{"approved_by": d.By})
	case d != nil:
		delete(s.cont.Waits, node.ID)
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeRejected, Message: fmt.Sprintf("rejected by %s: %s", d.By, d.Reason)})
	case !now.Before(ws.Until):
		delete(s.cont.Waits, node.ID)
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeWaitTimeout, Message: fmt.Sprintf("nobody decided %s before %s", node.ID, ws.Until.Format(time.RFC3339))})
	}
	// Woken early without a decision: wait on until the deadline.
	s.commit(ctx, func(tx store.Tx) error { return s.parkTx(tx, now, ws.Until, "human", "", nil) })
	return false
}

// DecideParams is one decision on a human wait.
type DecideParams struct {
	// Owner is who decides; only the run's owner may (anyone else is told
	// the run does not exist).
	Owner string
	// RunID and Node name the wait.
	RunID string
	Node  string
	// Approve approves the wait; false rejects it.
	Approve bool
	// Payload is what an approval hands the node as its result (JSON,
	// optional); ignored on a rejection.
	Payload json.RawMessage
	// Reason says why a wait is rejected; the node's error carries it.
	Reason string
}

// Decide records an approval (p.Approve, with p.Payload) or a rejection
// (with p.Reason) of the wait at p.Node of p.Owner's run p.RunID, and
// wakes the run through the same path a child's end takes: its task's
// ready time set to now. A wait is decided once; a second decision is
// refused.
func (e *Engine) Decide(ctx context.Context, p DecideParams) error {
	owner, runID, node, approve, payload, reason := p.Owner, p.RunID, p.Node, p.Approve, p.Payload, p.Reason
	if approve && len(payload) > 0 {
		canon, err := canonicalInput(payload)
		if err != nil {
			return err
		}
		payload = canon
	}
	now := e.now()
	var refusal *Error
	err := e.st.Update(ctx, func(tx store.Tx) error {
		refusal = nil
		run, err := tx.RunGet(runID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && run.Owner != owner) {
			return errNotYours
		}
		if err != nil {
			return err
		}
		notWaiting := func(why string) error {
			refusal = protocolErr(CodeNotWaiting, "run %s is not waiting for a decision at node %s: %s", runID, node, why)
			return errSkip
		}
		if run.Phase.Terminal() {
			return notWaiting("it is " + string(run.Phase))
		}
		tasks, err := tx.TaskListByRun(runID)
		if err != nil {
			return err
		}
		var t *store.Task
		for _, c := range tasks {
			if c.Kind == store.TaskStep {
				t = c
			}
		}
		if t == nil || t.WaitKind != "human" || t.Node != node {
			return notWaiting("no wait is open there")
		}
		raw, err := tx.ContinuationGet(runID)
		if err != nil {
			return err
		}
		c, err := decodeContinuation(raw)
		if err != nil {
			return err
		}
		ws := c.Waits[node]
		if ws == nil {
			return notWaiting("no wait is open there")
		}
		if ws.Decision != nil {
			verb := "rejected"
			if ws.Decision.Approved {
				verb = "approved"
			}
			refusal = protocolErr(CodeAlreadyDecided, "the wait at node %s of run %s was already %s by %s at %s; a wait is decided once",
				node, runID, verb, ws.Decision.By, ws.Decision.At.Format(time.RFC3339))
			return errSkip
		}
		if t.Leased {
			return notWaiting("it is being resumed (its timeout passed)")
		}
		ws.Decision = &decision{Approved: approve, Payload: payload, Reason: reason, By: owner, At: now}
		if err := tx.ContinuationPut(runID, encodeContinuation(c)); err != nil {
			return err
		}
		t.ReadyAt = now
		if err := tx.TaskPut(t); err != nil {
			return err
		}
		typ, detail := "approved", map[string]any{"by": owner}
		if !approve {
			typ, detail["reason"] = "rejected", reason
		}
		return appendEvent(tx, runID, typ, run.Attempt, node, detail, now)
	})
	switch {
	case errors.Is(err, errNotYours):
		e.auditForeign(ctx, owner, runID, "decide")
		return protocolErr(CodeNotFound, "no run %s", runID)
	case refusal != nil:
		return refusal
	case err != nil:
		return e.storageFailed(err)
	}
	e.kick()
	return nil
}

// HumanWait is a wait that needs a person's decision.
type HumanWait struct {
	RunID string    `json:"run_id"`
	Flow  string    `json:"flow"`
	Node  string    `json:"node"`
	Until time.Time `json:"until"`
}

// HumanWaits lists the open human waits of owner's run and its
// descendants: what a person must decide for the run to go on.
func (e *Engine) HumanWaits(ctx context.Context, owner, runID string) ([]HumanWait, error) {
	if _, err := e.Get(ctx, owner, runID); err != nil {
		return nil, err
	}
	var out []HumanWait
	err := e.st.View(ctx, func(tx store.Tx) error {
		queue := []string{runID}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			run, err := tx.RunGet(id)
			if err != nil {
				return err
			}
			tasks, err := tx.TaskListByRun(id)
			if err != nil {
				return err
			}
			for _, t := range tasks {
				if t.WaitKind == "human" && !t.Leased {
					out = append(out, HumanWait{RunID: id, Flow: run.Flow, Node: t.Node, Until: t.ReadyAt})
				}
			}
			kids, err := tx.RunList(store.RunListParams{ParentRunID: id})
			if err != nil {
				return err
			}
			for _, k := range kids {
				if !k.Phase.Terminal() {
					queue = append(queue, k.ID)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, e.readFailed(err)
	}
	return out, nil
}
