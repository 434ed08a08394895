package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Version is the version of the SDK, reported in the plugin's manifest.
const Version = "0.1.0"

// Tool declares one tool and implements it.
type Tool struct {
	// Name is "plugin.tool": lower-case letters, digits, '_' or '-' on each
	// side of the dot. All tools served by one binary share the plugin part.
	Name string
	// Description says what the tool does, for flow authors.
	Description string
	// Idempotent declares that Run dedupes on Call.IdempotencyKey, so that
	// weir may retry the call. Leave it false for a tool whose effect must
	// happen at most once and that cannot dedupe: weir then serializes its
	// calls and never retries them automatically.
	Idempotent bool
	// InputSchema is a JSON schema (draft 2020-12 by default) of the input.
	// weir refuses input that does not match before the plugin sees it.
	// Empty accepts any JSON value.
	InputSchema string
	// OutputSchema is a JSON schema of the output, for documentation
	// (listed by `weir plugin ls`). Optional.
	OutputSchema string
	// Cost is the budget units one call consumes, as declared up front.
	// Run may report the actual cost by returning a Result.
	Cost int64
	// Run performs one call. ctx is cancelled when weir cancels the call
	// (run cancelled, deadline, shutdown). It returns a value encodable
	// as JSON (or a Result carrying one), or an error.
	Run func(ctx context.Context, call *Call) (any, error)
}

// Call is one invocation of a tool.
type Call struct {
	// Tool is the full tool name.
	Tool string
	// RunID and Node identify the flow run and the node making the call
	// (empty for `weir tool call`).
	RunID string
	Node  string
	// Attempt counts the attempts of this logical call, from 1.
	Attempt int
	// IdempotencyKey is the same on every attempt of one logical call.
	IdempotencyKey string
	// Deadline is when weir gives up on the call; ctx carries it too.
	Deadline time.Time
	// Input is the raw JSON input, already validated against InputSchema.
	Input json.RawMessage
	// StateDir is the plugin's private state directory
	// (DATA/plugin-state/NAME): keep dedupe records and durable state here.
	StateDir string
	// Config is the plugin's section of weir's configuration (JSON), or
	// nil when there is none.
	Config json.RawMessage

	progress func(done, total int64)
	logger   hclog.Logger
}

// Decode unmarshals the input into v. A decoding error is permanent.
func (c *Call) Decode(v any) error {
	if err := json.Unmarshal(c.Input, v); err != nil {
		return fmt.Errorf("decoding input of %s: %w", c.Tool, err)
	}
	return nil
}

// DecodeConfig unmarshals the plugin's configuration into v; it leaves v
// untouched when there is no configuration.
func (c *Call) DecodeConfig(v any) error {
	if len(c.Config) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.Config, v); err != nil {
		return fmt.Errorf("decoding plugin configuration: %w", err)
	}
	return nil
}

// Progress reports that done out of total units are finished (total 0 when
// unknown). It is for display only, cheap, and may be dropped when called
// more often than weir can show.
func (c *Call) Progress(done, total int64) {
	if c.progress != nil {
		c.progress(done, total)
	}
}

// Logger returns a logger whose lines weir records under the plugin's name.
func (c *Call) Logger() hclog.Logger {
	if c.logger == nil {
		return hclog.NewNullLogger()
	}
	return c.logger
}

// Result lets Run report the actual cost of a call next to its output.
type Result struct {
	// Output is the tool's output, encodable as JSON.
	Output any
	// Cost is the actual budget units the call consumed; it replaces the
	// declared Tool.Cost for this call.
	Cost int64
}

// Retryable marks err as retryable: the same call may succeed later.
// Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err: err}
}

// IsRetryable reports whether err was marked with Retryable.
func IsRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// progressThrottle coalesces progress reports: one per interval, except
// that the final one (done == total) always goes through.
type progressThrottle struct {
	mu       sync.Mutex
	last     time.Time
	interval time.Duration
	send     func(done, total int64)
}

func (p *progressThrottle) report(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if done != total && now.Sub(p.last) < p.interval {
		return
	}
	p.last = now
	p.send(done, total)
}
