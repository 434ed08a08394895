package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// Schedules lists the caller's schedules in name order (GET
// /v1/schedules); limit 0 leaves the count to the daemon (100).
func (c *Client) Schedules(ctx context.Context, limit int) ([]apitypes.Schedule, error) {
	path := "/schedules"
	if limit != 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	return callList[apitypes.Schedule](ctx, c, http.MethodGet, path, nil)
}

// Schedule reads one of the caller's schedules with its next ticks (GET
// /v1/schedules/{name}).
func (c *Client) Schedule(ctx context.Context, name string) (*apitypes.Schedule, error) {
	return callOne[apitypes.Schedule](ctx, c, http.MethodGet, "/schedules/"+escape(name), nil)
}

// SchedulePause stops a schedule's firing until SchedulePause with pause
// false resumes it (POST /v1/schedules/{name}/pause or /resume).
func (c *Client) SchedulePause(ctx context.Context, name string, pause bool, reason string) (*apitypes.Schedule, error) {
	verb, body := "/resume", any(struct{}{})
	if pause {
		verb, body = "/pause", apitypes.SchedulePauseRequest{Reason: reason}
	}
	return callOne[apitypes.Schedule](ctx, c, http.MethodPost, "/schedules/"+escape(name)+verb, body)
}

// ScheduleTrigger fires a schedule now (POST /v1/schedules/{name}/trigger);
// a request id makes it once per id.
func (c *Client) ScheduleTrigger(ctx context.Context, name, requestID string) (*apitypes.StartResult, error) {
	if err := checkRequestID(requestID); err != nil {
		return nil, err
	}
	return callOne[apitypes.StartResult](ctx, c, http.MethodPost, "/schedules/"+escape(name)+"/trigger", apitypes.ScheduleTriggerRequest{RequestID: requestID})
}

// ScheduleRemove removes one of the caller's schedules (DELETE
// /v1/schedules/{name}).
func (c *Client) ScheduleRemove(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/schedules/"+escape(name), nil, nil)
}
