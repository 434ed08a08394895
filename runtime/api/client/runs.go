package client

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// checkRequestID refuses a request id that is not valid UTF-8 as the
// daemon would: json.Marshal would send U+FFFD for each bad byte, and two
// ids would become one.
func checkRequestID(id string) error {
	if !utf8.ValidString(id) {
		return &Error{Code: apitypes.CodeBadRequestID, Class: apitypes.ClassProtocol, Message: "request id is not valid UTF-8"}
	}
	return nil
}

// RunStart starts a run (POST /v1/runs). With a request id, sending the
// same start again returns the same run (res.Existing), so a start whose
// answer was lost can be sent again safely.
func (c *Client) RunStart(ctx context.Context, req apitypes.StartRequest) (*apitypes.StartResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return nil, err
	}
	return callOne[apitypes.StartResult](ctx, c, http.MethodPost, "/runs", req)
}

// RunGet reads a run with its progress (GET /v1/runs/{id}). Another
// owner's run answers apitypes.CodeNotFound, as a missing one does.
func (c *Client) RunGet(ctx context.Context, id string) (*apitypes.Run, error) {
	return callOne[apitypes.Run](ctx, c, http.MethodGet, "/runs/"+escape(id), nil)
}

// RunByRequestID finds the caller's run that a start with requestID
// created (GET /v1/runs?request_id=), without its progress. A request id
// the caller started no run with answers apitypes.CodeNotFound, as a
// missing run id does (with HTTPStatus 200: the daemon answered an empty
// list): another owner's run with the same request id is never found.
func (c *Client) RunByRequestID(ctx context.Context, requestID string) (*apitypes.Run, error) {
	var vs []apitypes.Run
	if err := c.call(ctx, http.MethodGet, "/runs?"+url.Values{"request_id": {requestID}}.Encode(), nil, &vs); err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, &Error{Code: apitypes.CodeNotFound, Class: apitypes.ClassProtocol, HTTPStatus: http.StatusOK,
			Message: "no run with request id " + strconv.Quote(requestID)}
	}
	return &vs[0], nil
}

// RunListParams selects one page of the caller's runs.
type RunListParams struct {
	// Phase keeps runs in this phase only ("" for all).
	Phase apitypes.Phase
	// Flow keeps runs of this flow only ("" for all).
	Flow string
	// Parent keeps the children of this run only: the runs its subflows,
	// fan-outs and agents started ("" for all).
	Parent string
	// Newest lists newest first (by creation time) instead of in run id
	// order, which is random in time.
	Newest bool
	// After starts the page after this run id (the last id of the
	// previous page) in id order; Before does the same in newest-first
	// order.
	After  string
	Before string
	// Limit is the page size, at most apitypes.MaxListLimit; 0 leaves it
	// to the daemon (100).
	Limit int
}

func (p RunListParams) query() string {
	q := url.Values{}
	if p.Phase != "" {
		q.Set("phase", string(p.Phase))
	}
	if p.Flow != "" {
		q.Set("flow", p.Flow)
	}
	if p.Parent != "" {
		q.Set("parent", p.Parent)
	}
	if p.Newest {
		q.Set("order", "created")
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.Before != "" {
		q.Set("before", p.Before)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return queryString(q)
}

// RunList lists one page of the caller's runs in id order, or newest
// first (p.Newest) (GET /v1/runs), without their progress.
func (c *Client) RunList(ctx context.Context, p RunListParams) ([]apitypes.Run, error) {
	return callList[apitypes.Run](ctx, c, http.MethodGet, "/runs"+p.query(), nil)
}

// RunListAll yields every run of the caller that p selects, reading
// GET /v1/runs a page at a time as the loop goes (p.Limit is the page
// size, apitypes.MaxListLimit if 0). A failed page ends the sequence with
// its error.
func (c *Client) RunListAll(ctx context.Context, p RunListParams) iter.Seq2[apitypes.Run, error] {
	if p.Limit == 0 {
		p.Limit = apitypes.MaxListLimit
	}
	return func(yield func(apitypes.Run, error) bool) {
		for {
			vs, err := c.RunList(ctx, p)
			if err != nil {
				yield(apitypes.Run{}, err)
				return
			}
			for _, v := range vs {
				if !yield(v, nil) {
					return
				}
			}
			if len(vs) < p.Limit {
				return
			}
			if p.Newest {
				p.Before = vs[len(vs)-1].ID
			} else {
				p.After = vs[len(vs)-1].ID
			}
		}
	}
}

// RunCancel asks for a run to stop (POST /v1/runs/{id}/cancel) and says
// whether it will: requested, too_late (its finish was decided) or
// already_terminal.
func (c *Client) RunCancel(ctx context.Context, id string) (apitypes.CancelAnswer, error) {
	var res apitypes.CancelResponse
	if err := c.call(ctx, http.MethodPost, "/runs/"+escape(id)+"/cancel", nil, &res); err != nil {
		return "", err
	}
	return res.Answer, nil
}

// EventListParams selects one page of a timeline.
type EventListParams struct {
	// After starts the page after this sequence number (0: from the
	// start).
	After uint64
	// Limit is the page size, at most apitypes.MaxEventLimit; 0 leaves it
	// to the daemon (1000).
	Limit int
}

func (p EventListParams) query() string {
	q := url.Values{}
	if p.After != 0 {
		q.Set("after", strconv.FormatUint(p.After, 10))
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return queryString(q)
}

// RunEvents lists one page of a run's timeline (GET /v1/runs/{id}/events).
func (c *Client) RunEvents(ctx context.Context, id string, p EventListParams) ([]apitypes.Event, error) {
	return callList[apitypes.Event](ctx, c, http.MethodGet, "/runs/"+escape(id)+"/events"+p.query(), nil)
}

// RunEventsAll yields a run's timeline from p.After on, reading GET
// /v1/runs/{id}/events a page at a time as the loop goes (p.Limit is the
// page size, apitypes.MaxEventLimit if 0). A failed page ends the
// sequence with its error.
func (c *Client) RunEventsAll(ctx context.Context, id string, p EventListParams) iter.Seq2[apitypes.Event, error] {
	if p.Limit == 0 {
		p.Limit = apitypes.MaxEventLimit
	}
	return func(yield func(apitypes.Event, error) bool) {
		for {
			evs, err := c.RunEvents(ctx, id, p)
			if err != nil {
				yield(apitypes.Event{}, err)
				return
			}
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
			if len(evs) < p.Limit {
				return
			}
			p.After = evs[len(evs)-1].Seq
		}
	}
}

// RunWaits lists the open human waits of a run and its descendants (GET
// /v1/runs/{id}/waits): what a person must decide for the run to go on.
func (c *Client) RunWaits(ctx context.Context, id string) ([]apitypes.HumanWait, error) {
	return callList[apitypes.HumanWait](ctx, c, http.MethodGet, "/runs/"+escape(id)+"/waits", nil)
}

// RunApprove approves the wait at node of run id; payload (nil: none)
// becomes the node's result. A wait decided before answers
// apitypes.CodeAlreadyDecided; a node the run is not waiting at,
// apitypes.CodeNotWaiting.
func (c *Client) RunApprove(ctx context.Context, id, node string, payload json.RawMessage) (*apitypes.DecideResponse, error) {
	return c.decide(ctx, id, node, "approve", apitypes.DecideRequest{Payload: payload})
}

// RunReject rejects the wait at node of run id: the run takes the node's
// error wire, and reason is recorded in its events.
func (c *Client) RunReject(ctx context.Context, id, node, reason string) (*apitypes.DecideResponse, error) {
	return c.decide(ctx, id, node, "reject", apitypes.DecideRequest{Reason: reason})
}

// RunEdit approves the agent's proposed call at wait of run id with
// edited arguments args in place of the proposed ones; digest, if set,
// names the proposal the decider saw. Arguments the tool's input schema
// refuses answer apitypes.CodeBadInput and the wait stays open; another
// proposal than digest, apitypes.CodeStaleDecision.
func (c *Client) RunEdit(ctx context.Context, id, wait string, args json.RawMessage, digest string) (*apitypes.DecideResponse, error) {
	return c.decide(ctx, id, wait, "approve", apitypes.DecideRequest{Payload: args, Digest: digest})
}

// RunRespond answers the agent's proposed call at wait of run id in the
// tool's place: result (nil: JSON null) is the call's result and the
// tool never runs; digest, if set, names the proposal the decider saw. A
// result the tool's output schema refuses answers apitypes.CodeBadResult
// and the wait stays open.
func (c *Client) RunRespond(ctx context.Context, id, wait string, result json.RawMessage, digest string) (*apitypes.DecideResponse, error) {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	return c.decide(ctx, id, wait, "approve", apitypes.DecideRequest{Result: result, Digest: digest})
}

// RunDecide approves (approve) or rejects the wait at node of run id with
// the whole request: the payload or reason, and the digest of the
// proposal an agent's approval showed the decider.
func (c *Client) RunDecide(ctx context.Context, id, node string, approve bool, req apitypes.DecideRequest) (*apitypes.DecideResponse, error) {
	verb := "reject"
	if approve {
		verb = "approve"
	}
	return c.decide(ctx, id, node, verb, req)
}

func (c *Client) decide(ctx context.Context, id, node, verb string, req apitypes.DecideRequest) (*apitypes.DecideResponse, error) {
	return callOne[apitypes.DecideResponse](ctx, c, http.MethodPost, "/runs/"+escape(id)+"/waits/"+escape(node)+"/"+verb, req)
}

// Graph formats RunGraph and FlowGraph draw in.
const (
	FormatMermaid = "mermaid"
	FormatDot     = "dot"
	FormatSVG     = "svg"
)

// RunGraph draws the run's flow marked with what the run did (GET
// /v1/runs/{id}/graph), in format (FormatMermaid if "").
func (c *Client) RunGraph(ctx context.Context, id, format string) (string, error) {
	return c.text(ctx, "/runs/"+escape(id)+"/graph", format)
}

func (c *Client) text(ctx context.Context, path, format string) (string, error) {
	if format != "" {
		path += "?" + url.Values{"format": {format}}.Encode()
	}
	_, data, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// DefaultPoll is how often RunWait reads a run for its Seen function
// unless told otherwise.
const DefaultPoll = 50 * time.Millisecond

// RunWaitParams says what RunWait waits for.
type RunWaitParams struct {
	// Until is the phase to wait for; "" waits for any terminal phase.
	Until apitypes.Phase
	// Poll, when Seen is set, is the longest time between two reads
	// (DefaultPoll if 0). Without Seen each read is held by the daemon
	// until the run is in Until or terminal (at most apitypes.MaxRunWait).
	Poll time.Duration
	// Seen, if set, is called with every read of the run, e.g. to show its
	// progress.
	Seen func(*apitypes.Run)
}

// RunWait holds GET /v1/runs/{id}?wait= until the run is in phase
// p.Until, or in a terminal phase (from which it never leaves), and
// returns it: compare its Phase with p.Until to tell the two apart. The
// daemon answers as soon as the run gets there, without the client
// polling. Bound the wait with ctx; when ctx ends first, RunWait returns
// the last read of the run (nil if none) and ctx's error.
func (c *Client) RunWait(ctx context.Context, id string, p RunWaitParams) (*apitypes.Run, error) {
	if p.Poll <= 0 {
		p.Poll = DefaultPoll
	}
	var last *apitypes.Run
	for {
		hold := apitypes.MaxRunWait
		if p.Seen != nil {
			hold = min(p.Poll, hold)
		}
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 && last != nil {
				return last, context.DeadlineExceeded
			}
			// Past the deadline before the first answer (a slow start):
			// one short hold still answers the run as it is.
			hold = max(min(left, hold), time.Millisecond)
		}
		q := url.Values{"wait": {hold.Round(time.Millisecond).String()}}
		if p.Until != "" {
			q.Set("until", string(p.Until))
		}
		var v apitypes.Run
		err := c.hold(ctx, "/runs/"+escape(id)+"?"+q.Encode(), hold, &v)
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		last = &v
		if p.Seen != nil {
			p.Seen(last)
		}
		if v.Phase == p.Until || v.Phase.Terminal() {
			return last, nil
		}
		if err := ctx.Err(); err != nil {
			return last, err
		}
	}
}

// RunWaitUntil holds GET /v1/runs/{id}/wait until the condition until
// holds: apitypes.UntilTerminal ("" too), a phase, apitypes.UntilDecision
// (any open decision of the run or its descendants) or
// apitypes.UntilDecision + ":" + a wait id or a node. It asks again while
// the run goes on, and returns once the condition holds (Met) or the run
// ended without it (not Met). Bound the wait with ctx; when ctx ends
// first, RunWaitUntil returns the last answer (nil if none) and ctx's
// error.
func (c *Client) RunWaitUntil(ctx context.Context, id, until string) (*apitypes.RunWaitResult, error) {
	var last *apitypes.RunWaitResult
	for {
		q := url.Values{}
		if until != "" {
			q.Set("until", until)
		}
		hold := apitypes.MaxRunWait
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 && last != nil {
				return last, context.DeadlineExceeded
			}
			// Past the deadline before the first answer (a slow start):
			// one short hold still answers the run as it is.
			hold = max(min(left, apitypes.MaxRunWait), time.Millisecond)
		}
		q.Set("timeout", hold.Round(time.Millisecond).String())
		res := &apitypes.RunWaitResult{}
		err := c.hold(ctx, "/runs/"+escape(id)+"/wait?"+q.Encode(), hold, res)
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		last = res
		if res.Met || (res.Run != nil && res.Run.Phase.Terminal()) {
			return last, nil
		}
		if err := ctx.Err(); err != nil {
			return last, err
		}
	}
}

// waitAnswerSlack is how long past its hold a held wait's answer may take
// to arrive before the client gives up on it.
const waitAnswerSlack = 30 * time.Second

// hold sends one held read into out. The daemon answers when the hold
// ends, so ctx's deadline does not cut the request short (its answer, the
// run as it is, is what the caller returns); a cancel of ctx does.
func (c *Client) hold(ctx context.Context, path string, hold time.Duration, out any) error {
	reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hold+waitAnswerSlack)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	defer stop()
	return c.call(reqCtx, http.MethodGet, path, nil, out)
}

// Collect gathers one of the client's paging sequences (RunListAll,
// RunEventsAll) into a slice, stopping at its first error.
func Collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}
