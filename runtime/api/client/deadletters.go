package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// DeadLetterFilter narrows DeadLetters; a zero field does not filter.
type DeadLetterFilter struct {
	Flow string
	Tool string
	// Since is an RFC 3339 time or a Go duration back from now ("1h").
	Since string
	// Limit 0 leaves the count to the daemon (100), at most
	// apitypes.MaxListLimit.
	Limit int
}

// DeadLetters lists the caller's dead letters that match f, oldest first
// (GET /v1/deadletters).
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]apitypes.DeadLetter, error) {
	q := url.Values{}
	for k, v := range map[string]string{"flow": f.Flow, "tool": f.Tool, "since": f.Since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return callList[apitypes.DeadLetter](ctx, c, http.MethodGet, "/deadletters"+queryString(q), nil)
}

// DeadLetter reads the caller's dead letter of task taskID with its run
// (GET /v1/deadletters/{task}).
func (c *Client) DeadLetter(ctx context.Context, taskID string) (*apitypes.DeadLetterDetail, error) {
	return callOne[apitypes.DeadLetterDetail](ctx, c, http.MethodGet, "/deadletters/"+escape(taskID), nil)
}

// Redrive sends the dead letters req names back to the queue (POST
// /v1/deadletters/redrive): the answer says, per task, redriven or
// refused with a code; an error is a request refused whole.
func (c *Client) Redrive(ctx context.Context, req apitypes.RedriveRequest) (*apitypes.RedriveResponse, error) {
	return callOne[apitypes.RedriveResponse](ctx, c, http.MethodPost, "/deadletters/redrive", req)
}
