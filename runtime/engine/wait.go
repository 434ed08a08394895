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
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// noTimeout parks a wait that declares no timeout: it wakes only by a
// decision.
const noTimeout = 100 * 365 * 24 * time.Hour

// The kinds of wait (docs/design.md §11, one wait model): what a parked
// run waits for. Human and approval waits need a decision; the others end
// by themselves.
const (
	WaitHuman    = "human"    // a wait node: a person's decision
	WaitApproval = "approval" // a tool call an agent proposed, before it runs
	WaitChild    = "child"    // a child run's end (a subflow, an agent's flow tool), or an agent's tool calls
	WaitCohort   = "cohort"   // a fan-out's children
	WaitTimer    = "timer"    // a time: a retry's backoff
)

// WaitExhausted: a task used up its retries on a node that says
// on_exhausted = "park"; the run waits for its dead letter's redrive
// (Ops.Redrive). Its wait id is NODE@VISIT.exhausted.N.
const WaitExhausted = "exhausted"

// WaitUnknown: an at-most-once call's outcome is unknown on a node that
// says on_unknown = "ask"; the run waits for a person to resolve it
// (Ops.Resolve) until its unknown_timeout. Its wait id is
// NODE@VISIT.unknown.N.
const WaitUnknown = "unknown"

// CodeAmbiguousWait: a decision named a node where several decisions are
// open; it must name one of their wait ids.
const CodeAmbiguousWait = "E_AMBIGUOUS_WAIT"

// WaitID is the id of the wait that visit of node parks on; index places
// a call an agent proposed ([turn, call]). It is derived, not drawn, so
// the same park has the same id after a crash. Node names never hold '@',
// so a wait id is never a node's name.
func WaitID(node string, visit int, index ...int) string {
	var b strings.Builder
	b.WriteString(node)
	b.WriteByte('@')
	b.WriteString(strconv.Itoa(visit))
	for _, i := range index {
		b.WriteByte('.')
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}

// IsWaitID tells a wait id from a node name.
func IsWaitID(s string) bool { return strings.Contains(s, "@") }

// openDecisions lists the waits of c that wait for a decision, by id,
// with their ids, kinds and nodes filled in. A wait node's wait is open
// only while the run's step task t is parked on it (a leased task is
// being resumed); an agent's approvals are open until decided.
func openDecisions(c *continuation, t *store.Task) []*waitState {
	var out []*waitState
	for node, ws := range c.Waits {
		ws := resolveWait(c, node, ws, t)
		if ws.Kind != WaitHuman || ws.Decision != nil || t == nil || t.Leased || t.WaitKind != WaitHuman || t.Node != node {
			continue
		}
		out = append(out, ws)
	}
	for _, ws := range c.Approvals {
		// Only the current visit of the node the run is at waits for
		// its approvals; an unknown wait there takes a resolve, an
		// exhausted one a redrive and a budget one a raise, not a
		// decision.
		if ws.Kind != WaitUnknown && ws.Kind != WaitExhausted && ws.Kind != WaitBudget && ws.Decision == nil && ws.Node == c.Node && ws.Visit == c.Visits[ws.Node] {
			out = append(out, ws)
		}
	}
	slices.SortFunc(out, func(a, b *waitState) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// resolveWait fills in the id, kind and node of a node's wait written
// before the wait model (only its deadline and decision were kept): the
// id is derived as it is for a new one, the kind is the task's.
func resolveWait(c *continuation, node string, ws *waitState, t *store.Task) *waitState {
	if ws.Node == "" {
		ws.Node = node
	}
	if ws.ID == "" {
		ws.ID = WaitID(node, c.Visits[node])
	}
	if ws.Kind == "" && t != nil && t.Node == node {
		ws.Kind = t.WaitKind
	}
	return ws
}

// decidedAt finds a decision already given on the wait named by target
// (a wait id, or a node): one still to be consumed, or one the run went
// past.
func decidedAt(c *continuation, target string, t *store.Task) (id string, approved bool, by string, at time.Time, ok bool) {
	match := func(wid, node string) bool {
		if IsWaitID(target) {
			return wid == target
		}
		return node == target
	}
	for node, ws := range c.Waits {
		ws := resolveWait(c, node, ws, t)
		if ws.Decision != nil && match(ws.ID, ws.Node) {
			return ws.ID, ws.Decision.Approved, ws.Decision.By, ws.Decision.At, true
		}
	}
	for _, ws := range c.Approvals {
		if ws.Decision != nil && match(ws.ID, ws.Node) {
			return ws.ID, ws.Decision.Approved, ws.Decision.By, ws.Decision.At, true
		}
	}
	for i := len(c.Decided) - 1; i >= 0; i-- {
		d := c.Decided[i]
		if match(d.ID, d.Node) {
			return d.ID, d.Approved, d.By, d.At, true
		}
	}
	return "", false, "", time.Time{}, false
}

// waitNode parks the run until a decision or the wait's timeout, and on
// waking follows the decision: the approval's payload is the node's
// result; a rejection or the timeout takes the error wire.
func (s *stepper) waitNode(ctx context.Context, node *flows.Node) bool {
	if node.Event != "" {
		return s.eventWaitNode(ctx, node)
	}
	e := s.e
	now := e.clock.Now()
	if s.cont.Waits == nil {
		s.cont.Waits = map[string]*waitState{}
	}
	ws := s.cont.Waits[node.ID]
	if ws == nil {
		timeout := node.Timeout
		if timeout <= 0 {
			timeout = noTimeout
		}
		visit := s.cont.Visits[node.ID]
		ws = &waitState{ID: WaitID(node.ID, visit), Kind: WaitHuman, Node: node.ID, Since: now, Until: now.Add(timeout)}
		s.cont.Waits[node.ID] = ws
		detail := map[string]any{"wait": ws.ID}
		if node.Args != nil {
			req, err := s.args(node)
			if err != nil {
				delete(s.cont.Waits, node.ID)
				return s.nodeFailed(ctx, node, &store.RunError{Code: CodeCallable, Message: err.Error()})
			}
			detail["request"] = json.RawMessage(req)
			ws.Shown = mustJSON(map[string]any{"request": json.RawMessage(req)})
		}
		s.commit(ctx, func(tx store.Tx) error { return s.parkTx(tx, now, ws.Until, WaitHuman, "", detail) })
		return false
	}
	ws = resolveWait(s.cont, node.ID, ws, s.task)
	switch d := ws.Decision; {
	case d != nil && d.Approved:
		s.cont.consumed(ws)
		delete(s.cont.Waits, node.ID)
		payload := d.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("{}")
		}
		return s.resultDone(ctx, node, payload, map[string]any{"approved_by": d.By, "wait": ws.ID})
	case d != nil:
		s.cont.consumed(ws)
		delete(s.cont.Waits, node.ID)
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeRejected, Message: fmt.Sprintf("rejected by %s: %s", d.By, d.Reason)})
	case !now.Before(ws.Until):
		delete(s.cont.Waits, node.ID)
		return s.nodeFailed(ctx, node, &store.RunError{Code: CodeWaitTimeout, Message: fmt.Sprintf("nobody decided %s before %s", node.ID, ws.Until.Format(time.RFC3339))})
	}
	// Woken early without a decision: wait on until the deadline.
	s.commit(ctx, func(tx store.Tx) error {
		return s.parkTx(tx, now, ws.Until, WaitHuman, "", map[string]any{"wait": ws.ID})
	})
	return false
}

// DecideParams is one decision on a wait that needs one.
type DecideParams struct {
	// Owner is who decides; only the run's owner may (anyone else is told
	// the run does not exist).
	Owner string
	// RunID and Node name the wait: Node is a wait id, or a node where
	// exactly one decision is open.
	RunID string
	Node  string
	// Approve approves the wait; false rejects it.
	Approve bool
	// Payload is what an approval hands a wait node as its result (JSON,
	// optional); ignored on a rejection. On an agent's approval it is an
	// edit: the arguments the call runs with in place of the proposed
	// ones, in the form the wait shows them, checked against the tool's
	// input schema (E_BAD_INPUT, the wait left open).
	Payload json.RawMessage
	// Respond (with Approve) answers an agent's proposed call in the
	// tool's place: Result (JSON; null when empty) is the call's result,
	// checked against the tool's output schema if it has one
	// (E_BAD_RESULT, the wait left open), and the tool never runs. Only
	// an agent's approval takes it.
	Respond bool
	Result  json.RawMessage
	// Reason says why a wait is rejected; the node's error carries it (a
	// wait node), or the model is told it as the call's result (an
	// agent's approval).
	Reason string
	// Digest, if set, is the digest of the proposal the decider saw on
	// an agent's approval wait (shown.digest); a wait that shows another
	// refuses the decision with E_STALE_DECISION.
	Digest string
}

// MaxDecisionReasonBytes bounds the reason a decision gives (the MCP
// server cuts a client's to it).
const MaxDecisionReasonBytes = 4096

// Decide records an approval (p.Approve, with p.Payload) or a rejection
// (with p.Reason) of the wait p.Node names in p.Owner's run p.RunID, and
// wakes the run through the same path a child's end takes: its task's
// ready time set to now. A wait is decided once; a second decision is
// refused with E_ALREADY_DECIDED. A node where several decisions are open
// is refused with E_AMBIGUOUS_WAIT, listing their wait ids.
func (e *Engine) Decide(ctx context.Context, p DecideParams) error {
	_, err := e.DecideWait(ctx, p)
	return err
}

// What a decision did (Decided.Decision).
const (
	DecisionApproved  = "approved"
	DecisionRejected  = "rejected"
	DecisionEdited    = "edited"    // an agent's proposed call approved with edited arguments
	DecisionResponded = "responded" // an agent's proposed call answered in the tool's place
)

// Decided is a decision DecideWait recorded: the wait it decided and
// what it did (DecisionApproved, ...).
type Decided struct {
	Wait     HumanWait
	Decision string
}

// DecideWait is Decide, answering the wait it decided and what the
// decision did.
func (e *Engine) DecideWait(ctx context.Context, p DecideParams) (Decided, error) {
	if err := checkDecide(&p); err != nil {
		return Decided{}, err
	}
	if p.Approve && (len(p.Payload) > 0 || p.Respond) {
		// An edit or a response is checked against the tool's schemas
		// before anything is written: with a deadline, outside every
		// transaction. The wait's proposal cannot change under it (its
		// id places one call of one turn), and the write checks again
		// that it is still open.
		var ws *waitState
		var refusal *Error
		err := e.st.View(ctx, func(tx store.Tx) error {
			var err error
			_, _, _, ws, refusal, err = decideTargetTx(tx, p, e.clock.Now())
			return err
		})
		if err := answerRefused(ctx, e, p.Owner, p.RunID, "decide", err, refusal, true); err != nil {
			return Decided{}, err
		}
		if err := (toolSchemas{e}).decision(ctx, ws, &p); err != nil {
			return Decided{}, err
		}
	}
	now := e.clock.Now()
	var refusal *Error
	var decided Decided
	err := e.st.Update(ctx, func(tx store.Tx) error {
		var err error
		decided, refusal, err = decideTx(tx, p, now)
		return err
	})
	if err := answerRefused(ctx, e, p.Owner, p.RunID, "decide", err, refusal, false); err != nil {
		return Decided{}, err
	}
	failpoint.Hit(failpoint.AfterDecide)
	e.wake.kick()
	return decided, nil
}

// answerRefused turns what reading (preview) or writing an answer to a
// wait (a decision, a resolve) answered into its refusal, or nil. verb
// names the answer in the audit of another owner's attempt.
func answerRefused(ctx context.Context, e *Engine, owner, runID, verb string, err error, refusal *Error, preview bool) error {
	switch {
	case errors.Is(err, errNotYours):
		e.auditor.foreign(ctx, owner, runID, verb)
		return protocolErr(CodeNotFound, "no run %s", runID)
	case refusal != nil:
		return refusal
	case err != nil && preview:
		return e.admission.readFailed(err)
	case err != nil:
		return e.admission.storageFailed(err)
	}
	return nil
}

// canonicalResult is the result an answer gives in a tool's place (a
// response, a resolve that happened): null when left out, bounded by
// MaxResultBytes, canonical JSON.
func canonicalResult(result json.RawMessage) (json.RawMessage, error) {
	if len(result) == 0 {
		return json.RawMessage("null"), nil
	}
	if len(result) > MaxResultBytes {
		return nil, protocolErr(CodeBadResult, "the result is %d bytes; a result is at most %d", len(result), MaxResultBytes)
	}
	canon, err := canonicalInput(result)
	if err != nil {
		return nil, protocolErr(CodeBadResult, "the result is not JSON: %v", err)
	}
	return canon, nil
}

// checkDecide refuses a malformed decision before anything is read, and
// makes its payload and result canonical.
func checkDecide(p *DecideParams) error {
	// A reason reaches the node's error, the journal and the model: it is
	// bounded and printable, but for its line breaks.
	if err := CheckPrintable("reason", strings.NewReplacer("\n", " ", "\t", " ").Replace(p.Reason), MaxDecisionReasonBytes); err != nil {
		return err
	}
	if p.Respond && !p.Approve {
		return protocolErr(CodeBadRequest, "a response answers the call in the tool's place: it is not a rejection")
	}
	if p.Respond && len(p.Payload) > 0 {
		return protocolErr(CodeBadRequest, "a decision either edits the call's arguments (payload) or answers it in the tool's place (result), not both")
	}
	if p.Approve && len(p.Payload) > 0 {
		canon, err := canonicalInput(p.Payload)
		if err != nil {
			return err
		}
		p.Payload = canon
	}
	if p.Respond {
		canon, err := canonicalResult(p.Result)
		if err != nil {
			return err
		}
		p.Result = canon
	}
	return nil
}

// decision checks an edit's arguments against the input schema of
// the tool the approval wait ws proposes to call, or a response against
// its output schema. A wait that is not an agent's approval takes a
// payload as its result and no response.
func (c toolSchemas) decision(ctx context.Context, ws *waitState, p *DecideParams) error {
	if ws.Kind == WaitRunaway {
		if p.Respond {
			return protocolErr(CodeBadRequest, "wait %s is a runaway wait: approve it (with a note for the model, if any) to resume the agent, or reject it to end the node", ws.ID)
		}
		_, err := runawayNote(p.Payload)
		return err
	}
	if ws.Kind != WaitApproval {
		if p.Respond {
			return protocolErr(CodeBadRequest, "wait %s is a %s wait: only an agent's proposed call is answered in the tool's place (approve it with a payload instead)", ws.ID, ws.Kind)
		}
		return nil
	}
	tool := approvalTool(ws)
	if p.Respond {
		return c.result(ctx, tool, p.Result)
	}
	return c.edit(ctx, tool, p.Payload)
}

// approvalTool is the tool an approval wait proposes to call.
func approvalTool(ws *waitState) string {
	var shown struct {
		Tool string `json:"tool"`
	}
	_ = json.Unmarshal(ws.Shown, &shown)
	return shown.Tool
}

// edit checks edited arguments (in the model's form, as the wait
// shows them) against the input schema of tool, with a deadline.
func (c toolSchemas) edit(ctx context.Context, tool string, args json.RawMessage) error {
	if len(args) > MaxResultBytes {
		// Written onto the call's record, which a turn's other calls share.
		return protocolErr(CodeBadInput, "the edited arguments are %d bytes; they are at most %d", len(args), MaxResultBytes)
	}
	info, ok := c.e.tools.LookupTool(tool)
	if !ok || len(info.InputSchema) == 0 {
		return nil
	}
	input, err := callInput(info.InputSchema, args)
	if err != nil {
		return protocolErr(CodeBadInput, "the edited arguments of %s: %v; the wait stays open", tool, err)
	}
	return c.check(ctx, info.InputSchema, input, CodeBadInput, "the edited arguments", "input schema of "+tool)
}

// parkedRunTx reads owner's run runID with its continuation and step task
// (nil when it has none), for an answer to its wait target: a run that is
// not there or is another owner's is errNotYours, one without a
// continuation is not waiting (a refusal with errSkip).
func parkedRunTx(tx store.Tx, owner, runID, target string) (*store.Run, *continuation, *store.Task, *Error, error) {
	run, err := tx.RunGet(runID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && run.Owner != owner) {
		return nil, nil, nil, nil, errNotYours
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	raw, err := tx.ContinuationGet(run.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil, notWaiting(run.ID, target, "it is "+string(run.Phase)), errSkip
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	c, err := decodeContinuation(raw)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	t, err := stepTaskTx(tx, run.ID)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return run, c, t, nil, nil
}

// decideTargetTx finds the open wait p names, with its run,
// continuation and step task, or why it cannot be decided: another
// owner's run (errNotYours), or a refusal with errSkip (not waiting,
// ambiguous, decided before, another proposal than the one named).
func decideTargetTx(tx store.Tx, p DecideParams, now time.Time) (*store.Run, *continuation, *store.Task, *waitState, *Error, error) {
	run, c, t, refusal, err := parkedRunTx(tx, p.Owner, p.RunID, p.Node)
	if err != nil {
		return nil, nil, nil, nil, refusal, err
	}
	ws, refusal := decidableWait(run, c, t, p.Node)
	switch {
	case refusal == nil:
		refusal = expiredApproval(c, ws, p.Node, now)
	case refusal.Code == CodeAlreadyDecided:
		// The engine's own rejection of an approval nobody decided in
		// time says so.
		if exp := expiredApproval(c, nil, p.Node, now); exp != nil {
			refusal = exp
		}
	}
	if refusal == nil {
		refusal = checkDigest(ws, p.Digest)
	}
	if refusal != nil {
		return nil, nil, nil, nil, refusal, errSkip
	}
	return run, c, t, ws, nil, nil
}

// decideTx records p's decision (with its canonical payload or result,
// checked by DecideWait) in tx on the open wait p names, wakes the run's
// step task and answers the wait; or it answers why the decision is
// refused, with errSkip.
func decideTx(tx store.Tx, p DecideParams, now time.Time) (Decided, *Error, error) {
	owner, runID := p.Owner, p.RunID
	run, c, t, ws, refusal, err := decideTargetTx(tx, p, now)
	if err != nil {
		return Decided{}, refusal, err
	}
	d := &decision{Approved: p.Approve, Reason: p.Reason, By: owner, At: now}
	what := DecisionApproved
	typ, detail := "approved", map[string]any{"by": owner, "wait": ws.ID, "kind": ws.Kind}
	if p.Digest != "" {
		detail["digest"] = p.Digest // the proposal the decider saw
	}
	switch {
	case !p.Approve:
		typ, detail["reason"] = "rejected", p.Reason
		what = DecisionRejected
	case ws.Kind != WaitApproval && p.Respond:
		// Checked before the write; a wait of another kind under the
		// same name since is refused as that check would.
		return Decided{}, protocolErr(CodeBadRequest, "wait %s is a %s wait: only an agent's proposed call is answered in the tool's place", ws.ID, ws.Kind), errSkip
	case ws.Kind != WaitApproval:
		d.Payload = p.Payload
		if len(p.Payload) > 0 {
			// A recording replays the decision with it (runtime/replay).
			detail["payload"] = p.Payload
		}
	case p.Respond:
		// The person's answer is the call's result: the tool never runs.
		d.Respond, d.Result = true, p.Result
		typ, what = "responded", DecisionResponded
		detail["proposed_digest"] = proposalDigestOf(ws)
		detail["result_digest"] = hashHex(p.Result)
	case len(p.Payload) > 0 && ProposalDigest(p.Payload) != proposalDigestOf(ws):
		// An edit: the call runs with these arguments. Both digests are
		// journaled, so the event says what was proposed and what ran.
		d.Arguments = p.Payload
		what = DecisionEdited
		detail["edited"] = true
		detail["proposed_digest"] = proposalDigestOf(ws)
		detail["edited_digest"] = ProposalDigest(p.Payload)
	}
	ws.Decision = d
	decided := Decided{Decision: what,
		Wait: HumanWait{ID: ws.ID, Kind: ws.Kind, RunID: runID, Flow: run.Flow, Node: ws.Node, Since: ws.Since, Until: ws.Until, Shown: ws.Shown}}
	if err := tx.ContinuationPut(runID, encodeContinuation(c)); err != nil {
		return Decided{}, nil, err
	}
	// A task being worked takes the decision when it next commits (an
	// agent running its other calls), or finds itself woken when it
	// parks; a parked one is woken.
	if t != nil {
		if _, err := wakeParkedTx(tx, t, now); err != nil {
			return Decided{}, nil, err
		}
	}
	return decided, nil, appendEvent(tx, runID, typ, run.Attempt, ws.Node, detail, now)
}

// decidableWait is the open decision of run (continuation c, step task t)
// that target names, a wait id or a node, or the refusal of a decision
// there: ambiguous, already decided, or not waiting.
func decidableWait(run *store.Run, c *continuation, t *store.Task, target string) (*waitState, *Error) {
	runID := run.ID
	var ws *waitState
	var atNode []string
	open := openDecisions(c, t)
	for _, o := range open {
		switch {
		case IsWaitID(target) && o.ID == target:
			ws = o
		case !IsWaitID(target) && o.Node == target:
			ws = o
			atNode = append(atNode, o.ID)
		}
	}
	if len(atNode) > 1 {
		return nil, protocolErr(CodeAmbiguousWait, "run %s has %d decisions open at node %s: name one of the waits %s",
			runID, len(atNode), target, strings.Join(atNode, ", "))
	}
	if ws != nil && !run.Phase.Terminal() {
		return ws, nil
	}
	if id, ok, by, at, found := decidedAt(c, target, t); found {
		verb := "rejected"
		if ok {
			verb = "approved"
		}
		return nil, protocolErr(CodeAlreadyDecided, "the wait %s of run %s was already %s by %s at %s; a wait is decided once",
			id, runID, verb, by, at.UTC().Format(time.RFC3339))
	}
	if run.Phase.Terminal() {
		return nil, notWaiting(runID, target, "it is "+string(run.Phase))
	}
	if t != nil && t.Leased && t.WaitKind == WaitHuman && t.Node == target {
		return nil, notWaiting(runID, target, "it is being resumed (its timeout passed)")
	}
	for _, ws := range budgetWaits(c) {
		if ws.ID == target || ws.Node == target {
			return nil, notWaiting(runID, target, fmt.Sprintf("%s waits for more budget, not for a decision: weir run budget %s --add N", ws.ID, runID))
		}
	}
	if ws := unknownAt(c, target); ws != nil {
		return nil, notWaiting(runID, target, fmt.Sprintf("%s waits for an unknown outcome to be resolved, not for a decision: weir run resolve %s %s --happened [--result JSON] | --not-happened", ws.ID, runID, ws.ID))
	}
	return nil, notWaiting(runID, target, "no decision is open there"+openWaitsHint(open, target))
}

// notWaiting refuses a decision at target (a node or a wait id) of a run
// that waits for none there, saying why.
func notWaiting(runID, target, why string) *Error {
	what := "at node " + target
	if IsWaitID(target) {
		what = "on wait " + target
	}
	return protocolErr(CodeNotWaiting, "run %s is not waiting for a decision %s: %s", runID, what, why)
}

// openWaitsHint tells a decision that named no open wait what it could
// have named: the open wait or node closest to target (flows.Suggest, as
// registration suggests a node) and the run's open waits, bounded.
func openWaitsHint(open []*waitState, target string) string {
	if len(open) == 0 {
		return "; the run has no decision open"
	}
	var listed textbound.List
	var candidates []string
	for _, o := range open {
		listed.Add(o.ID + " (node " + o.Node + ")")
		if IsWaitID(target) {
			candidates = append(candidates, o.ID)
		} else {
			candidates = append(candidates, o.Node)
		}
	}
	hint := ""
	if s := flows.Suggest(target, candidates); s != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", s)
	}
	return fmt.Sprintf("%s; its open waits: %s", hint, listed.Join(", "))
}

// HumanWait is an open wait: what a person must decide for a run to go
// on (kinds human and approval), or what a parked run waits for.
type HumanWait struct {
	// ID is the wait's id (WaitID), which a decision may name instead of
	// the node.
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	RunID string `json:"run_id"`
	Flow  string `json:"flow"`
	Node  string `json:"node"`
	// Since is when the run parked on it (zero for a wait written before
	// the wait model); Until its deadline.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Shown is what the decider is shown: a wait node's request, or the
	// tool call an agent proposed ({tool, arguments, digest}).
	Shown json.RawMessage `json:"shown,omitempty"`
}

// NeedsDecision says whether the wait ends by a person's decision.
func (w HumanWait) NeedsDecision() bool {
	return w.Kind == WaitHuman || w.Kind == WaitApproval || w.Kind == WaitRunaway
}

// Digest is the digest of the call an agent's approval wait proposes
// (ProposalDigest of the arguments it shows); "" for any other wait.
func (w HumanWait) Digest() string {
	if w.Kind != WaitApproval {
		return ""
	}
	return proposalDigestOf(&waitState{Shown: w.Shown})
}

// runWaitsTx lists the open waits of one run: its open decisions, and
// (all) what its parked step task waits for besides.
func runWaitsTx(tx store.Tx, run *store.Run, all bool) ([]HumanWait, error) {
	if run.Phase.Terminal() {
		return nil, nil
	}
	tasks, err := tx.TaskListByRun(run.ID)
	if err != nil {
		return nil, err
	}
	var t *store.Task
	for _, x := range tasks {
		if x.Kind == store.TaskStep {
			t = x
		}
	}
	raw, err := tx.ContinuationGet(run.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := decodeContinuation(raw)
	if err != nil {
		return nil, err
	}
	var out []HumanWait
	for _, ws := range openDecisions(c, t) {
		out = append(out, HumanWait{ID: ws.ID, Kind: ws.Kind, RunID: run.ID, Flow: run.Flow, Node: ws.Node, Since: ws.Since, Until: ws.Until, Shown: ws.Shown})
	}
	if !all {
		out = append(out, exhaustedWaits(run, c, t)...) // a person redrives them
		// A person resolves an unknown outcome.
		out = append(out, unknownWaits(run, c, t)...)
	} else {
		// A fan-out item's or an agent call's unknown wait is not what
		// the step task itself waits for (its cohort, its calls).
		out = append(out, callUnknownWaits(run, c, t)...)
	}
	// A fan-out item's exhausted wait: a person redrives it.
	out = append(out, humanWaitsOf(run, callWaits(c, t, WaitExhausted))...)
	// An agent's budget wait: its owner raises the budget.
	out = append(out, humanWaitsOf(run, budgetWaits(c))...)
	if all && t != nil && !t.Leased && t.WaitKind != WaitHuman && t.WaitKind != WaitApproval && t.WaitKind != WaitRunaway && t.WaitKind != WaitBudget && t.Node != "" && !parkedOnCallUnknowns(c, t) {
		kind := t.WaitKind
		if kind == "" && run.Phase == store.PhaseWaiting {
			kind = WaitTimer
		}
		if kind != "" {
			w := HumanWait{ID: WaitID(t.Node, c.Visits[t.Node]), Kind: kind, RunID: run.ID, Flow: run.Flow, Node: t.Node, Until: t.ReadyAt}
			if ws := c.Waits[t.Node]; ws != nil {
				if ws.ID != "" {
					w.ID = ws.ID // an agent's flow call: NODE@VISIT.TURN.CALL
				}
				w.Since, w.Shown = ws.Since, ws.Shown
				if !ws.Until.IsZero() {
					w.Until = ws.Until
				}
			}
			if t.WaitChild != "" {
				w.Shown = mustJSON(map[string]string{"child": t.WaitChild})
			}
			out = append(out, w)
		}
	}
	return out, nil
}

// HumanWaits lists the open decisions of owner's run and its
// descendants: what a person must decide for the run to go on.
func (e *Engine) HumanWaits(ctx context.Context, owner, runID string) ([]HumanWait, error) {
	if _, err := e.Get(ctx, owner, runID); err != nil {
		return nil, err
	}
	var out []HumanWait
	err := e.st.View(ctx, func(tx store.Tx) error {
		out = nil
		queue := []string{runID}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			run, err := tx.RunGet(id)
			if err != nil {
				return err
			}
			ws, err := runWaitsTx(tx, run, false)
			if err != nil {
				return err
			}
			out = append(out, ws...)
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
		return nil, e.admission.readFailed(err)
	}
	return out, nil
}

// Waits lists the open waits of owner's run itself, of every kind: its
// open decisions and what its parked task waits for (a child, a cohort,
// a timer). run must come from Get.
func (e *Engine) Waits(ctx context.Context, run *store.Run) ([]HumanWait, error) {
	var out []HumanWait
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = runWaitsTx(tx, run, true)
		return err
	})
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	return out, nil
}
