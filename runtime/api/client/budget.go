package client

import (
	"context"
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// RunBudgetAdd raises the budget of run runID by add, a positive integer
// (POST /v1/runs/{id}/budget), with reason journaled. A run parked on a
// budget wait goes on; the raise must fit the owner's budget_per_hour
// (E_OWNER_BUDGET).
func (c *Client) RunBudgetAdd(ctx context.Context, runID string, add int64, reason string) (*apitypes.BudgetAddResponse, error) {
	var res apitypes.BudgetAddResponse
	if err := c.call(ctx, http.MethodPost, "/runs/"+escape(runID)+"/budget", apitypes.BudgetAddRequest{Add: add, Reason: reason}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
