package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// Client speaks the daemon's HTTP API on its Unix socket. It is safe for
// concurrent use and keeps connections open between requests.
type Client struct {
	socket string
	tr     *http.Transport
	http   *http.Client
}

// NewClient returns a client for the daemon listening on socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
	}
	return &Client{socket: socket, tr: tr, http: &http.Client{Transport: tr}}
}

// CloseIdle closes idle connections (the daemon is gone or going).
func (c *Client) CloseIdle() { c.tr.CloseIdleConnections() }

// APIError is an error answer of the API: the HTTP status and the engine's
// stable code.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Class   string `json:"class"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// codeHTTP is the code of an error answer that carries none of its own: the
// HTTP status stands in.
const codeHTTP = "E_HTTP"

// Code returns the API error code in err, or "" if err is not an answer of
// the API (a transport error: the daemon may or may not have acted).
func Code(err error) string {
	if e, ok := err.(*APIError); ok {
		return e.Code
	}
	return ""
}

// Do sends method /v1+path with body (nil: none) and decodes a 2xx answer
// into out. Other statuses return an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://weir/v1"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Code == "" {
			e.Code, e.Message = codeHTTP, string(bytes.TrimSpace(data))
		}
		return e
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Health is GET /v1/health.
func (c *Client) Health(ctx context.Context) (engine.Health, error) {
	var h engine.Health
	err := c.Do(ctx, "GET", "/health", nil, &h)
	return h, err
}

// Register checks and registers files together (POST /v1/flows). Refusing
// diagnostics come back as an error carrying them.
func (c *Client) Register(ctx context.Context, files ...engine.SourceFile) (*engine.RegisterResult, error) {
	var res engine.RegisterResult
	if err := c.Do(ctx, "POST", "/flows", api.RegisterRequest{Files: files}, &res); err != nil {
		return nil, err
	}
	if len(res.Diagnostics) > 0 {
		return &res, fmt.Errorf("registration refused: %v", res.Diagnostics)
	}
	return &res, nil
}

// StartRun is POST /v1/runs.
func (c *Client) StartRun(ctx context.Context, flow string, input json.RawMessage, requestID string) (*engine.StartResult, error) {
	var res engine.StartResult
	if err := c.Do(ctx, "POST", "/runs", api.StartRequest{Flow: flow, Input: input, RequestID: requestID}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Run is GET /v1/runs/{id}.
func (c *Client) Run(ctx context.Context, id string) (*api.RunView, error) {
	var v api.RunView
	if err := c.Do(ctx, "GET", "/runs/"+url.PathEscape(id), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Cancel is POST /v1/runs/{id}/cancel.
func (c *Client) Cancel(ctx context.Context, id string) (engine.CancelAnswer, error) {
	var res api.CancelResponse
	if err := c.Do(ctx, "POST", "/runs/"+url.PathEscape(id)+"/cancel", nil, &res); err != nil {
		return "", err
	}
	return res.Answer, nil
}

// Runs lists every run of the caller in phase ("" for all), paging through
// GET /v1/runs.
func (c *Client) Runs(ctx context.Context, phase store.Phase) ([]api.RunView, error) {
	const page = 1000
	var all []api.RunView
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(page)}}
		if after != "" {
			q.Set("after", after)
		}
		if phase != "" {
			q.Set("phase", string(phase))
		}
		var vs []api.RunView
		if err := c.Do(ctx, "GET", "/runs?"+q.Encode(), nil, &vs); err != nil {
			return nil, err
		}
		all = append(all, vs...)
		if len(vs) < page {
			return all, nil
		}
		after = vs[len(vs)-1].ID
	}
}

// Events returns a run's whole timeline, paging through
// GET /v1/runs/{id}/events.
func (c *Client) Events(ctx context.Context, id string) ([]*store.Event, error) {
	const page = 1000
	var all []*store.Event
	var after uint64
	for {
		var evs []*store.Event
		path := fmt.Sprintf("/runs/%s/events?after=%d&limit=%d", url.PathEscape(id), after, page)
		if err := c.Do(ctx, "GET", path, nil, &evs); err != nil {
			return nil, err
		}
		all = append(all, evs...)
		if len(evs) < page {
			return all, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// Stats is GET /v1/stats: the four figures per task type and the counters.
func (c *Client) Stats(ctx context.Context) (engine.Stats, error) {
	var st engine.Stats
	err := c.Do(ctx, "GET", "/stats", nil, &st)
	return st, err
}

// Waits is GET /v1/runs/{id}/waits: the open human waits of the run and its
// descendants.
func (c *Client) Waits(ctx context.Context, id string) ([]engine.HumanWait, error) {
	var ws []engine.HumanWait
	err := c.Do(ctx, "GET", "/runs/"+url.PathEscape(id)+"/waits", nil, &ws)
	return ws, err
}

// Decide is POST /v1/runs/{id}/waits/{node}/approve (approve) or .../reject.
func (c *Client) Decide(ctx context.Context, id, node string, approve bool, payload json.RawMessage, reason string) error {
	verb := "reject"
	if approve {
		verb = "approve"
	}
	return c.Do(ctx, "POST", "/runs/"+url.PathEscape(id)+"/waits/"+url.PathEscape(node)+"/"+verb, api.DecideRequest{Payload: payload, Reason: reason}, nil)
}
