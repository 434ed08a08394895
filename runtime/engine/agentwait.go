package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// An agent parks twice over (docs/design.md §9, §11): on a person's approval
// of a call of one of its approve tools, and on a child run that is a call
// of one of its flows. Both are waits of the one wait model, with ids
// derived from the call's place (WaitID(node, visit, turn, call) for an
// approval), and both give the agent's slot back while they last.

// evApprovalAsked records that an agent proposed a call a person must
// approve: the wait id, the tool and its arguments.
const evApprovalAsked = "approval_asked"

// approvalWait is the approval wait of call i of turn t: the one already
// open (decided or not), or a new one showing the tool and its arguments,
// whose deadline is the node's approval_ttl from now or the loop's,
// whichever comes first (none if the node has neither).
func (s *stepper) approvalWait(a *agentLoop, t *store.AgentTurn, i int, args json.RawMessage, now time.Time) (*waitState, bool) {
	id := WaitID(a.node.ID, a.visit, t.Turn, i)
	if ws := s.cont.Approvals[id]; ws != nil {
		return ws, false
	}
	until, expires := now.Add(noTimeout), false
	if a.node.Timeout > 0 {
		until = a.started.Add(a.node.Timeout)
	}
	if ttl := a.node.ApprovalTTL; ttl > 0 && now.Add(ttl).Before(until) {
		until, expires = now.Add(ttl), true
	}
	ws := &waitState{ID: id, Kind: WaitApproval, Node: a.node.ID, Since: now, Until: until, Expires: expires, Visit: a.visit, Call: []int{t.Turn, i},
		Shown: mustJSON(map[string]any{"tool": t.Calls[i].Tool, "arguments": args, "digest": ProposalDigest(args), "turn": t.Turn, "call": i})}
	if s.cont.Approvals == nil {
		s.cont.Approvals = map[string]*waitState{}
	}
	s.cont.Approvals[id] = ws
	return ws, true
}

// approvalsAskedTx records the proposals just made in the run's events.
func (s *stepper) approvalsAskedTx(tx store.Tx, fresh []*waitState, now time.Time) error {
	for _, ws := range fresh {
		var shown map[string]any
		_ = json.Unmarshal(ws.Shown, &shown)
		shown["wait"] = ws.ID
		if err := appendEvent(tx, s.run.ID, evApprovalAsked, s.run.Attempt, ws.Node, shown, now); err != nil {
			return err
		}
	}
	return nil
}

// awaitApprovals parks the agent until a person decides one of its
// proposed calls, or the loop's timeout. A decision given while the agent
// ran its other calls was taken into the continuation by this very
// commit (takeDecisionsTx): then the run comes straight back.
func (s *stepper) awaitApprovals(ctx context.Context, a *agentLoop, undecided []*waitState) bool {
	now := s.e.clock.Now()
	until := undecided[0].Until
	ids := make([]string, len(undecided))
	for j, ws := range undecided {
		ids[j] = ws.ID
		if ws.Until.Before(until) {
			until = ws.Until
		}
	}
	if !now.Before(until) {
		return s.agentTimedOut(ctx, a)
	}
	s.commit(ctx, func(tx store.Tx) error {
		readyAt := until
		for _, ws := range undecided {
			if ws.Decision != nil {
				readyAt = now
			}
		}
		return s.parkTx(tx, now, readyAt, WaitApproval, "", map[string]any{"waits": ids})
	})
	return false
}

// prepareAgentChild builds the child run of a call of flow name with
// input args, refusing (as the call's result, which the model is told) a
// cycle, a chain too deep, an unknown flow and an input its schema
// refuses.
func (s *stepper) prepareAgentChild(ctx context.Context, a *agentLoop, name string, args json.RawMessage, share int64) (*store.Run, *store.Task, string, *store.RunError) {
	e := s.e
	chain := append(slices.Clone(s.run.Ancestors), s.run.Flow)
	if slices.Contains(chain, name) {
		return nil, nil, "", &store.RunError{Code: CodeRuntimeCycle,
			Message: fmt.Sprintf("starting %s would close a subflow cycle: %s", name, strings.Join(append(chain, name), " -> "))}
	}
	depth, limit := s.run.Depth+1, s.run.DepthLimit
	if depth > limit {
		return nil, nil, "", &store.RunError{Code: CodeRuntimeDepth,
			Message: fmt.Sprintf("starting %s would make the subflow chain %d deep, beyond the limit %d: %s", name, depth, limit, strings.Join(append(chain, name), " -> "))}
	}
	cfe, err := e.book.latest(ctx, name)
	if err != nil {
		code := ErrorCode(err)
		if code == CodeFlowUnreadable {
			code = CodeChildUnreadable
		}
		return nil, nil, "", &store.RunError{Code: code, Message: err.Error()}
	}
	input, err := callInput(cfe.flow.Input, args)
	if err == nil {
		input, err = canonicalInput(input)
	}
	if err == nil {
		err = e.book.validateInput(ctx, cfe, input)
	}
	if err != nil {
		return nil, nil, "", &store.RunError{Code: CodeBadInput, Message: fmt.Sprintf("input for flow %s: %v", name, err)}
	}
	budget, reserve, rerr := s.agentChildBudget(ctx, name, cfe.flow.Budget, share)
	if rerr != nil {
		return nil, nil, "", rerr
	}
	now := e.clock.Now()
	child := &store.Run{
		ID: newID("run"), Flow: cfe.flow.Name, Version: cfe.hash, Owner: s.run.Owner,
		Input: input, InputHash: hashHex(input), Phase: store.PhaseQueued, Attempt: 1,
		Depth: depth, DepthLimit: min(limit, depth+cfe.flow.MaxDepth), Ancestors: chain,
		ParentRunID: s.run.ID, ParentNode: a.node.ID, ConfigVersion: e.cfg.Load().ConfigVersion,
		Budget: budget, Reserve: reserve, CreatedAt: now, UpdatedAt: now,
	}
	return child, newStepTask(child, cfe.flow.Entry, now), cfe.flow.Entry, nil
}

// agentChildBudget is the budget of the child run of a flow tool call
// and what it holds in escrow out of the run's remainder (docs/design.md
// §4.1.1): the flow's own budget, else share (flowCallShare), reserved in
// the ledger here; the caller writes it with escrowTx and gives it back
// with unreserveChild if its commit fails.
func (s *stepper) agentChildBudget(ctx context.Context, flow string, flowBudget, share int64) (budget, reserve int64, rerr *store.RunError) {
	if err := s.syncAccount(ctx); err != nil {
		s.e.admission.storageFailed(err)
		return 0, 0, &store.RunError{Code: CodeStorage, Message: err.Error()}
	}
	budget, reserve = childBudget(s.run.Budget, 0, flowBudget, share)
	if rerr := s.reserveChild(reserve, "a child run of flow "+flow); rerr != nil {
		return 0, 0, rerr
	}
	return budget, reserve, nil
}

// ProposalDigest is the digest of a proposed call's arguments, its
// canonical JSON's SHA-256 in hex: shown on the call's approval wait
// (shown.digest), so that a decision may name the proposal it saw and is
// refused (E_STALE_DECISION) when the wait shows another.
func ProposalDigest(args json.RawMessage) string {
	if canon, err := canonicalInput(args); err == nil {
		args = canon
	}
	return hashHex(args)
}

// checkDigest refuses a decision that names a digest the wait it decides
// does not show: another proposal than the one the decider saw, or a
// wait that is not an agent's approval (only those have one).
func checkDigest(ws *waitState, digest string) *Error {
	if digest == "" {
		return nil
	}
	if ws.Kind != WaitApproval {
		return protocolErr(CodeBadRequest, "wait %s is a %s wait: only an agent's approval has a digest to name", ws.ID, ws.Kind)
	}
	if got := proposalDigestOf(ws); got != digest {
		return protocolErr(CodeStaleDecision, "wait %s shows the proposal with digest %s, not the %s this decision saw: read the wait again and decide on what it shows", ws.ID, got, digest)
	}
	return nil
}

// proposalDigestOf is the digest of the arguments the approval wait ws
// shows, computed again from them so that waits opened before digests
// were shown check too.
func proposalDigestOf(ws *waitState) string {
	var shown struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(ws.Shown, &shown)
	return ProposalDigest(shown.Arguments)
}

// evApprovalExpired records that nobody decided a proposed call within
// its node's approval_ttl: the engine rejected it.
const evApprovalExpired = "approval_expired"

// expireApprovals rejects, as the engine's own decision, the undecided
// approvals of the agent's visit whose approval_ttl passed by now, so
// that their calls end with E_APPROVAL_EXPIRED (which the model is told)
// and a late decision is refused with that code. It is a write of its
// own, made before the calls are sorted, that takes a person's decision
// the store holds instead of overwriting it: one given in time, while
// this step ran, stands. false: the write failed and the step ends.
func (s *stepper) expireApprovals(ctx context.Context, a *agentLoop, now time.Time) bool {
	var due []*waitState
	for _, ws := range s.cont.Approvals {
		if ws.Node == a.node.ID && ws.Visit == a.visit && ws.Kind == WaitApproval && ws.Decision == nil && ws.Expires && !now.Before(ws.Until) {
			due = append(due, ws)
		}
	}
	if len(due) == 0 {
		return true
	}
	ttl := a.node.ApprovalTTL
	ok := s.commit(ctx, func(tx store.Tx) error {
		raw, err := tx.ContinuationGet(s.run.ID)
		if err != nil {
			return err
		}
		stored, err := decodeContinuation(raw)
		if err != nil {
			return err
		}
		for _, ws := range due {
			if got := stored.Approvals[ws.ID]; got != nil && got.Decision != nil {
				ws.Decision = got.Decision // a person decided in time
				continue
			}
			ws.Decision = &decision{Approved: false, Expired: true, By: "weir", At: now,
				Reason: fmt.Sprintf("nobody decided it within the approval_ttl %s", ttl)}
			if err := appendEvent(tx, s.run.ID, evApprovalExpired, s.run.Attempt, ws.Node,
				map[string]any{"wait": ws.ID, "approval_ttl": ttl.String(), "until": ws.Until}, now); err != nil {
				return err
			}
		}
		return tx.ContinuationPut(s.run.ID, encodeContinuation(s.cont))
	})
	if !ok {
		for _, ws := range due {
			ws.Decision = nil // memory as it was: the write did not happen
		}
	}
	return ok
}

// approvalExpired is the end of a call whose approval expired.
func approvalExpired(tool string, ttl time.Duration) *store.RunError {
	return &store.RunError{Code: CodeApprovalExpired,
		Message: fmt.Sprintf("nobody decided this call of %s within its approval_ttl %s: it did not run", tool, ttl)}
}

// expiredApproval refuses a decision on an approval that expired, one
// the run took past or one whose deadline just passed; nil otherwise.
func expiredApproval(c *continuation, ws *waitState, target string, now time.Time) *Error {
	if ws != nil && ws.Kind == WaitApproval && ws.Expires && ws.Decision == nil && !now.Before(ws.Until) {
		return protocolErr(CodeApprovalExpired, "the approval wait %s expired at %s: the call was rejected and the model told so", ws.ID, ws.Until.UTC().Format(time.RFC3339))
	}
	for _, a := range c.Approvals {
		if a.Decision != nil && a.Decision.Expired && (a.ID == target || (!IsWaitID(target) && a.Node == target)) {
			return protocolErr(CodeApprovalExpired, "the approval wait %s expired at %s: the call was rejected and the model told so", a.ID, a.Until.UTC().Format(time.RFC3339))
		}
	}
	for i := len(c.Decided) - 1; i >= 0; i-- {
		if d := c.Decided[i]; d.Expired && d.ID == target {
			return protocolErr(CodeApprovalExpired, "the approval wait %s expired at %s: the call was rejected and the model told so", d.ID, d.At.UTC().Format(time.RFC3339))
		}
	}
	return nil
}
