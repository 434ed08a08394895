package client

import (
	"context"
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// RunMigrate moves the parked run id to the latest version of its flow
// (POST /v1/runs/{id}/migrate), journaled with reason: E_INCOMPATIBLE
// names what does not fit, E_NOT_WAITING says the run is not parked.
func (c *Client) RunMigrate(ctx context.Context, id, reason string) (*apitypes.MigrateResponse, error) {
	var res apitypes.MigrateResponse
	req := apitypes.MigrateRequest{To: "latest", Reason: reason}
	if err := c.call(ctx, http.MethodPost, "/runs/"+escape(id)+"/migrate", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
