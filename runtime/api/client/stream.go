package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"syscall"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// FlowSource reads a flow's latest version with its source files (GET
// /v1/flows/{name}).
func (c *Client) FlowSource(ctx context.Context, name string) (*apitypes.FlowSource, error) {
	return callOne[apitypes.FlowSource](ctx, c, http.MethodGet, "/flows/"+escape(name), nil)
}

// FlowVersions lists a flow name's versions, newest first, at most
// engine.MaxFlowVersions (GET /v1/flows/{name}/versions).
func (c *Client) FlowVersions(ctx context.Context, name string) ([]apitypes.FlowVersion, error) {
	return callList[apitypes.FlowVersion](ctx, c, http.MethodGet, "/flows/"+escape(name)+"/versions", nil)
}

// FlowSourceAt reads one version of a flow, by its hash, with its source
// files (GET /v1/flows/{name}/versions/{hash}).
func (c *Client) FlowSourceAt(ctx context.Context, name, hash string) (*apitypes.FlowSource, error) {
	return callOne[apitypes.FlowSource](ctx, c, http.MethodGet, "/flows/"+escape(name)+"/versions/"+escape(hash), nil)
}

// FlowGraphAt draws one version of a flow, by its hash, in format
// (mermaid, dot or svg; "" for mermaid).
func (c *Client) FlowGraphAt(ctx context.Context, name, hash, format string) (string, error) {
	return c.text(ctx, "/flows/"+escape(name)+"/versions/"+escape(hash)+"/graph", format)
}

// StreamMessage is one message of a run's stream: Run for
// apitypes.StreamRun, Event for apitypes.StreamEvent, Delta for
// apitypes.StreamTurnDelta, none for apitypes.StreamEnd. ID is the
// message's id ("" for none): where a stream given it as
// RunStreamOptions.After resumes.
type StreamMessage struct {
	Name  string
	ID    string
	Run   *apitypes.Run
	Event *apitypes.Event
	Delta *apitypes.TurnDelta
}

// RunStreamOptions says what a run's stream sends and from where.
type RunStreamOptions struct {
	// After is where the stream starts: an event seq ("" or "0": the
	// run's first event), or a message's ID.
	After string
	// Deltas asks for the run's model turns' text as it streams
	// (apitypes.StreamTurnDelta); Node, if set, for that node's only.
	Deltas bool
	Node   string
}

// MaxStreamMessage bounds one message of a stream the client reads.
const MaxStreamMessage = 16 << 20

// RunStream follows a run (GET /v1/runs/{id}/stream): fn gets its events
// after seq after and the run each time it changes, until the run ends
// (the last message is apitypes.StreamEnd; RunStream then returns nil), fn
// returns an error, ctx ends, or the server closes the stream after
// apitypes.MaxStreamDuration — then RunStream connects again from the last
// event it saw.
func (c *Client) RunStream(ctx context.Context, id string, after uint64, fn func(StreamMessage) error) error {
	return c.RunStreamWith(ctx, id, RunStreamOptions{After: strconv.FormatUint(after, 10)}, fn)
}

// RunStreamWith is RunStream with options: with Deltas, fn also gets the
// run's model turns' text as it streams, and a stream connected again
// resumes a turn's text where it was (the last message's ID).
func (c *Client) RunStreamWith(ctx context.Context, id string, o RunStreamOptions, fn func(StreamMessage) error) error {
	for {
		ended, err := c.runStreamOnce(ctx, id, &o, fn)
		if err != nil || ended {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (c *Client) runStreamOnce(ctx context.Context, id string, o *RunStreamOptions, fn func(StreamMessage) error) (bool, error) {
	q := url.Values{"after": {orZero(o.After)}}
	if o.Deltas {
		q.Set("deltas", "1")
	}
	if o.Node != "" {
		q.Set("node", o.Node)
	}
	path := "/runs/" + escape(id) + "/stream?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/"+apitypes.Version+path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("%w on %s: %w", ErrNoDaemon, c.addr, err)
		}
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, errorOf(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), MaxStreamMessage)
	var name, msgID string
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if name == "" {
				continue
			}
			m := StreamMessage{Name: name, ID: msgID}
			switch name {
			case apitypes.StreamRun:
				m.Run = new(apitypes.Run)
				if err := json.Unmarshal(data, m.Run); err != nil {
					return false, fmt.Errorf("stream of %s: %w", id, err)
				}
			case apitypes.StreamEvent:
				m.Event = new(apitypes.Event)
				if err := json.Unmarshal(data, m.Event); err != nil {
					return false, fmt.Errorf("stream of %s: %w", id, err)
				}
			case apitypes.StreamTurnDelta:
				m.Delta = new(apitypes.TurnDelta)
				if err := json.Unmarshal(data, m.Delta); err != nil {
					return false, fmt.Errorf("stream of %s: %w", id, err)
				}
			}
			if msgID != "" {
				o.After = msgID
			}
			if err := fn(m); err != nil {
				return false, err
			}
			if name == apitypes.StreamEnd {
				return true, nil
			}
			name, msgID, data = "", "", nil
		case bytes.HasPrefix(line, []byte("id: ")):
			msgID = string(line[len("id: "):])
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data[:0], line[len("data: "):]...)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return false, fmt.Errorf("stream of %s: %w", id, err)
	}
	return false, nil
}

func orZero(after string) string {
	if after == "" {
		return "0"
	}
	return after
}
