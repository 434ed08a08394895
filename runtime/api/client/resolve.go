package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// Resolve answers the unknown wait of run runID (POST
// /v1/runs/{id}/waits/{wait}/resolve): happened with its result (nil:
// null), or not happened, in which case the call is made once more. A
// wait is answered once (E_ALREADY_DECIDED), before its deadline
// (E_WAIT_EXPIRED); a result outside the tool's output schema is
// E_BAD_RESULT and the wait stays open.
func (c *Client) Resolve(ctx context.Context, runID, waitID string, happened bool, result json.RawMessage, reason string) (*apitypes.ResolveResponse, error) {
	var res apitypes.ResolveResponse
	req := apitypes.ResolveRequest{Happened: &happened, Result: result, Reason: reason}
	if err := c.call(ctx, http.MethodPost, "/runs/"+escape(runID)+"/waits/"+escape(waitID)+"/resolve", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
