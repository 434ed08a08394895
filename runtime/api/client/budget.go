package client

import (
	"context"
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// RunBudgetAdd raises the budget of run runID by req.Add, a positive
// integer (POST /v1/runs/{id}/budget), with req.Reason journaled. A run
// parked on a budget wait goes on; the raise must fit the owner's
// budget_per_hour (E_OWNER_BUDGET). With req.RequestID a retry is
// answered (Existing), never applied twice.
func (c *Client) RunBudgetAdd(ctx context.Context, runID string, req apitypes.BudgetAddRequest) (*apitypes.BudgetAddResponse, error) {
	return callOne[apitypes.BudgetAddResponse](ctx, c, http.MethodPost, "/runs/"+escape(runID)+"/budget", req)
}
