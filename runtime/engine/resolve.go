package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// Unknown outcomes a person settles (DESIGN §12): a task whose node says
// on_unknown = "ask" parks its run on an unknown wait when its call's
// outcome stays unknown after the probe. The wait shows the tool, its
// arguments, the idempotency key and when the call started. A resolve
// answers it once: happened (with the result the person saw, checked
// against the tool's output schema) or not happened. The resolve writes
// the call's idempotency record in its own transaction, done with that
// result or not sent, so the woken step finds the call's end where it
// finds every call's: a done record is never called again, a not-sent one
// is made once, with a new started record. Past unknown_timeout the node
// takes its error wire with E_OUTCOME_UNKNOWN, as without "ask".
//
// A fan-out item and an agent's tool call follow the same rule (DESIGN
// §12): their call, on a task of its own, leaves the unknown on its record
// (the cohort item, the turn's call) and wakes the run's step, which opens
// the call's wait among the per-call waits of the continuation (where an
// agent's approvals are), with the id of the call's place and a counter:
// NODE@VISIT.ITEM.unknown.N, NODE@VISIT.TURN.CALL.unknown.N. While it
// waits the item stays in flight and the call pending; the resolve's
// answer is applied by the step (callUnknownWait): happened ends the call
// with the result, not happened queues it once more, the timeout ends it
// E_OUTCOME_UNKNOWN (the item fails; the model is told).

// Codes of resolving an unknown outcome.
const (
	// CodeWaitExpired: the wait's deadline passed; the run goes on
	// without the answer.
	CodeWaitExpired = "E_WAIT_EXPIRED"
	// CodeBadResult: a resolve's result does not fit the tool's output
	// schema (or is not JSON); the wait stays open.
	CodeBadResult = "E_BAD_RESULT"
)

// maxEventResultBytes bounds a result the resolved event quotes; a larger
// one is named by its size (the call's record holds it whole).
const maxEventResultBytes = 4096

// MaxResolveReasonBytes bounds a resolve's reason, journaled on the run.
const MaxResolveReasonBytes = 1024

// UnknownWaitID is the id of the n-th unknown wait of visit of node:
// NODE@VISIT.unknown.N (DESIGN §12, wait ids per kind).
func UnknownWaitID(node string, visit, n int) string {
	return unknownWaitIDAt(WaitID(node, visit), n)
}

// unknownWaitIDAt is the id of the n-th unknown wait of the call placed
// by base, a wait id: BASE.unknown.N. A task's base is NODE@VISIT, a
// fan-out item's NODE@VISIT.ITEM, an agent call's NODE@VISIT.TURN.CALL.
func unknownWaitIDAt(base string, n int) string {
	return base + "." + WaitUnknown + "." + strconv.Itoa(n)
}

// unknownShown is what an unknown wait shows the person who resolves it.
type unknownShown struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Key       string          `json:"key"`
	StartedAt time.Time       `json:"started_at,omitzero"`
	Error     *store.RunError `json:"error,omitempty"`
}

// unknownSite is a call site that can park for a person when a call's
// outcome is unknown; other sites take their error wire (applyCall).
type unknownSite interface {
	unknown(ctx context.Context, c *toolCall, o callOutcome) bool
}

func (n nodeSite) unknown(ctx context.Context, c *toolCall, o callOutcome) bool {
	if !c.Node.Asks() {
		return n.failed(ctx, c, o)
	}
	return n.s.parkUnknown(ctx, c, o)
}

// parkUnknown parks the run on a new unknown wait of c's node. The call's
// started record stays as it is: only a resolve, or the timeout, ends it.
func (s *stepper) parkUnknown(ctx context.Context, c *toolCall, o callOutcome) bool {
	node := c.Node
	now := s.e.clock.Now()
	if s.cont.Unknown == nil {
		s.cont.Unknown = map[string]exhaustCount{}
	}
	n := s.cont.Unknown[node.ID]
	if n.Visit != c.Visit {
		n = exhaustCount{Visit: c.Visit}
	}
	n.N++
	s.cont.Unknown[node.ID] = n
	if s.cont.Waits == nil {
		s.cont.Waits = map[string]*waitState{}
	}
	ws := &waitState{ID: UnknownWaitID(node.ID, c.Visit, n.N), Kind: WaitUnknown, Node: node.ID, Since: now, Until: now.Add(unknownTimeout(node)),
		Shown: mustJSON(unknownShown{Tool: c.Tool, Arguments: c.Input, Key: o.Key, StartedAt: o.StartedAt, Error: o.Err})}
	s.cont.Waits[node.ID] = ws
	ok := s.commit(ctx, func(tx store.Tx) error {
		return s.parkTx(tx, now, ws.Until, WaitUnknown, "", map[string]any{"wait": ws.ID, "key": o.Key, "code": o.Err.Code, "message": o.Err.Message})
	})
	if ok {
		failpoint.Hit(failpoint.UnknownParked)
	}
	return false
}

// unknownWake is what a step does at node while the node has an unknown
// wait: resolved, the wait is consumed and the call goes on (handled
// false: its idempotency record says how); past its deadline, the node
// takes its error wire; woken early, the run parks again.
func (s *stepper) unknownWake(ctx context.Context, node *flows.Node) (handled, more bool) {
	ws := s.cont.Waits[node.ID]
	if ws == nil || ws.Kind != WaitUnknown {
		return false, false
	}
	now := s.e.clock.Now()
	switch {
	case ws.Decision != nil:
		s.cont.consumed(ws)
		delete(s.cont.Waits, node.ID)
		return false, false
	case !now.Before(ws.Until):
		delete(s.cont.Waits, node.ID)
		return true, s.nodeFailed(ctx, node, unresolvedErr(node.Tool, ws))
	}
	s.commit(ctx, func(tx store.Tx) error {
		return s.parkTx(tx, now, ws.Until, WaitUnknown, "", map[string]any{"wait": ws.ID})
	})
	return true, false
}

// unresolvedErr is the error of a call of tool whose unknown wait ws
// passed its deadline unresolved.
func unresolvedErr(tool string, ws *waitState) *store.RunError {
	return &store.RunError{Code: CodeOutcomeUnknown,
		Message: fmt.Sprintf("%s (not idempotent) may or may not have happened and nobody resolved %s before %s; it was not run again",
			tool, ws.ID, ws.Until.UTC().Format(time.RFC3339))}
}

// unknownTimeout is how long node's unknown waits wait for a person.
func unknownTimeout(node *flows.Node) time.Duration {
	if node.UnknownTimeout > 0 {
		return node.UnknownTimeout
	}
	return flows.DefaultUnknownTimeout
}

// unknownWaits lists run's open unknown waits, for the waits a person must
// act on (HumanWaits): a task's is open while the step task t is parked
// on it; a fan-out item's or an agent call's while t is parked at all.
func unknownWaits(run *store.Run, c *continuation, t *store.Task) []HumanWait {
	return humanWaitsOf(run, openResolvable(c, t))
}

// callUnknownWaits lists the open unknown waits of run's fan-out items and
// agent calls alone.
func callUnknownWaits(run *store.Run, c *continuation, t *store.Task) []HumanWait {
	var calls []*waitState
	for _, ws := range openResolvable(c, t) {
		if ws.Call != nil {
			calls = append(calls, ws)
		}
	}
	return humanWaitsOf(run, calls)
}

// parkedOnCallUnknowns says the step task t is parked on the unknown waits
// of its node's fan-out items or agent calls, not on one of its own.
func parkedOnCallUnknowns(c *continuation, t *store.Task) bool {
	ws := c.Waits[t.Node]
	return t.WaitKind == WaitUnknown && (ws == nil || ws.Kind != WaitUnknown)
}

func humanWaitsOf(run *store.Run, ws []*waitState) []HumanWait {
	out := make([]HumanWait, 0, len(ws))
	for _, w := range ws {
		out = append(out, HumanWait{ID: w.ID, Kind: w.Kind, RunID: run.ID, Flow: run.Flow, Node: w.Node, Since: w.Since, Until: w.Until, Shown: w.Shown})
	}
	return out
}

// What the step does with the latest unknown wait of a fan-out item's or
// an agent call's call whose outcome is unknown (decideCallUnknown).
type callUnknownAction int

const (
	// unknownAsk: no wait is open for this end of the call; open one.
	unknownAsk callUnknownAction = iota
	// unknownWaiting: the wait is open; the call stays pending.
	unknownWaiting
	// unknownHappened: resolved happened; the call ends with the result
	// the resolve wrote into its idempotency record.
	unknownHappened
	// unknownRemake: resolved not happened; the call is queued once more
	// (its idempotency record says not sent, so it starts afresh).
	unknownRemake
	// unknownExpired: nobody resolved it in time; the call ends
	// E_OUTCOME_UNKNOWN.
	unknownExpired
)

// decideCallUnknown decides what the step does with ws, the latest unknown
// wait of a call whose outcome is unknown (nil: none is open).
func decideCallUnknown(ws *waitState, now time.Time) callUnknownAction {
	switch {
	case ws == nil:
		return unknownAsk
	case ws.Decision != nil && ws.Decision.Approved:
		return unknownHappened
	case ws.Decision != nil:
		return unknownRemake
	case !now.Before(ws.Until):
		return unknownExpired
	}
	return unknownWaiting
}

// callUnknownWait is the latest unknown wait of the call placed by base
// (a fan-out item's or an agent call's wait id), or nil: the waits of one
// call are numbered in s.cont.Unknown under base, as a task's are under
// its node.
func (s *stepper) callUnknownWait(base string) *waitState {
	n := s.cont.Unknown[base]
	if n.N == 0 {
		return nil
	}
	return s.cont.Approvals[unknownWaitIDAt(base, n.N)]
}

// openCallUnknown opens the next unknown wait of the call placed by base
// (index: [item] or [turn, call] of visit of node), showing shown.
func (s *stepper) openCallUnknown(node *flows.Node, visit int, base string, index []int, shown unknownShown, now, until time.Time) *waitState {
	if s.cont.Unknown == nil {
		s.cont.Unknown = map[string]exhaustCount{}
	}
	n := s.cont.Unknown[base]
	n.Visit, n.N = visit, n.N+1
	s.cont.Unknown[base] = n
	ws := &waitState{ID: unknownWaitIDAt(base, n.N), Kind: WaitUnknown, Node: node.ID, Since: now, Until: until, Visit: visit, Call: index, Shown: mustJSON(shown)}
	if s.cont.Approvals == nil {
		s.cont.Approvals = map[string]*waitState{}
	}
	s.cont.Approvals[ws.ID] = ws
	return ws
}

// settleCallUnknown drops ws, answered or past its deadline; an answer is
// remembered, so a second one is told E_ALREADY_DECIDED.
func (s *stepper) settleCallUnknown(ws *waitState) {
	s.cont.consumed(ws)
	delete(s.cont.Approvals, ws.ID)
}

// unknownShownTx is what the unknown wait of the call with idempotency key
// shows: its tool, arguments and error, and when it started (its started
// record, which stays until a resolve or the timeout ends the call).
func unknownShownTx(tx store.Tx, key, tool string, args json.RawMessage, rerr *store.RunError) (unknownShown, error) {
	shown := unknownShown{Tool: tool, Arguments: args, Key: key, Error: rerr}
	rec, err := tx.IdemGet(key)
	switch {
	case err == nil:
		shown.StartedAt = rec.StartedAt
	case !errors.Is(err, store.ErrNotFound):
		return shown, err
	}
	return shown, nil
}

// resolvedResultTx is the result a resolve said a call with key answered:
// the idempotency record the resolve wrote.
func resolvedResultTx(tx store.Tx, key string) (json.RawMessage, error) {
	rec, err := tx.IdemGet(key)
	if err != nil {
		return nil, err
	}
	if rec.State != store.IdemDone {
		return nil, fmt.Errorf("engine: the call %s was resolved happened and its record is %s", key, rec.State)
	}
	if len(rec.Result) == 0 {
		return json.RawMessage("null"), nil
	}
	return rec.Result, nil
}

// ResolveParams is one answer to an unknown wait.
type ResolveParams struct {
	// Owner is who resolves; only the run's owner may (anyone else is told
	// the run does not exist, and the attempt is audited).
	Owner  string
	RunID  string
	WaitID string
	// Happened says the call had its effect; Result is then what it
	// answered (JSON, optional: null when left out). Not happened makes
	// the call once more, with a new attempt.
	Happened bool
	Result   json.RawMessage
	// Reason says why, journaled with the answer; By is who answers
	// (default Owner).
	Reason string
	By     string
}

// Resolve answers the unknown wait p.WaitID of p.Owner's run p.RunID, once
// (E_ALREADY_DECIDED after), before its deadline (E_WAIT_EXPIRED), and
// wakes the run through the one wake path. A wait of another kind is
// E_NOT_WAITING; a result that does not fit the tool's output schema is
// E_BAD_RESULT, and the wait stays open. The answer, the call's
// idempotency record and a resolved event are one transaction.
func (o *Ops) Resolve(ctx context.Context, p ResolveParams) (HumanWait, error) {
	e := o.e
	if err := checkResolve(&p); err != nil {
		return HumanWait{}, err
	}
	now := e.clock.Now()
	var pre *waitState
	var refusal *Error
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		_, pre, refusal, err = resolveTargetTx(tx, p, now)
		return err
	})
	if err := answerRefused(ctx, e, p.Owner, p.RunID, "resolve", err, refusal, true); err != nil {
		return HumanWait{}, err
	}
	if p.Happened {
		if err := o.checkResult(ctx, pre, p.Result); err != nil {
			return HumanWait{}, err
		}
	}
	var resolved HumanWait
	err = e.st.Update(ctx, func(tx store.Tx) error {
		var err error
		resolved, refusal, err = resolveTx(tx, p, now)
		if err == nil {
			failpoint.Hit(failpoint.BeforeResolve)
		}
		return err
	})
	if err := answerRefused(ctx, e, p.Owner, p.RunID, "resolve", err, refusal, false); err != nil {
		return HumanWait{}, err
	}
	failpoint.Hit(failpoint.AfterResolve)
	e.wake.kick()
	return resolved, nil
}

// checkResolve refuses a malformed resolve before anything is read, and
// makes its result canonical.
func checkResolve(p *ResolveParams) error {
	if err := CheckPrintable("wait id", p.WaitID, MaxIDBytes); err != nil || !IsWaitID(p.WaitID) {
		return protocolErr(CodeBadRequest, "wait %q is not a wait id (NODE@VISIT.unknown.N, as weir run get shows it)", clip(p.WaitID))
	}
	if err := CheckPrintable("reason", p.Reason, MaxResolveReasonBytes); err != nil {
		return err
	}
	if p.By == "" {
		p.By = p.Owner
	}
	if !p.Happened {
		if len(p.Result) > 0 {
			return protocolErr(CodeBadRequest, "a result goes with happened: a call that did not happen answered nothing")
		}
		return nil
	}
	canon, err := canonicalResult(p.Result)
	if err != nil {
		return err
	}
	p.Result = canon
	return nil
}

// checkResult checks a happened call's result against its tool's output
// schema, if it declares one: with a deadline, outside every transaction.
func (o *Ops) checkResult(ctx context.Context, ws *waitState, result json.RawMessage) error {
	var shown unknownShown
	if err := json.Unmarshal(ws.Shown, &shown); err != nil {
		return nil // an older wait without its tool: nothing to check against
	}
	return toolSchemas{o.e}.result(ctx, shown.Tool, result)
}

// toolSchemas checks what a person gives in a tool's place — a result,
// or edited arguments — against the schemas the tool declares.
type toolSchemas struct{ e *Engine }

// result checks a result a person gives for a call of tool (a
// resolve's, a response to an agent's proposed call) against the tool's
// output schema, if it declares one: with a deadline, outside every
// transaction.
func (c toolSchemas) result(ctx context.Context, tool string, result json.RawMessage) error {
	info, ok := c.e.tools.LookupTool(tool)
	if !ok || len(info.OutputSchema) == 0 {
		return nil
	}
	return c.check(ctx, info.OutputSchema, result, CodeBadResult, "the result", "output schema of "+tool)
}

// check validates v (what: the result, the edited arguments) against
// schema with a deadline: a v that does not fit, or could not be checked,
// is refused with code; a caller that went away, E_BAD_REQUEST.
func (c toolSchemas) check(ctx context.Context, schema, v json.RawMessage, code, what, against string) error {
	vctx, cancel := context.WithTimeout(ctx, resultCheckTimeout)
	defer cancel()
	err := c.e.book.validateSchema(vctx, schema, v)
	switch {
	case err == nil:
		return nil
	case flows.IsInvalidValue(err):
		return protocolErr(code, "%s: not valid against the %s: %v; the wait stays open", what, against, err)
	case ctx.Err() != nil:
		return protocolErr(CodeBadRequest, "request abandoned: %v", ctx.Err())
	}
	return protocolErr(code, "%s: could not be checked against the %s (%v); the wait stays open", what, against, err)
}

// resultCheckTimeout bounds checking a person's result (or edited
// arguments) against a schema.
const resultCheckTimeout = 10 * time.Second

// resolveTargetTx finds the open unknown wait p names, or why it cannot
// be resolved: another owner's run (errNotYours), a run that ended, a wait
// of another kind, one answered before or past its deadline, a run being
// resumed. The step task is returned for the wake.
func resolveTargetTx(tx store.Tx, p ResolveParams, now time.Time) (*continuation, *waitState, *Error, error) {
	run, c, t, refusal, err := parkedRunTx(tx, p.Owner, p.RunID, p.WaitID)
	if err != nil {
		return nil, nil, refusal, err
	}
	var ws *waitState
	for node, x := range c.Waits {
		if x = resolveWait(c, node, x, t); x.ID == p.WaitID {
			ws = x
		}
	}
	if ws == nil {
		for _, x := range c.Approvals {
			if x.ID == p.WaitID {
				ws = x
			}
		}
	}
	switch {
	case ws != nil && ws.Kind != WaitUnknown:
		return nil, nil, notWaiting(run.ID, p.WaitID, fmt.Sprintf("it is a %s wait, which resolve does not answer (weir run approve or reject does)", ws.Kind)), errSkip
	case ws != nil && ws.Decision != nil, ws == nil:
		if refusal := resolvedBefore(c, run.ID, p.WaitID); refusal != nil {
			return nil, nil, refusal, errSkip
		}
	}
	switch {
	case run.Phase.Terminal():
		return nil, nil, notWaiting(run.ID, p.WaitID, "it is "+string(run.Phase)), errSkip
	case ws == nil:
		return nil, nil, notWaiting(run.ID, p.WaitID, "no unknown outcome waits there"+openWaitsHint(openResolvable(c, t), p.WaitID)), errSkip
	case !now.Before(ws.Until):
		return nil, nil, protocolErr(CodeWaitExpired, "the wait %s of run %s passed its deadline at %s: the node takes its error wire with %s",
			ws.ID, run.ID, ws.Until.UTC().Format(time.RFC3339), CodeOutcomeUnknown), errSkip
	case t == nil || t.Leased || (ws.Call == nil && t.WaitKind != WaitUnknown):
		// A task's wait is open while the step is parked on it; a
		// fan-out item's or an agent call's while the step is parked.
		return nil, nil, notWaiting(run.ID, p.WaitID, "it is being resumed; resolve again in a moment"), errSkip
	}
	return c, ws, nil, nil
}

// resolvedBefore refuses a second answer to a wait decided before, or
// nil when p's wait was never decided.
func resolvedBefore(c *continuation, runID, waitID string) *Error {
	for _, ws := range c.Waits {
		if ws.ID == waitID && ws.Decision != nil {
			return alreadyResolved(runID, waitID, ws.Decision.Approved, ws.Decision.By, ws.Decision.At)
		}
	}
	if ws := c.Approvals[waitID]; ws != nil && ws.Decision != nil {
		return alreadyResolved(runID, waitID, ws.Decision.Approved, ws.Decision.By, ws.Decision.At)
	}
	for i := len(c.Decided) - 1; i >= 0; i-- {
		if d := c.Decided[i]; d.ID == waitID {
			return alreadyResolved(runID, waitID, d.Approved, d.By, d.At)
		}
	}
	return nil
}

// alreadyResolved is the refusal of a second answer.
func alreadyResolved(runID, waitID string, happened bool, by string, at time.Time) *Error {
	answer := "not happened"
	if happened {
		answer = "happened"
	}
	return protocolErr(CodeAlreadyDecided, "the wait %s of run %s was already answered (%s) by %s at %s; a wait is answered once",
		waitID, runID, answer, by, at.UTC().Format(time.RFC3339))
}

// openResolvable lists the waits a resolve could name, by id: a task's
// open unknown wait while the step task t is parked on it, and the open
// unknown waits of the fan-out items and agent calls of the node the run
// is at while t is parked.
func openResolvable(c *continuation, t *store.Task) []*waitState {
	if t == nil || t.Leased {
		return nil
	}
	var out []*waitState
	if ws := c.Waits[t.Node]; t.WaitKind == WaitUnknown && ws != nil && ws.Kind == WaitUnknown && ws.Decision == nil {
		out = append(out, ws)
	}
	return append(out, callWaits(c, t, WaitUnknown)...)
}

// callWaits lists the open per-call waits of kind (a fan-out item's or an
// agent call's) of the node the run is at, by id, while the step task t
// is parked.
func callWaits(c *continuation, t *store.Task, kind string) []*waitState {
	if t == nil || t.Leased {
		return nil
	}
	var out []*waitState
	for _, ws := range c.Approvals {
		if ws.Kind == kind && ws.Decision == nil && ws.Node == c.Node && ws.Visit == c.Visits[ws.Node] {
			out = append(out, ws)
		}
	}
	slices.SortFunc(out, func(a, b *waitState) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// unknownAt is the open unknown wait target names (a wait id or, for a
// task's, a node), for the refusal of an approve or reject there.
func unknownAt(c *continuation, target string) *waitState {
	for node, ws := range c.Waits {
		if ws.Kind == WaitUnknown && ws.Decision == nil && (ws.ID == target || node == target) {
			return ws
		}
	}
	if ws := c.Approvals[target]; ws != nil && ws.Kind == WaitUnknown && ws.Decision == nil {
		return ws
	}
	return nil
}

// stepTaskTx is the run's step task, or nil.
func stepTaskTx(tx store.Tx, runID string) (*store.Task, error) {
	tasks, err := tx.TaskListByRun(runID)
	if err != nil {
		return nil, err
	}
	var t *store.Task
	for _, x := range tasks {
		if x.Kind == store.TaskStep {
			t = x
		}
	}
	return t, nil
}

// resolveTx applies p in tx, or answers why it is refused (with errSkip):
// the answer on the wait, the call's idempotency record (done with the
// result, or not sent), the run's step task woken and a resolved event.
func resolveTx(tx store.Tx, p ResolveParams, now time.Time) (HumanWait, *Error, error) {
	c, ws, refusal, err := resolveTargetTx(tx, p, now)
	if err != nil || refusal != nil {
		return HumanWait{}, refusal, err
	}
	run, err := tx.RunGet(p.RunID)
	if err != nil {
		return HumanWait{}, nil, err
	}
	var shown unknownShown
	if err := json.Unmarshal(ws.Shown, &shown); err != nil || shown.Key == "" {
		return HumanWait{}, nil, fmt.Errorf("engine: unknown wait %s shows no idempotency key: %v", ws.ID, err)
	}
	rec := &store.Idem{Key: shown.Key, RunID: run.ID, Node: ws.Node, Tool: shown.Tool, State: store.IdemNotSent, StartedAt: shown.StartedAt}
	if p.Happened {
		rec.State, rec.Result, rec.DoneAt = store.IdemDone, p.Result, now
	}
	if err := tx.IdemPut(rec); err != nil {
		return HumanWait{}, nil, err
	}
	// The result lives in the idempotency record; the wait keeps only
	// the answer, so the continuation stays small.
	ws.Decision = &decision{Approved: p.Happened, Reason: p.Reason, By: p.By, At: now}
	if err := tx.ContinuationPut(run.ID, encodeContinuation(c)); err != nil {
		return HumanWait{}, nil, err
	}
	t, err := stepTaskTx(tx, run.ID)
	if err != nil {
		return HumanWait{}, nil, err
	}
	if _, err := wakeParkedTx(tx, t, now); err != nil {
		return HumanWait{}, nil, err
	}
	detail := map[string]any{"by": p.By, "wait": ws.ID, "happened": p.Happened, "key": shown.Key, "tool": shown.Tool}
	if p.Reason != "" {
		detail["reason"] = p.Reason
	}
	if p.Happened && len(p.Result) <= maxEventResultBytes {
		detail["result"] = p.Result
	} else if p.Happened {
		detail["result_bytes"] = len(p.Result)
	}
	resolved := HumanWait{ID: ws.ID, Kind: ws.Kind, RunID: run.ID, Flow: run.Flow, Node: ws.Node, Since: ws.Since, Until: ws.Until, Shown: ws.Shown}
	return resolved, nil, appendEvent(tx, run.ID, evResolved, run.Attempt, ws.Node, detail, now)
}
