package engine

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// An agent that says on_budget = "ask" (or whose flow says so) does not
// fail when the run's budget cannot cover its next model turn: the run
// parks on a wait of kind budget, NODE@VISIT.budget.N (DESIGN §12),
// showing what it spent, what the turn needs and the turn itself, and its
// owner raises the run's budget with Ops.BudgetAdd (weir run budget RUN
// --add N). The woken agent reserves the turn again; if the new budget
// covers it the wait is settled and the loop goes on, else it parks on
// the same wait. Nothing is spent past the budget: the reservation is the
// ledger's, as before.

// WaitBudget: the run's budget cannot cover an agent's next model turn on
// a node that says on_budget = "ask"; the run waits for its owner to
// raise the budget (Ops.BudgetAdd). Its wait id is NODE@VISIT.budget.N.
const WaitBudget = "budget"

// evBudgetAsked records that an agent parked for more budget;
// evBudgetAdded that a run's owner raised its budget.
const (
	evBudgetAsked = "budget_asked"
	evBudgetAdded = "budget_added"
)

// BudgetWaitID is the id of the n-th budget wait of visit of node:
// NODE@VISIT.budget.N.
func BudgetWaitID(node string, visit, n int) string {
	return WaitID(node, visit) + "." + WaitBudget + "." + strconv.Itoa(n)
}

// budgetShown is what a budget wait shows: the run's budget, what it has
// spent and holds, what the next call needs, and that call.
type budgetShown struct {
	Budget int64  `json:"budget"`
	Spent  int64  `json:"spent"`
	Needed int64  `json:"needed"`
	Short  int64  `json:"short"`
	Next   string `json:"next"`
}

// asksBudget says the agent parks for more budget instead of failing.
func asksBudget(node *flows.Node) bool { return node.OnBudget == flows.OnBudgetAsk }

// openBudgetWait is the open budget wait of the agent's visit, or nil.
func (s *stepper) openBudgetWait(a *agentLoop) *waitState {
	n := s.cont.Budget[a.node.ID]
	if n.Visit != a.visit || n.N == 0 {
		return nil
	}
	return s.cont.Approvals[BudgetWaitID(a.node.ID, a.visit, n.N)]
}

// settleBudgetWait drops the agent's open budget wait once a reservation
// it waited for holds; the next write records it.
func (s *stepper) settleBudgetWait(a *agentLoop) {
	if ws := s.openBudgetWait(a); ws != nil {
		delete(s.cont.Approvals, ws.ID)
	}
}

// askBudget parks the run on the agent's budget wait (a new one, or the
// one still open) for cost more, what naming the call.
func (s *stepper) askBudget(ctx context.Context, a *agentLoop, cost int64, what string) bool {
	node := a.node
	now := s.e.clock.Now()
	spent := s.e.ledger.Spent(s.run.ID)
	rest, _ := s.e.ledger.Remainder(s.run.ID)
	shown := budgetShown{Budget: s.run.Budget, Spent: spent, Needed: cost, Short: max(cost-rest, 1), Next: what}
	ws := s.openBudgetWait(a)
	fresh := ws == nil
	if fresh {
		n := s.cont.Budget[node.ID]
		if n.Visit != a.visit {
			n = exhaustCount{Visit: a.visit}
		}
		n.N++
		if s.cont.Budget == nil {
			s.cont.Budget = map[string]exhaustCount{}
		}
		s.cont.Budget[node.ID] = n
		until := now.Add(noTimeout)
		if node.Timeout > 0 {
			until = a.started.Add(node.Timeout)
		}
		ws = &waitState{ID: BudgetWaitID(node.ID, a.visit, n.N), Kind: WaitBudget, Node: node.ID, Since: now, Until: until, Visit: a.visit}
		if s.cont.Approvals == nil {
			s.cont.Approvals = map[string]*waitState{}
		}
		s.cont.Approvals[ws.ID] = ws
	}
	if !now.Before(ws.Until) {
		delete(s.cont.Approvals, ws.ID)
		return s.agentTimedOut(ctx, a)
	}
	ws.Shown = mustJSON(shown)
	s.commit(ctx, func(tx store.Tx) error {
		if fresh {
			if err := appendEvent(tx, s.run.ID, evBudgetAsked, s.run.Attempt, node.ID, map[string]any{"wait": ws.ID, "budget": shown.Budget,
				"spent": shown.Spent, "needed": shown.Needed, "next": what}, now); err != nil {
				return err
			}
		}
		return s.parkTx(tx, now, ws.Until, WaitBudget, "", map[string]any{"wait": ws.ID})
	})
	return false
}

// budgetWaits lists the open budget waits of the run at c.
func budgetWaits(c *continuation) []*waitState {
	var out []*waitState
	for _, ws := range c.Approvals {
		if ws.Kind == WaitBudget && ws.Node == c.Node && ws.Visit == c.Visits[ws.Node] {
			out = append(out, ws)
		}
	}
	return out
}

// BudgetAddParams is a raise of a run's budget by its owner.
type BudgetAddParams struct {
	Owner string
	RunID string
	// Add is how much more the run may spend, a positive integer.
	Add int64
	// Reason is journaled with the raise (optional).
	Reason string
	// RequestID makes the raise idempotent: sent again with the same id
	// (a client's retry after a lost answer) it is answered, not applied
	// twice; with another Add, E_DEDUP_CONFLICT. "": every request raises.
	RequestID string
}

// BudgetAdded is what BudgetAdd did: the run's budget before and after,
// and the budget wait it settles, if the run was parked on one.
type BudgetAdded struct {
	RunID  string `json:"run_id"`
	Before int64  `json:"before"`
	Budget int64  `json:"budget"`
	Wait   string `json:"wait,omitempty"`
	// Existing: the request id raised the budget before; nothing changed.
	Existing bool `json:"existing,omitempty"`
}

// raiseOf finds the raise run recorded under request id id.
func raiseOf(run *store.Run, id string) (store.BudgetRaise, bool) {
	for _, r := range run.Raises {
		if id != "" && r.RequestID == id {
			return r, true
		}
	}
	return store.BudgetRaise{}, false
}

// recordRaise keeps a raise made with request id id (none: nothing) on
// the run, the latest store.MaxRaises of them.
func recordRaise(run *store.Run, id string, add int64) {
	if id == "" {
		return
	}
	run.Raises = append(run.Raises, store.BudgetRaise{RequestID: id, Add: add})
	run.Raises = run.Raises[max(len(run.Raises)-store.MaxRaises, 0):]
}

// budgetRefusalTx is why run's budget cannot be raised by p.Add (nil: it
// can): the run ended, has no budget, would overflow, or the owner's
// budgetPerHour (0: none) has no room for it.
func budgetRefusalTx(tx store.Tx, run *store.Run, p BudgetAddParams, budgetPerHour int64, now time.Time) (*Error, error) {
	switch {
	case run.Phase.Terminal():
		return protocolErr(CodeNotWaiting, "run %s is %s: its budget can no longer be raised", run.ID, run.Phase), nil
	case run.Budget == 0:
		return protocolErr(CodeBadRequest, "run %s has no budget to raise: it may spend without a bound", run.ID), nil
	case run.Budget > 1<<62-p.Add:
		return protocolErr(CodeBadRequest, "add = %d would make run %s's budget overflow", p.Add, run.ID), nil
	case budgetPerHour <= 0:
		return nil, nil
	}
	spent, wait, err := ownerSpentTx(tx, p.Owner, budgetPerHour, now)
	if err != nil || spent+p.Add <= budgetPerHour {
		return nil, err
	}
	return protocolErr(CodeOwnerBudget, "owner %q spent %d of its budget_per_hour of %d in the last hour: it cannot give run %s %d more (at most %d now, more again in %s)",
		p.Owner, spent, budgetPerHour, run.ID, p.Add, max(budgetPerHour-spent, 0), wait.Round(time.Second)), nil
}

// wakeBudgetWaitTx wakes run runID's step task if the run is parked on a
// budget wait, and returns that wait's id ("" when it is not).
func wakeBudgetWaitTx(tx store.Tx, runID string, now time.Time) (string, error) {
	raw, err := tx.ContinuationGet(runID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	c, err := decodeContinuation(raw)
	if err != nil {
		return "", err
	}
	ws := budgetWaits(c)
	if len(ws) == 0 {
		return "", nil
	}
	tasks, err := tx.TaskListByRun(runID)
	if err != nil {
		return "", err
	}
	for _, t := range tasks {
		if t.Kind == store.TaskStep {
			if _, err := wakeParkedTx(tx, t, now); err != nil {
				return "", err
			}
		}
	}
	return ws[0].ID, nil
}

// BudgetAdd raises the budget of owner's run p.RunID by p.Add (one shape
// for operations on runs, DESIGN §12): owner-only (another owner's run is
// not found, and the attempt audited), journaled with the owner and the
// reason as a budget_added event, and within the owner's budget_per_hour
// if it has one (E_OWNER_BUDGET). A run parked on a budget wait is woken:
// its agent reserves its turn again.
func (o *Ops) BudgetAdd(ctx context.Context, p BudgetAddParams) (BudgetAdded, error) {
	e := o.e
	if p.Add <= 0 {
		return BudgetAdded{}, protocolErr(CodeBadRequest, "add = %d: a budget is raised by a positive integer", p.Add)
	}
	if err := CheckPrintable("reason", p.Reason, MaxReasonBytes); err != nil {
		return BudgetAdded{}, err
	}
	if err := CheckRequestID(p.RequestID); err != nil {
		return BudgetAdded{}, err
	}
	share := e.cfg.Load().ShareOf(p.Owner)
	now := e.clock.Now()
	var out BudgetAdded
	var run *store.Run
	var refusal *Error
	err := e.st.Update(ctx, func(tx store.Tx) error {
		refusal, out = nil, BudgetAdded{}
		var err error
		run, err = tx.RunGet(p.RunID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && run.Owner != p.Owner) {
			return errNotYours
		}
		if err != nil {
			return err
		}
		if r, ok := raiseOf(run, p.RequestID); ok {
			if r.Add != p.Add {
				refusal = protocolErr(CodeDedupConflict, "request id %q raised run %s's budget by %d, not %d", p.RequestID, run.ID, r.Add, p.Add)
				return errSkip
			}
			out = BudgetAdded{RunID: run.ID, Before: run.Budget - r.Add, Budget: run.Budget, Existing: true}
			return errSkip
		}
		if refusal, err = budgetRefusalTx(tx, run, p, share.BudgetPerHour, now); err != nil || refusal != nil {
			return cmp.Or(err, errSkip)
		}
		out.RunID, out.Before = run.ID, run.Budget
		run.Budget += p.Add
		run.UpdatedAt = now
		recordRaise(run, p.RequestID, p.Add)
		out.Budget = run.Budget
		if err := tx.RunUpdate(run); err != nil {
			return err
		}
		if out.Wait, err = wakeBudgetWaitTx(tx, run.ID, now); err != nil {
			return err
		}
		detail := map[string]any{"by": p.Owner, "add": p.Add, "before": out.Before, "budget": out.Budget}
		if p.Reason != "" {
			detail["reason"] = p.Reason
		}
		if p.RequestID != "" {
			detail["request_id"] = p.RequestID
		}
		if out.Wait != "" {
			detail["wait"] = out.Wait
		}
		return appendEvent(tx, run.ID, evBudgetAdded, run.Attempt, "", detail, now)
	})
	switch {
	case errors.Is(err, errNotYours):
		e.auditor.foreign(ctx, p.Owner, p.RunID, "budget add")
		return BudgetAdded{}, protocolErr(CodeNotFound, "no run %s", p.RunID)
	case refusal != nil:
		return BudgetAdded{}, refusal
	case out.Existing:
		return out, nil
	case err != nil:
		return BudgetAdded{}, e.admission.storageFailed(err)
	}
	failpoint.Hit(failpoint.AfterBudgetAdd)
	if e.ledger.HasRun(run.ID) {
		// An account open in this process takes the new budget now; one
		// opened later reads it from the run's record.
		e.ledger.OpenRun(run.ID, run.Budget, run.Spent, run.Escrow)
	}
	e.wake.kick()
	return out, nil
}
