package client

import (
	"context"
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// Fork makes a new run from the run id at req.From (POST
// /v1/runs/{id}/fork): the source's work before that point is copied,
// never run again. With a request id a fork whose answer was lost can be
// sent again safely (res.Existing). A fork that would call at-most-once
// tools again is refused with apitypes.CodeForkEffects unless
// req.AllowEffects; the message names each call.
func (c *Client) Fork(ctx context.Context, id string, req apitypes.ForkRequest) (*apitypes.ForkResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return nil, err
	}
	return callOne[apitypes.ForkResult](ctx, c, http.MethodPost, "/runs/"+escape(id)+"/fork", req)
}

// RunLineage lists the run's family of forks (GET /v1/runs/{id}/lineage):
// the run they descend from first, then its forks, transitively.
func (c *Client) RunLineage(ctx context.Context, id string) ([]apitypes.Run, error) {
	return callList[apitypes.Run](ctx, c, http.MethodGet, "/runs/"+escape(id)+"/lineage", nil)
}

// RunJournal reads what a recording of the run needs beyond the run, its
// events and its version's sources (GET /v1/runs/{id}/journal): its
// agents' model turns and the declarations of the tools its version calls.
func (c *Client) RunJournal(ctx context.Context, id string) (*apitypes.RunJournal, error) {
	var j apitypes.RunJournal
	if err := c.call(ctx, http.MethodGet, "/runs/"+escape(id)+"/journal", nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}
