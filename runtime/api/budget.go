package api

import (
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// routeBudget registers the route that raises a run's budget
// (engine.Ops.BudgetAdd).
func (s *Server) routeBudget() {
	s.handle("POST /v1/runs/{id}/budget", s.budgetAdd)
}

// maxBudgetBody bounds a raise's body: a number and a reason.
const maxBudgetBody = 8 << 10

func (s *Server) budgetAdd(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.BudgetAddRequest
	if !decode(w, r, maxBudgetBody, &req) {
		return
	}
	res, err := s.eng.Ops().BudgetAdd(r.Context(), engine.BudgetAddParams{Owner: ownerFrom(r.Context()), RunID: r.PathValue("id"), Add: req.Add, Reason: req.Reason, RequestID: req.RequestID})
	if err != nil {
		writeResolveErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.BudgetAddResponse{RunID: res.RunID, Before: res.Before, Budget: res.Budget, Wait: res.Wait, Existing: res.Existing})
}
