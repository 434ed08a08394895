package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/internal/ledger"
	ownerctx "github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/store"
)

// stepper walks one run's graph while its worker holds the lease,
// persisting the continuation after every step.
type stepper struct {
	*worker
	run  *store.Run
	fe   *flowEntry
	cont *continuation
	// taskDirty says the task record changed in memory (its wait cleared)
	// and goes with the next commit.
	taskDirty bool
	// after is what the transaction being written changes in memory
	// once it commits.
	after stepEffects
}

// stepEffects are the in-memory effects of one step's transaction,
// applied only after Update returns nil: a failed (or re-run) transaction
// leaves the worker's memory as it was.
type stepEffects struct {
	released *store.Task // the task given back to the queue
	phase    store.Phase // the run's new phase, if any
}

// run executes a held step task until the run finishes, parks or yields
// its slot. Errors are recorded in the run; nothing escapes.
func (w *worker) run(ctx context.Context, run *store.Run, overBudget bool) {
	e := w.e
	s := &stepper{worker: w, run: run}
	fe, err := e.book.version(ctx, run.Flow, run.Version)
	if ctx.Err() != nil {
		s.interrupted(ctx) // cancelled or stopping before the first step
		return
	}
	if err != nil {
		s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: CodeFlowUnreadable, Message: err.Error()})
		return
	}
	s.fe = fe
	raw, err := readContinuation(ctx, e.st, run.ID)
	if ctx.Err() != nil {
		s.interrupted(ctx)
		return
	}
	if err == nil {
		s.cont, err = decodeContinuation(raw)
	}
	if err != nil {
		s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: CodeContinuation, Message: err.Error()})
		return
	}
	for {
		if w.cancelRequested() {
			s.finish(ctx, store.PhaseCancelled, nil, nil)
			return
		}
		if ctx.Err() != nil {
			return // engine stopping or lease lost: the lease is rescued later
		}
		if s.cont.Node == "" {
			s.complete(ctx)
			return
		}
		node := fe.flow.Node(s.cont.Node)
		if node == nil {
			s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: CodeContinuation,
				Message: fmt.Sprintf("continuation points at node %q, which flow %s version %s does not have", s.cont.Node, run.Flow, run.Version)})
			return
		}
		if node.MaxVisits > 0 && s.cont.Visits[node.ID] > node.MaxVisits {
			// The error wire's node is paid for like any next node.
			if !s.nodeFailed(ctx, node, &store.RunError{Code: CodeMaxVisits,
				Message: fmt.Sprintf("node %s entered %d times, more than its max_visits %d", node.ID, s.cont.Visits[node.ID], node.MaxVisits)}) || !s.nextSlice(ctx) {
				return
			}
			continue
		}
		if overBudget {
			// Admitted on a slot alone: the node runs nothing, and its
			// error wire's node must find its own slice.
			overBudget = false
			if !s.nodeFailed(ctx, node, &store.RunError{Code: CodeBudgetExhausted,
				Message: fmt.Sprintf("run budget %d is spent (%d) and node %s costs more", run.Budget, run.Spent, node.ID)}) || !s.nextSlice(ctx) {
				return
			}
			continue
		}
		var more bool
		w.live.protected.Store(node.Protected)
		switch node.Kind {
		case flows.KindTask:
			more = s.toolNode(ctx, node)
		case flows.KindBranch:
			more = s.branchNode(ctx, node)
		case flows.KindSubflow:
			more = s.subflowNode(ctx, node)
		case flows.KindWait:
			more = s.waitNode(ctx, node)
		case flows.KindFanout:
			more = s.fanoutNode(ctx, node)
		case flows.KindAgent:
			more = s.agentNode(ctx, node)
		default:
			more = s.nodeFailed(ctx, node, &store.RunError{Code: CodeUnsupported,
				Message: fmt.Sprintf("node kind %s is not supported by this engine yet", node.Kind)})
		}
		if !more {
			return
		}
		if !s.nextSlice(ctx) {
			return
		}
	}
}

// interrupted handles a context ended before the walk began: a cancel
// finishes the run cancelled; a stop leaves the task to the drain.
func (s *stepper) interrupted(ctx context.Context) {
	if s.cancelRequested() {
		s.finish(ctx, store.PhaseCancelled, nil, nil)
	}
}

func (w *worker) cancelRequested() bool {
	return w.live.isCancelRequested()
}

// nextSlice settles what the last node spent and reserves the budget
// slice of the node the run moves to, keeping the slot. If the run's own
// budget cannot pay, the node takes its error wire; if the engine-wide
// budget in flight is used up, the run yields: its task goes back to the
// queue and the slot is freed.
//
// A run that has spent past its budget (a tool or a model reported more
// than its call reserved) is refused every next node, whatever it costs:
// what it overspent never buys it more work. At the end of the graph
// there is nothing left to pay for, and the run completes.
func (s *stepper) nextSlice(ctx context.Context) bool {
	e := s.e
	var cost int64
	node := s.fe.flow.Node(s.cont.Node)
	if node != nil {
		cost = e.book.nodeCost(node)
	}
	slice, why, ok := e.ledger.Reslice(s.slice, s.spent, cost)
	s.slice, s.spent = slice, 0
	switch {
	case ok || node == nil:
		// node is nil at the end of the graph (and for a continuation
		// naming a node the flow lacks, which the walk reports).
		return true
	case why == ledger.RunBudgetExhausted:
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeBudgetExhausted,
			Message: fmt.Sprintf("run budget %d cannot pay %d more for node %s (spent %d)", s.run.Budget, cost, node.ID, e.ledger.Spent(s.run.ID))}) && s.nextSlice(ctx)
	}
	e.stats.admissionBlocked(string(why))
	now := e.clock.Now()
	s.commit(ctx, func(tx store.Tx) error {
		return s.releaseTaskTx(tx, now, now, "", "")
	})
	return false
}

// commit writes one step: the fence, the continuation and fn's writes, in
// one durable transaction. The lease deadline is left to the renewer: a
// deadline rewritten on every step would churn the expiry index that the
// rescuer scans. It reports success; a lost
// lease or a stop ends the work quietly, a storage error closes admission.
func (s *stepper) commit(ctx context.Context, fn func(tx store.Tx) error) bool {
	return s.commitE(ctx, fn) == nil
}

// commitE is commit returning the error, for callers whose fn returns a
// sentinel they act on.
func (s *stepper) commitE(ctx context.Context, fn func(tx store.Tx) error) error {
	e := s.e
	err := e.st.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		s.after = stepEffects{}
		if err := s.workFenceTx(tx); err != nil {
			return err
		}
		if err := s.takeDecisionsTx(tx); err != nil {
			return err
		}
		if err := tx.ContinuationPut(s.run.ID, encodeContinuation(s.cont)); err != nil {
			return err
		}
		if s.taskDirty {
			if err := putHeldTx(tx, s.task); err != nil {
				return err
			}
		}
		return fn(tx)
	})
	after := s.after
	s.after = stepEffects{}
	switch {
	case err == nil:
		s.taskDirty = false
		if after.released != nil {
			*s.task = *after.released
			s.setLease(nil, true)
		}
		if after.phase != "" {
			s.run.Phase = after.phase
		}
	case errors.Is(err, errLeaseLost):
		e.log.Warn("lease lost, step discarded", s.logFields("task", s.task.ID)...)
	case errors.Is(err, errUnknownOutcome), errors.Is(err, errEscrowRefused), errors.Is(err, errCancelSeen):
	default:
		if rerr := recordErr(err); rerr != nil && rerr.Class == ClassRun {
			// This step's writes are too large for the store: the run
			// fails, so the step is not tried again after a restart.
			e.log.Warn("step too large for the store, run fails", s.logFields("task", s.task.ID, "error", err)...)
			s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: rerr.Code, Message: rerr.Message})
			return err
		}
		e.admission.storageFailed(err)
		e.log.Error("writing step", s.logFields("error", err)...)
	}
	return err
}

// takeDecisionsTx copies into the continuation in memory the decisions
// given on its open approvals since it was read: a person may decide one
// of an agent's proposed calls while the agent runs its others, and the
// step must not write over that decision.
func (s *stepper) takeDecisionsTx(tx store.Tx) error {
	if len(s.cont.Approvals) == 0 {
		return nil
	}
	raw, err := tx.ContinuationGet(s.run.ID)
	if err != nil {
		return err
	}
	stored, err := decodeContinuation(raw)
	if err != nil {
		return err
	}
	for id, ws := range s.cont.Approvals {
		if got := stored.Approvals[id]; ws.Decision == nil && got != nil && got.Decision != nil {
			ws.Decision = got.Decision
		}
	}
	return nil
}

// releaseTaskTx gives the task back to the queue at readyAt (now: yield
// or retry later; future: park on a wait). The worker's copy of the task
// and its lease change once the commit succeeds.
func (s *stepper) releaseTaskTx(tx store.Tx, now, readyAt time.Time, waitKind, waitChild string) error {
	t := *s.task
	t.Node = s.cont.Node
	t.WaitKind, t.WaitChild = waitKind, waitChild
	released, err := parkHeldTx(tx, &t, now, readyAt)
	if err != nil {
		return err
	}
	s.after.released = released
	return tx.LeaseDelete(t.ID)
}

// advance moves the continuation along a wire and counts the visit.
func (s *stepper) advance(to string) {
	s.cont.leaving(s.cont.Node)
	s.cont.Node = to
	s.cont.Tries = 0
	if to != "" {
		if s.cont.Visits == nil {
			s.cont.Visits = map[string]int{}
		}
		s.cont.Visits[to]++
	}
}

// evalCtx is what a callable's evaluation runs under: not cancelled with
// the step (a cancel is decided between evaluations) but ended when the
// work is abandoned at a drain's grace, and carrying the run's owner,
// whose share of the sandbox it takes.
func (s *stepper) evalCtx() context.Context {
	base := context.Background()
	if s.live != nil && s.live.evalCtx != nil {
		base = context.WithValue(s.live.evalCtx, liveKey{}, s.live)
	}
	return ownerctx.WithOwner(base, s.run.Owner)
}

// flowCtx is the read-only context callables see.
func (s *stepper) flowCtx() flows.Context {
	// Input and results stay JSON: a callable decodes only what it reads,
	// and a sandbox ships them as they are.
	results := make(map[string]any, len(s.cont.Results))
	for id, r := range s.cont.Results {
		results[id] = r
	}
	var input any
	if len(s.run.Input) > 0 {
		input = s.run.Input
	}
	return flows.Context{RunID: s.run.ID, Attempt: s.run.Attempt, Input: input, Results: results}
}

// nodeFailed sends the run down node's error wire, or fails the run if the
// node has none. It reports whether the run goes on in this worker.
func (s *stepper) nodeFailed(ctx context.Context, node *flows.Node, rerr *store.RunError) bool {
	if lerr := s.fe.scriptLimitError(); lerr != nil {
		s.finish(ctx, store.PhaseFailed, nil, lerr)
		return false
	}
	now := s.e.clock.Now()
	if s.cont.Errors == nil {
		s.cont.Errors = map[string]*store.RunError{}
	}
	s.cont.Errors[node.ID] = rerr
	if node.Error == "" {
		s.finish(ctx, store.PhaseFailed, nil, rerr)
		return false
	}
	s.advance(node.Error)
	return s.commit(ctx, func(tx store.Tx) error {
		return appendEvent(tx, s.run.ID, evNodeFailed, s.run.Attempt, node.ID,
			map[string]any{"code": rerr.Code, "message": rerr.Message, "wire": node.Error}, now)
	})
}

// branchNode evaluates the condition and follows then or otherwise.
func (s *stepper) branchNode(ctx context.Context, node *flows.Node) bool {
	v, err := s.fe.call(s.evalCtx(), *node.Cond, s.flowCtx())
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
	}
	to := node.Otherwise
	if truthy(v) {
		to = node.Then
	}
	now := s.e.clock.Now()
	s.advance(to)
	return s.commit(ctx, func(tx store.Tx) error {
		return appendEvent(tx, s.run.ID, evNodeDone, s.run.Attempt, node.ID, map[string]any{"wire": to}, now)
	})
}

// toolNode calls the node's tool through callTool and applies the end.
func (s *stepper) toolNode(ctx context.Context, node *flows.Node) bool {
	if s.stillExhausted(ctx, node) {
		return false
	}
	if handled, more := s.unknownWake(ctx, node); handled {
		return more
	}
	input, err := s.args(node)
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
	}
	c := &toolCall{Run: s.run, Attempt: s.run.Attempt, Node: node, Visit: s.cont.Visits[node.ID], Tool: node.Tool, Input: input,
		Timeout: node.Timeout, Retries: node.Retries, Tries: s.cont.Tries, TaskID: s.task.ID}
	o := s.callTool(ctx, c, func(fn func(tx store.Tx) error) error { return s.commitE(ctx, fn) })
	return applyCall(ctx, nodeSite{s}, c, o)
}

// toolDone records a tool's result and advances along next.
func (s *stepper) toolDone(ctx context.Context, c *toolCall, o callOutcome) bool {
	now := s.e.clock.Now()
	var spent int64
	// The arguments and the answer go on the event: the continuation
	// keeps only a node's last result, and a recording of the run
	// (runtime/replay) answers each visit's call from its own event.
	detail := map[string]any{"tool": c.Tool, "cost": o.Cost, "args": jsonOrEmpty(c.Input), "output": jsonOrNull(o.Output)}
	ok := s.resultDoneTx(ctx, c.Node, o.Output, detail, func(tx store.Tx) error {
		spent = 0
		if o.RecordDone {
			if err := idemDoneTx(tx, c, o.Key, o.Output, nil, now); err != nil {
				return err
			}
		}
		if o.Cost > 0 {
			var err error
			if spent, err = s.chargeTx(tx, c.Node.ID, o.Cost, s.slice.Cost, map[string]any{"tool": c.Tool}, now); err != nil {
				return err
			}
		}
		return nil
	})
	if ok {
		if o.Cost > 0 {
			s.run.Spent = spent
		}
		failpoint.Hit(failpoint.AfterResult)
	}
	return ok
}

// resultDone records a node's result and advances along next.
func (s *stepper) resultDone(ctx context.Context, node *flows.Node, out json.RawMessage, detail map[string]any) bool {
	return s.resultDoneTx(ctx, node, out, detail, nil)
}

// resultDoneTx is resultDone with extra writes in the same transaction.
func (s *stepper) resultDoneTx(ctx context.Context, node *flows.Node, out json.RawMessage, detail map[string]any, extra func(tx store.Tx) error) bool {
	now := s.e.clock.Now()
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if len(out) > MaxResultBytes {
		return s.nodeFailed(ctx, node, resultTooLarge("the result of node "+node.ID, len(out)))
	}
	s.cont.Results[node.ID] = out
	s.cont.Last = node.ID
	s.advance(node.Next)
	return s.commit(ctx, func(tx store.Tx) error {
		if extra != nil {
			if err := extra(tx); err != nil {
				return err
			}
		}
		return appendEvent(tx, s.run.ID, evNodeDone, s.run.Attempt, node.ID, detail, now)
	})
}

// retryLater parks the task until the call's next try, keeping the try's
// error for the dead letter.
func (s *stepper) retryLater(ctx context.Context, c *toolCall, o callOutcome) bool {
	now := s.e.clock.Now()
	s.cont.Tries++
	s.task.Errors = append(s.task.Errors, o.Try)
	s.commit(ctx, func(tx store.Tx) error {
		if err := s.releaseTaskTx(tx, now, o.RetryAt, "", ""); err != nil {
			return err
		}
		return retryEventTx(tx, c, o, now)
	})
	return false
}

// exhausted dead-letters a call whose every try failed, then takes the
// error wire (or fails the run), or parks the run for a redrive when the
// node says on_exhausted = "park".
func (s *stepper) exhausted(ctx context.Context, node *flows.Node, tool string, o callOutcome) bool {
	s.task.Errors = append(s.task.Errors, o.Try)
	t := *s.task
	t.Node = node.ID
	if node.Parks() {
		return s.parkExhausted(ctx, node, &t, tool, o)
	}
	if !s.commit(ctx, func(tx store.Tx) error { return s.e.journal.deadLetterTx(tx, s.run, &t, tool) }) {
		return false
	}
	s.e.stats.deadLettered()
	s.task.Errors = nil
	return s.nodeFailed(ctx, node, o.Err)
}

// args evaluates the node's args callable (or {}) to JSON.
func (s *stepper) args(node *flows.Node) (json.RawMessage, error) {
	if node.Args == nil {
		return json.RawMessage("{}"), nil
	}
	v, err := s.fe.call(s.evalCtx(), *node.Args, s.flowCtx())
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("args of %s: %w", node.ID, err)
	}
	return b, nil
}

// complete computes the output and finishes the run completed.
func (s *stepper) complete(ctx context.Context) {
	var out json.RawMessage
	if ref := s.fe.flow.Output; ref != nil {
		v, err := s.fe.call(s.evalCtx(), *ref, s.flowCtx())
		if lerr := s.fe.scriptLimitError(); lerr != nil {
			s.finish(ctx, store.PhaseFailed, nil, lerr)
			return
		}
		if err != nil {
			s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: CodeCallable, Message: "output: " + err.Error()})
			return
		}
		if out, err = json.Marshal(v); err != nil {
			s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: CodeCallable, Message: "output: " + err.Error()})
			return
		}
	} else if s.cont.Last != "" {
		out = s.cont.Results[s.cont.Last]
	}
	if len(out) > MaxResultBytes {
		s.finish(ctx, store.PhaseFailed, nil, resultTooLarge("the run's output", len(out)))
		return
	}
	s.finish(ctx, store.PhaseCompleted, out, nil)
}

// finish makes the finish decision (phase completing, after which a cancel
// is too late) and writes the terminal record.
func (s *stepper) finish(ctx context.Context, phase store.Phase, out json.RawMessage, rerr *store.RunError) {
	e := s.e
	phase = s.live.decideFinish(phase)
	if phase == store.PhaseCancelled && rerr == nil {
		rerr = &store.RunError{Code: CodeCancelled, Message: "the run was cancelled"}
	}
	failpoint.Hit(failpoint.MidFinish)
	now := e.clock.Now()
	var woke bool
	err := e.st.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		if err := s.workFenceTx(tx); err != nil {
			return err
		}
		if s.cont != nil {
			if err := tx.ContinuationPut(s.run.ID, encodeContinuation(s.cont)); err != nil {
				return err
			}
		}
		run, err := tx.RunGet(s.run.ID)
		if err != nil {
			return err
		}
		woke, err = e.journal.finishTx(tx, run, phase, out, rerr, now)
		return err
	})
	if err != nil {
		if rerr := recordErr(err); rerr != nil && rerr.Class == ClassRun && s.cont != nil {
			// The continuation is what is too large: finish failed
			// without writing it, which a terminal run does not need.
			e.log.Warn("finish too large for the store, run fails", s.logFields("error", err)...)
			s.cont = nil
			s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: rerr.Code, Message: rerr.Message})
			return
		}
		if !errors.Is(err, errLeaseLost) {
			e.admission.storageFailed(err)
			e.log.Error("writing finish", s.logFields("error", err)...)
		}
		return
	}
	e.stats.finished(phase)
	e.ledger.CloseRun(s.run.ID)
	if woke {
		e.wake.kick()
	}
}

// truthy follows Starlark's truth for the JSON values callables return.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case int64:
		return x != 0
	case int:
		return x != 0
	case json.Number:
		return x.String() != "0" && x.String() != "0.0"
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// jsonOrEmpty is a call's input as it goes on an event: {} for none.
func jsonOrEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// jsonOrNull is a result as it goes on an event: null for none.
func jsonOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
