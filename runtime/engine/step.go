package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/internal/ledger"
	"github.com/weirhq/weir/runtime/store"
)

// defaultToolTimeout bounds a tool call whose node declares no timeout.
const defaultToolTimeout = 5 * time.Minute

// stepper walks one run's graph while its worker holds the lease,
// persisting the continuation after every step.
type stepper struct {
	*worker
	run  *store.Run
	fe   *flowEntry
	cont *continuation
	// results is cont.Results decoded, for callables' ctx.results.
	results map[string]any
	input   any
	// taskDirty says the task record changed in memory (its wait cleared)
	// and goes with the next commit.
	taskDirty bool
}

// run executes a held step task until the run finishes, parks or yields
// its slot. Errors are recorded in the run; nothing escapes.
func (w *worker) run(ctx context.Context, run *store.Run, overBudget bool) {
	e := w.e
	s := &stepper{worker: w, run: run}
	fe, err := e.flowVersion(ctx, run.Flow, run.Version)
	if ctx.Err() != nil {
		s.interrupted(ctx) // cancelled or stopping before the first step
		return
	}
	if err != nil {
		s.finish(ctx, store.PhaseFailed, nil, &store.RunError{Code: CodeFlowUnreadable, Message: err.Error()})
		return
	}
	s.fe = fe
	var raw []byte
	err = e.st.View(ctx, func(tx store.Tx) error {
		var err error
		raw, err = tx.ContinuationGet(run.ID)
		return err
	})
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
	if err := json.Unmarshal(run.Input, &s.input); err != nil {
		s.input = nil
	}
	s.results = make(map[string]any, len(s.cont.Results))
	for id, r := range s.cont.Results {
		var v any
		_ = json.Unmarshal(r, &v)
		s.results[id] = v
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
			if !s.nodeFailed(ctx, node, &store.RunError{Code: "E_MAX_VISITS",
				Message: fmt.Sprintf("node %s entered %d times, more than its max_visits %d", node.ID, s.cont.Visits[node.ID], node.MaxVisits)}) {
				return
			}
			continue
		}
		if overBudget {
			overBudget = false
			if !s.nodeFailed(ctx, node, &store.RunError{Code: CodeBudgetExhausted,
				Message: fmt.Sprintf("run budget %d is spent (%d) and node %s costs more", run.Budget, run.Spent, node.ID)}) {
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
		default:
			more = s.nodeFailed(ctx, node, &store.RunError{Code: "E_UNSUPPORTED",
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
	w.live.mu.Lock()
	defer w.live.mu.Unlock()
	return w.live.cancelRequested
}

// nextSlice settles what the last node spent and reserves the budget
// slice of the node the run moves to, keeping the slot. If the run's own
// budget cannot pay, the node takes its error wire; if the engine-wide
// budget in flight is used up, the run yields: its task goes back to the
// queue and the slot is freed.
func (s *stepper) nextSlice(ctx context.Context) bool {
	e := s.e
	var cost int64
	node := s.fe.flow.Node(s.cont.Node)
	if node != nil {
		cost = e.nodeCost(node)
	}
	slice, why, ok := e.ledger.Reslice(s.slice, s.spent, cost)
	s.slice, s.spent = slice, 0
	switch {
	case ok:
		return true
	case why == ledger.RunBudgetExhausted:
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeBudgetExhausted,
			Message: fmt.Sprintf("run budget %d cannot pay %d more for node %s (spent %d)", s.run.Budget, cost, node.ID, e.ledger.Spent(s.run.ID))}) && s.nextSlice(ctx)
	}
	e.stats.admissionBlocked(string(why))
	now := e.now()
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
		if err := s.fenceTx(tx); err != nil {
			return err
		}
		if err := tx.ContinuationPut(s.run.ID, encodeContinuation(s.cont)); err != nil {
			return err
		}
		if s.taskDirty {
			t := *s.task
			if err := tx.TaskPut(&t); err != nil {
				return err
			}
		}
		return fn(tx)
	})
	switch {
	case err == nil:
		s.taskDirty = false
	case errors.Is(err, errLeaseLost):
		e.log.Warn("lease lost, step discarded", "run", s.run.ID, "task", s.task.ID)
	case errors.Is(err, errUnknownOutcome):
	default:
		e.storageFailed(err)
		e.log.Error("writing step", "run", s.run.ID, "error", err)
	}
	return err
}

// releaseTaskTx gives the task back to the queue at readyAt (now: yield
// or retry later; future: park on a wait).
func (s *stepper) releaseTaskTx(tx store.Tx, now, readyAt time.Time, waitKind, waitChild string) error {
	t := *s.task
	t.Leased = false
	t.Node = s.cont.Node
	t.ReadyAt = readyAt
	t.WaitKind, t.WaitChild = waitKind, waitChild
	if err := tx.TaskPut(&t); err != nil {
		return err
	}
	*s.task = t
	s.taskDirty = false
	s.setLease(nil, true)
	return tx.LeaseDelete(t.ID)
}

// advance moves the continuation along a wire and counts the visit.
func (s *stepper) advance(to string) {
	s.cont.Node = to
	s.cont.Tries = 0
	if to != "" {
		if s.cont.Visits == nil {
			s.cont.Visits = map[string]int{}
		}
		s.cont.Visits[to]++
	}
}

// flowCtx is the read-only context callables see.
func (s *stepper) flowCtx() flows.Context {
	return flows.Context{RunID: s.run.ID, Attempt: s.run.Attempt, Input: s.input, Results: s.results}
}

// nodeFailed sends the run down node's error wire, or fails the run if the
// node has none. It reports whether the run goes on in this worker.
func (s *stepper) nodeFailed(ctx context.Context, node *flows.Node, rerr *store.RunError) bool {
	now := s.e.now()
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
	v, err := s.fe.call(*node.Cond, s.flowCtx())
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
	}
	to := node.Otherwise
	if truthy(v) {
		to = node.Then
	}
	now := s.e.now()
	s.advance(to)
	return s.commit(ctx, func(tx store.Tx) error {
		return appendEvent(tx, s.run.ID, evNodeDone, s.run.Attempt, node.ID, map[string]any{"wire": to}, now)
	})
}

// idemKey is the stable key of one logical call: the same on every retry
// and after a crash, because the visit count changes only when the run
// leaves the node, in the same write as the result.
func (s *stepper) idemKey(node *flows.Node) string {
	return fmt.Sprintf("%s/%s/%d", s.run.ID, node.ID, s.cont.Visits[node.ID])
}

// errUnknownOutcome: a non-idempotent call's "started" record exists
// without a result, so the call may or may not have happened.
var errUnknownOutcome = errors.New("engine: outcome unknown")

// toolNode calls the node's tool with the idempotency contract of docs/design.md
// §3 and records the result.
func (s *stepper) toolNode(ctx context.Context, node *flows.Node) bool {
	e := s.e
	info, ok := e.tools.LookupTool(node.Tool)
	if !ok {
		return s.nodeFailed(ctx, node, &store.RunError{Code: "E_UNKNOWN_TOOL", Message: fmt.Sprintf("no installed plugin provides tool %s", node.Tool)})
	}
	input, err := s.args(node)
	if err != nil {
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
	}
	key := s.idemKey(node)
	now := e.now()
	if !info.Idempotent {
		// The durable "started" record comes before the call; one that is
		// already there without a result means a crash in between.
		var done *store.Idem
		err := s.commitE(ctx, func(tx store.Tx) error {
			rec, err := tx.IdemGet(key)
			switch {
			case err == nil && rec.State == store.IdemDone:
				done = rec
				return nil
			case err == nil:
				return errUnknownOutcome
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			if err := tx.IdemPut(&store.Idem{Key: key, RunID: s.run.ID, Node: node.ID, Tool: node.Tool, State: store.IdemStarted, StartedAt: now}); err != nil {
				return err
			}
			return appendEvent(tx, s.run.ID, evToolStarted, s.run.Attempt, node.ID, map[string]any{"tool": node.Tool, "key": key}, now)
		})
		if errors.Is(err, errUnknownOutcome) {
			e.stats.unit(node.Tool)
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeOutcomeUnknown,
				Message: fmt.Sprintf("%s (not idempotent) was started and its result never recorded; it was not run again", node.Tool)})
		}
		if err != nil {
			return false
		}
		if done != nil { // recorded earlier: never call twice
			if done.Error != nil {
				return s.nodeFailed(ctx, node, done.Error)
			}
			return s.toolDone(ctx, node, key, false, done.Result, 0)
		}
		failpoint.Hit(failpoint.AfterStarted)
	}

	timeout := node.Timeout
	if timeout <= 0 {
		timeout = defaultToolTimeout
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	deadline, _ := callCtx.Deadline()
	started := e.now()
	live := s.live
	res, err := e.tools.Call(callCtx, host.CallRequest{Tool: node.Tool, Input: input, RunID: s.run.ID, Node: node.ID,
		Attempt: s.run.Attempt, IdempotencyKey: key, Deadline: deadline,
		Progress: func(done, total int64) {
			live.progress.Store(&ToolProgress{Node: node.ID, Tool: node.Tool, Done: done, Total: total})
		}})
	cancel()
	live.progress.Store(nil)
	e.stats.attempt(node.Tool, e.now().Sub(started))
	failpoint.Hit(failpoint.AfterTool)
	if err == nil {
		cost := res.Cost
		s.spent += cost
		return s.toolDone(ctx, node, key, !info.Idempotent, res.Output, cost)
	}
	if s.cancelRequested() {
		// A non-idempotent call cut short may have had its effect: its
		// started record stays, and the finish says E_OUTCOME_UNKNOWN.
		e.stats.unit(node.Tool)
		s.finish(ctx, store.PhaseCancelled, nil, nil)
		return false
	}
	if ctx.Err() != nil {
		return false // stopping or lease lost; the lease is rescued later
	}
	rerr := toolError(err)
	if info.Idempotent && host.IsRetryable(err) {
		if s.cont.Tries < node.Retries {
			return s.retryLater(ctx, node, rerr)
		}
		if node.Retries > 0 {
			e.stats.unit(node.Tool)
			return s.exhausted(ctx, node, rerr)
		}
	}
	e.stats.unit(node.Tool)
	s.recordNonIdemError(ctx, node, info, key, rerr)
	return s.nodeFailed(ctx, node, rerr)
}

// recordNonIdemError marks a non-idempotent call done with its error, so
// a later resume knows it ran and failed rather than "unknown".
func (s *stepper) recordNonIdemError(ctx context.Context, node *flows.Node, info flows.ToolInfo, key string, rerr *store.RunError) {
	if info.Idempotent {
		return
	}
	now := s.e.now()
	s.commit(ctx, func(tx store.Tx) error {
		return tx.IdemPut(&store.Idem{Key: key, RunID: s.run.ID, Node: node.ID, Tool: node.Tool, State: store.IdemDone, Error: rerr, StartedAt: now, DoneAt: now})
	})
}

// toolDone records a tool's result and advances along next.
func (s *stepper) toolDone(ctx context.Context, node *flows.Node, key string, recordIdem bool, out json.RawMessage, cost int64) bool {
	e := s.e
	now := e.now()
	e.stats.unit(node.Tool)
	ok := s.resultDoneTx(ctx, node, out, map[string]any{"tool": node.Tool, "cost": cost}, func(tx store.Tx) error {
		if recordIdem {
			if err := tx.IdemPut(&store.Idem{Key: key, RunID: s.run.ID, Node: node.ID, Tool: node.Tool, State: store.IdemDone, Result: out, StartedAt: now, DoneAt: now}); err != nil {
				return err
			}
		}
		if cost > 0 {
			run, err := tx.RunGet(s.run.ID)
			if err != nil {
				return err
			}
			run.Spent += cost
			run.UpdatedAt = now
			if err := tx.RunUpdate(run); err != nil {
				return err
			}
			s.run.Spent = run.Spent
		}
		return nil
	})
	if ok {
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
	now := s.e.now()
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	s.cont.Results[node.ID] = out
	var v any
	_ = json.Unmarshal(out, &v)
	s.results[node.ID] = v
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

// retryLater puts the task back with exponential backoff and full jitter,
// keeping the attempt's error for the dead letter.
func (s *stepper) retryLater(ctx context.Context, node *flows.Node, rerr *store.RunError) bool {
	e := s.e
	cfg := e.config()
	now := e.now()
	s.cont.Tries++
	backoff := cfg.RetryBase << min(s.cont.Tries-1, 20)
	if backoff > cfg.RetryMax || backoff <= 0 {
		backoff = cfg.RetryMax
	}
	backoff = time.Duration(rand.Int64N(int64(backoff)) + 1)
	s.task.Errors = append(s.task.Errors, store.AttemptError{Attempt: s.cont.Tries, Code: rerr.Code, Message: rerr.Message, At: now})
	s.commit(ctx, func(tx store.Tx) error {
		if err := s.releaseTaskTx(tx, now, now.Add(backoff), "", ""); err != nil {
			return err
		}
		return appendEvent(tx, s.run.ID, evRetry, s.run.Attempt, node.ID, map[string]any{"task": s.task.ID, "try": s.cont.Tries, "backoff_ms": backoff.Milliseconds(), "code": rerr.Code, "message": rerr.Message}, now)
	})
	return false
}

// exhausted dead-letters a call whose every try failed, then takes the
// error wire (or fails the run).
func (s *stepper) exhausted(ctx context.Context, node *flows.Node, last *store.RunError) bool {
	now := s.e.now()
	s.task.Errors = append(s.task.Errors, store.AttemptError{Attempt: s.cont.Tries + 1, Code: last.Code, Message: last.Message, At: now})
	rerr := &store.RunError{Code: CodeRetriesExhausted, Message: fmt.Sprintf("%s failed %d times; last: %s", node.Tool, s.cont.Tries+1, last.Message)}
	t := *s.task
	t.Node = node.ID
	if !s.commit(ctx, func(tx store.Tx) error { return s.e.deadLetterTx(tx, s.run, &t, node.Tool) }) {
		return false
	}
	s.task.Errors = nil
	return s.nodeFailed(ctx, node, rerr)
}

// args evaluates the node's args callable (or {}) to JSON.
func (s *stepper) args(node *flows.Node) (json.RawMessage, error) {
	if node.Args == nil {
		return json.RawMessage("{}"), nil
	}
	v, err := s.fe.call(*node.Args, s.flowCtx())
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
		v, err := s.fe.call(*ref, s.flowCtx())
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
	s.finish(ctx, store.PhaseCompleted, out, nil)
}

// finish makes the finish decision (phase completing, after which a cancel
// is too late) and writes the terminal record.
func (s *stepper) finish(ctx context.Context, phase store.Phase, out json.RawMessage, rerr *store.RunError) {
	e := s.e
	s.live.mu.Lock()
	if s.live.cancelRequested && phase != store.PhaseCompleted {
		phase = store.PhaseCancelled
	}
	s.live.completing = true
	s.live.mu.Unlock()
	if phase == store.PhaseCancelled && rerr == nil {
		rerr = &store.RunError{Code: CodeCancelled, Message: "the run was cancelled"}
	}
	failpoint.Hit(failpoint.MidFinish)
	now := e.now()
	var woke bool
	err := e.st.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		if err := s.fenceTx(tx); err != nil {
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
		woke, err = e.finishTx(tx, run, phase, out, rerr, now)
		return err
	})
	if err != nil {
		if !errors.Is(err, errLeaseLost) {
			e.storageFailed(err)
			e.log.Error("writing finish", "run", s.run.ID, "error", err)
		}
		return
	}
	e.ledger.CloseRun(s.run.ID)
	if woke {
		e.kick()
	}
}

// toolError turns a host error into a run error with a stable code.
func toolError(err error) *store.RunError {
	var te *host.ToolError
	if errors.As(err, &te) {
		return &store.RunError{Code: "E_TOOL_" + strings.ToUpper(string(te.Kind)), Message: te.Message}
	}
	return &store.RunError{Code: CodeToolFailed, Message: err.Error()}
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
