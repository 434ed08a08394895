package apitypes

// WaitBudget: an agent with on_budget = "ask" parked because the run's
// budget cannot cover its next model turn; the run's owner raises the
// budget (POST /v1/runs/{id}/budget). Its id is NODE@VISIT.budget.N and
// it shows {budget, spent, needed, short, next}.
const WaitBudget = "budget"

// BudgetAddRequest is the body of POST /v1/runs/{id}/budget: how much
// more the run may spend (a positive integer) and why (journaled).
type BudgetAddRequest struct {
	Add    int64  `json:"add"`
	Reason string `json:"reason,omitempty"`
	// RequestID makes the raise idempotent: a retry with the same id is
	// answered (existing), never applied twice.
	RequestID string `json:"request_id,omitempty"`
}

// BudgetAddResponse answers a raise: the run's budget before and after,
// and the budget wait it settles, if the run was parked on one.
type BudgetAddResponse struct {
	RunID  string `json:"run_id"`
	Before int64  `json:"before"`
	Budget int64  `json:"budget"`
	Wait   string `json:"wait,omitempty"`
	// Existing: the request id raised the budget before; nothing changed.
	Existing bool `json:"existing,omitempty"`
}
