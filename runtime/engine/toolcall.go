package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// defaultToolTimeout bounds a tool call whose node declares no timeout.
const defaultToolTimeout = 5 * time.Minute

// toolCall is one logical tool call: what to call, and what identifies it
// across retries and crashes. The graph walk, fan-out items and agent tool
// calls all make their calls through callTool with one of these.
type toolCall struct {
	Run *store.Run
	// Attempt is the attempt of the lease the calling task holds; it
	// starts the attempt number the tool sees.
	Attempt int
	Node    *flows.Node
	// Visit is the node's visit count: a loop back into the node is a new
	// logical call.
	Visit int
	// Index places the call inside the node: the item of a fan-out, or
	// the turn and call of an agent. Empty for a task node.
	Index   []int
	Tool    string
	Input   json.RawMessage
	Timeout time.Duration // 0: the tool's declared timeout, else defaultToolTimeout
	Retries int           // retries of a retryable error (idempotent tools only)
	// Tries counts the tries of this call that already failed with a
	// retryable error.
	Tries int
	// TaskID names the calling task in events.
	TaskID string
	// ModelAdmitted says the engine admitted this model turn against its
	// model's limits (agentadmit.go): the plugin is told not to again.
	ModelAdmitted bool
	// remade says the call was made once more after its probe answered
	// not_happened: a second unknown outcome is not made again.
	remade bool
	// startedAt is when the started record of this try was written.
	startedAt time.Time
}

// key is the call's idempotency key: the same on every retry and after a
// crash, because the visit changes only when the run leaves the node, in
// the same write as the result.
func (c *toolCall) key() string { return idemKey(c.Run.ID, c.Node.ID, c.Visit, c.Index...) }

// idemKey is the one spelling of an idempotency key: the run, the node,
// the visit and the call's index inside the node (a fan-out item; an
// agent's turn and call), if any.
func idemKey(runID, node string, visit int, index ...int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s/%d", runID, node, visit)
	for _, i := range index {
		fmt.Fprintf(&b, "/%d", i)
	}
	return b.String()
}

// detail is the event detail every event of the call carries.
func (c *toolCall) detail(extra map[string]any) map[string]any {
	d := map[string]any{"tool": c.Tool}
	if c.TaskID != "" {
		d["task"] = c.TaskID
	}
	switch {
	case len(c.Index) == 0:
	case c.Node.Kind == flows.KindAgent:
		// An agent's model turn is [turn]; a call it asked for, [turn, call].
		d["turn"] = c.Index[0]
		if len(c.Index) > 1 {
			d["call"] = c.Index[1]
		}
	case len(c.Index) == 1:
		d["item"] = c.Index[0]
	default:
		d["index"] = c.Index
	}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

// callEnd says how a logical tool call ended, for the caller to apply.
type callEnd int

const (
	// callDone: the tool answered (or answered before a crash and its
	// result was recorded); Output and Cost hold the answer.
	callDone callEnd = iota
	// callFailed: the call failed for good; Err takes the error wire.
	callFailed
	// callRetry: a retryable error; the task parks until RetryAt, with
	// Try added to its errors.
	callRetry
	// callExhausted: every try failed; the caller dead-letters the task
	// with Try added to its errors and Err takes the error wire.
	callExhausted
	// callInterrupted: the caller's context ended (cancel, stop or a lost
	// lease) while the tool ran.
	callInterrupted
	// callAbandoned: the started record could not be written (lease lost
	// or storage failure, already reported); nothing more to do.
	callAbandoned
	// callUnknown: an at-most-once call's outcome is unknown and its probe
	// (if any) did not settle it; Err is E_OUTCOME_UNKNOWN, StartedAt when
	// the call started. The site takes the error wire, or parks for a
	// person (on_unknown = "ask").
	callUnknown
)

// callOutcome is the end of a logical tool call.
type callOutcome struct {
	End    callEnd
	Output json.RawMessage
	Cost   int64
	// CostReported says the tool reported Cost; otherwise it is the
	// tool's declared cost.
	CostReported bool
	Err          *store.RunError
	// Try is the error of the failed try, for the task's errors and the
	// dead letter.
	Try     store.AttemptError
	RetryAt time.Time
	Backoff time.Duration
	// RecordDone says the caller must write the call's done record (a
	// non-idempotent tool) with idemDoneTx, in the transaction that
	// applies the outcome.
	RecordDone bool
	Key        string
	// StartedBy is the engine process that started an unknown call, as
	// its started record says ("" in a record written before holders
	// were recorded, and for a call this process made).
	StartedBy string
	// StartedAt is when an unknown call was started (callUnknown).
	StartedAt time.Time
	// Wasted is what a chat tool's failed try reported it used
	// (tool.Error's tokens): billed by the provider, though no answer came.
	Wasted store.AgentUsage
}

// errUnknownOutcome: a non-idempotent call's "started" record exists
// without a result, so the call may or may not have happened.
var errUnknownOutcome = errors.New("engine: outcome unknown")

// callTool makes one logical tool call with the idempotency contract of
// docs/design.md §3: a non-idempotent tool gets a durable started record (and a
// tool_started event) before the call, and is never called twice; a
// recorded result is returned instead of calling again; a started record
// without a result, or an at-most-once call that ended without an answer,
// is an unknown outcome: the tool's reconcile probe is asked (reconcile.go)
// and, if it cannot settle it, the call ends callUnknown (E_OUTCOME_UNKNOWN
// or, where the node says on_unknown = "ask", a wait). The call has a deadline and
// reports progress to the worker's live record. A retryable failure of an
// idempotent tool is retried (after the caller applies callRetry) with
// exponential backoff and full jitter until node retries are spent.
// commit writes under the caller's fence.
func (w *worker) callTool(ctx context.Context, c *toolCall, commit func(fn func(tx store.Tx) error) error) callOutcome {
	for {
		o := w.callOnce(ctx, c, commit)
		if o.End != callUnknown {
			return o
		}
		// The probe first; its not_happened makes the call once more
		// (c.remade), never twice.
		o, again := w.reconcile(ctx, c, o, commit)
		if !again {
			return o
		}
		c.remade = true
	}
}

// callOnce is callTool without the probe: one try of the call, or its
// recorded end.
func (w *worker) callOnce(ctx context.Context, c *toolCall, commit func(fn func(tx store.Tx) error) error) callOutcome {
	e := w.e
	key := c.key()
	info, ok := e.tools.LookupTool(c.Tool)
	if !ok {
		return callOutcome{End: callFailed, Key: key, Err: &store.RunError{Code: CodeUnknownTool, Message: "no installed plugin provides tool " + c.Tool}}
	}
	if !info.Idempotent {
		if out, ended := w.startOnce(c, key, commit); ended {
			return out
		}
		failpoint.Hit(failpoint.AfterStarted)
	}

	callCtx, cancel := context.WithTimeout(ctx, c.timeout(info))
	deadline, _ := callCtx.Deadline()
	started := e.clock.Now()
	live := w.live
	var item *int
	if len(c.Index) == 1 && c.Node.Kind != flows.KindAgent {
		item = &c.Index[0]
	}
	var turn *liveTurn // nil: not a model turn, or nobody watches its run
	if k, ok := turnOf(c, info); ok {
		turn = e.deltas.begin(c.Run.ID, k)
	}
	res, err := e.tools.Call(callCtx, tool.CallRequest{Tool: c.Tool, Input: c.Input, RunID: c.Run.ID, Node: c.Node.ID,
		Attempt: c.Attempt + c.Tries + c.remakes(), IdempotencyKey: key, Deadline: deadline, TraceParent: callTrace(e.cfg.Load().Traces, c), TraceState: c.Run.TraceState,
		ModelAdmitted: c.ModelAdmitted,
		Progress: func(done, total int64) {
			live.progress.Store(&ToolProgress{Node: c.Node.ID, Item: item, Tool: c.Tool, Done: done, Total: total})
		}, Partials: turn.partials()})
	cancel()
	if turn != nil {
		var out json.RawMessage
		if err == nil {
			out = res.Output
		}
		turn.end(out)
	}
	live.progress.Store(nil)
	e.stats.attempt(c.Tool, e.clock.Now().Sub(started))
	failpoint.Hit(failpoint.AfterTool)
	if err == nil {
		e.stats.unit(c.Tool)
		if over := res.Cost - info.Cost; res.CostReported && !info.Chat && over > 0 {
			// The tool's bug: it is charged (it was spent), and the run's
			// next work is refused if it no longer fits.
			e.stats.overDeclared(c.Tool, over)
			plugin, _, _ := strings.Cut(c.Tool, ".")
			e.log.Warn("tool reported a cost above its declared cost", "plugin", plugin, "tool", c.Tool,
				"declared", info.Cost, "reported", res.Cost, "run", c.Run.ID, "node", c.Node.ID)
		}
		w.spent += res.Cost
		return callOutcome{End: callDone, Key: key, Output: res.Output, Cost: res.Cost, CostReported: res.CostReported, RecordDone: !info.Idempotent}
	}
	if ctx.Err() != nil || w.cancelRequested() {
		// A non-idempotent call cut short may have had its effect: its
		// started record stays, and a resume says E_OUTCOME_UNKNOWN.
		return callOutcome{End: callInterrupted, Key: key}
	}
	return w.failure(c, info, key, err, commit)
}

// startOnce records that a call of a tool that is not idempotent starts,
// before it is sent: at most once (docs/design.md §3.3). It ends the call
// (ended) when the call's end is recorded already, or its outcome is
// unknown, or the record could not be written.
func (w *worker) startOnce(c *toolCall, key string, commit func(fn func(tx store.Tx) error) error) (out callOutcome, ended bool) {
	e := w.e
	now := e.clock.Now()
	var done, started *store.Idem
	err := commit(func(tx store.Tx) error {
		done, started = nil, nil
		rec, err := tx.IdemGet(key)
		switch {
		case err == nil && rec.State == store.IdemDone:
			done = rec
			return nil
		case err == nil && rec.State == store.IdemNotSent:
			// The last try never reached the tool: this one starts
			// the call afresh.
		case err == nil:
			started = rec
			return errUnknownOutcome
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := tx.IdemPut(&store.Idem{Key: key, RunID: c.Run.ID, Node: c.Node.ID, Tool: c.Tool, State: store.IdemStarted, StartedAt: now, Holder: hostOf(e)}); err != nil {
			return err
		}
		return appendEvent(tx, c.Run.ID, evToolStarted, c.Attempt, c.Node.ID, c.detail(map[string]any{"key": key}), now)
	})
	switch {
	case errors.Is(err, errUnknownOutcome):
		e.stats.unit(c.Tool)
		return callOutcome{End: callUnknown, Key: key, StartedAt: started.StartedAt, StartedBy: started.Holder, Err: &store.RunError{Code: CodeOutcomeUnknown,
			Message: fmt.Sprintf("%s (not idempotent) was started and its result never recorded; it was not run again", c.Tool)}}, true
	case err != nil:
		return callOutcome{End: callAbandoned, Key: key}, true
	case done != nil: // recorded earlier: never call twice
		e.stats.unit(c.Tool)
		if done.Error != nil {
			return callOutcome{End: callFailed, Key: key, Err: done.Error}, true
		}
		return callOutcome{End: callDone, Key: key, Output: done.Result}, true
	}
	c.startedAt = now
	return callOutcome{}, false
}

// failure answers a call the tool answered err, or that was not
// answered: failed, its outcome unknown, tried again later, or out of
// tries.
func (w *worker) failure(c *toolCall, info flows.ToolInfo, key string, err error, commit func(fn func(tx store.Tx) error) error) callOutcome {
	e := w.e
	rerr := toolError(err)
	kind := tool.KindOf(err)
	if unanswered(kind) && !info.Idempotent {
		// Sent and never answered: whether it happened is unknown, and
		// an at-most-once call is not made again (docs/design.md §3).
		e.stats.unit(c.Tool)
		return callOutcome{End: callUnknown, Key: key, RecordDone: true, StartedAt: c.startedAt, Err: &store.RunError{Code: CodeOutcomeUnknown,
			Message: fmt.Sprintf("%s (not idempotent) was sent and no answer came back (%s); it was not run again", c.Tool, rerr.Message)}}
	}
	now := e.clock.Now()
	cfg := e.cfg.Load()
	notSent := kind == tool.KindNotSent
	d := decideRetry(retryInput{Idempotent: info.Idempotent, NotSent: notSent, Retryable: tool.IsRetryable(err), Tries: c.Tries, Retries: c.Retries,
		Base: cfg.RetryBase, Max: cfg.RetryMax, RetryAfter: tool.RetryAfterOf(err)}, jitter)
	try := store.AttemptError{Attempt: c.Tries + 1, Code: rerr.Code, Message: rerr.Message, At: now}
	if notSent && !info.Idempotent && d.Action != retryFail {
		// Nothing happened: the started record says so before the task
		// parks or is dead-lettered, or the next try (or the run's end)
		// would call the call's outcome unknown.
		if err := commit(func(tx store.Tx) error {
			return tx.IdemPut(&store.Idem{Key: key, RunID: c.Run.ID, Node: c.Node.ID, Tool: c.Tool, State: store.IdemNotSent, StartedAt: now})
		}); err != nil {
			return callOutcome{End: callAbandoned, Key: key}
		}
	}
	var wasted store.AgentUsage
	if te := (*tool.Error)(nil); errors.As(err, &te) {
		wasted = store.AgentUsage{InputTokens: te.InputTokens, OutputTokens: te.OutputTokens}
	}
	switch d.Action {
	case retryLater:
		return callOutcome{End: callRetry, Key: key, Err: rerr, Try: try, Backoff: d.Backoff, RetryAt: now.Add(d.Backoff), Wasted: wasted}
	case retryExhausted:
		e.stats.unit(c.Tool)
		return callOutcome{End: callExhausted, Key: key, Try: try, Err: &store.RunError{Code: CodeRetriesExhausted,
			Message: fmt.Sprintf("%s failed %d times; last: %s", c.Tool, c.Tries+1, rerr.Message)}}
	}
	e.stats.unit(c.Tool)
	return callOutcome{End: callFailed, Key: key, Err: rerr, RecordDone: !info.Idempotent}
}

// unanswered says a failure of kind ended a call without an answer from
// the tool (DESIGN §12, what an unknown outcome is): the tool lost its
// answer, the plugin crashed or was killed at the deadline. For an at most
// once tool its outcome is unknown.
func unanswered(kind tool.Kind) bool {
	return kind == tool.KindUnknown || kind == tool.KindCrashed || kind == tool.KindDeadline
}

// timeout is the call's deadline: the node's, else the tool's declared
// default, else defaultToolTimeout. A probe of the call has the same.
func (c *toolCall) timeout(info flows.ToolInfo) time.Duration {
	switch {
	case c.Timeout > 0:
		return c.Timeout
	case info.Timeout > 0:
		return info.Timeout
	}
	return defaultToolTimeout
}

// remakes is 1 once the call was made again after its probe said it had
// not happened: the tool sees a new attempt.
func (c *toolCall) remakes() int {
	if c.remade {
		return 1
	}
	return 0
}

// idemDoneTx records a non-idempotent call's end (result or error), so a
// later resume returns it instead of calling again or calling it unknown.
func idemDoneTx(tx store.Tx, c *toolCall, key string, out json.RawMessage, rerr *store.RunError, now time.Time) error {
	return tx.IdemPut(&store.Idem{Key: key, RunID: c.Run.ID, Node: c.Node.ID, Tool: c.Tool, State: store.IdemDone,
		Result: out, Error: rerr, StartedAt: now, DoneAt: now})
}

// retryEventTx records that a call's task parks until its next try.
func retryEventTx(tx store.Tx, c *toolCall, o callOutcome, now time.Time) error {
	detail := map[string]any{"try": o.Try.Attempt, "backoff_ms": o.Backoff.Milliseconds(), "code": o.Err.Code, "message": o.Err.Message}
	if o.Wasted != (store.AgentUsage{}) {
		detail["input_tokens"], detail["output_tokens"] = o.Wasted.InputTokens, o.Wasted.OutputTokens
	}
	return appendEvent(tx, c.Run.ID, evRetry, c.Attempt, c.Node.ID, c.detail(detail), now)
}

// toolError turns a tool call error into a run error with a stable code:
// the tool's own code when it gave one (E_MODEL_RATE, say), else one
// named after the failure's kind.
func toolError(err error) *store.RunError {
	var te *tool.Error
	if errors.As(err, &te) {
		if te.Code != "" {
			return &store.RunError{Code: te.Code, Message: te.Message}
		}
		return &store.RunError{Code: codeToolKindPrefix + strings.ToUpper(string(te.Kind)), Message: te.Message}
	}
	return &store.RunError{Code: CodeToolFailed, Message: err.Error()}
}
