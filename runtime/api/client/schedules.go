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
	var out []apitypes.Schedule
	if err := c.call(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Schedule reads one of the caller's schedules with its next ticks (GET
// /v1/schedules/{name}).
func (c *Client) Schedule(ctx context.Context, name string) (*apitypes.Schedule, error) {
	var out apitypes.Schedule
	if err := c.call(ctx, http.MethodGet, "/schedules/"+escape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SchedulePause stops a schedule's firing until SchedulePause with pause
// false resumes it (POST /v1/schedules/{name}/pause or /resume).
func (c *Client) SchedulePause(ctx context.Context, name string, pause bool, reason string) (*apitypes.Schedule, error) {
	verb, body := "/resume", any(struct{}{})
	if pause {
		verb, body = "/pause", apitypes.SchedulePauseRequest{Reason: reason}
	}
	var out apitypes.Schedule
	if err := c.call(ctx, http.MethodPost, "/schedules/"+escape(name)+verb, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ScheduleTrigger fires a schedule now (POST /v1/schedules/{name}/trigger);
// a request id makes it once per id.
func (c *Client) ScheduleTrigger(ctx context.Context, name, requestID string) (*apitypes.StartResult, error) {
	if err := checkRequestID(requestID); err != nil {
		return nil, err
	}
	var out apitypes.StartResult
	if err := c.call(ctx, http.MethodPost, "/schedules/"+escape(name)+"/trigger", apitypes.ScheduleTriggerRequest{RequestID: requestID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ScheduleRemove removes one of the caller's schedules (DELETE
// /v1/schedules/{name}).
func (c *Client) ScheduleRemove(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/schedules/"+escape(name), nil, nil)
}
