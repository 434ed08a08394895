package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// SendEvent sends one of the caller's events (POST /v1/events). The same
// id sent again answers the stored event with Duplicate set.
func (c *Client) SendEvent(ctx context.Context, ev apitypes.EventSendRequest) (*apitypes.OwnerEvent, error) {
	return callOne[apitypes.OwnerEvent](ctx, c, http.MethodPost, "/events", ev)
}

// EventListOptions select the caller's events: after a seq, only those no
// wait received, at most Limit (0: the daemon's 100).
type EventListOptions struct {
	After       uint64
	Undelivered bool
	Limit       int
}

// Events lists the caller's kept events in the order accepted (GET
// /v1/events).
func (c *Client) Events(ctx context.Context, o EventListOptions) ([]apitypes.OwnerEvent, error) {
	q := url.Values{}
	if o.After != 0 {
		q.Set("after", strconv.FormatUint(o.After, 10))
	}
	if o.Undelivered {
		q.Set("undelivered", "true")
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return callList[apitypes.OwnerEvent](ctx, c, http.MethodGet, "/events"+queryString(q), nil)
}

// Triggers lists the caller's triggers in name order (GET /v1/triggers).
func (c *Client) Triggers(ctx context.Context, limit int) ([]apitypes.Trigger, error) {
	path := "/triggers"
	if limit != 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	return callList[apitypes.Trigger](ctx, c, http.MethodGet, path, nil)
}

// TriggerRemove removes one of the caller's triggers (DELETE
// /v1/triggers/{name}).
func (c *Client) TriggerRemove(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/triggers/"+escape(name), nil, nil)
}
