// Package tool holds the types of one tool call as both sides of it see
// them: the engine, which decides when to call, retry or give up, and the
// plugin host, which makes the call in a plugin process. Keeping them here
// lets the engine depend on these few types instead of on the host (and
// through it on go-plugin and gRPC), and lets tests stand a tool in for the
// host without starting a process. What a tool declares (its effect, cost,
// input schema, the chat contract) is flows.ToolInfo, the one description
// of a tool that registration and the engine both read; this package holds
// only what one call carries.
package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CallRequest is one tool call.
type CallRequest struct {
	// Tool is the full tool name, "plugin.tool".
	Tool string
	// Input is the JSON input; empty means {}.
	Input json.RawMessage
	// RunID, Node and Attempt identify the caller; the plugin sees them.
	// Attempt is 1 on a call's first try and grows with every later try
	// of the same logical call.
	RunID   string
	Node    string
	Attempt int
	// IdempotencyKey must be the same on every attempt of one logical call.
	IdempotencyKey string
	// Deadline of the call; zero means the caller's default. A deadline
	// on ctx applies too.
	Deadline time.Time
	// TraceParent is the call's W3C trace context, "" for none: the run's
	// trace, with the calling node visit's span as the parent
	// (telemetry.CallParent). A plugin of protocol revision 2 is given it.
	TraceParent string
	// TraceState is the caller's W3C tracestate that goes with it ("":
	// none).
	TraceState string
	// ModelAdmitted says the engine admitted this chat call against the
	// model's declared limits; a plugin of protocol revision 2 is told, so
	// it does not count the call against them a second time.
	ModelAdmitted bool
	// Progress, if set, receives the plugin's progress reports, in order,
	// from another goroutine, never after Call returns. Display only: a
	// plugin may drop reports under load; keep it cheap.
	Progress func(done, total int64)
	// Partials, if set, receives the pieces of the call's output as the
	// plugin makes them (a chat tool's text deltas), numbered from 1 (a gap
	// is a dropped piece), from another goroutine, never after Call
	// returns. Only a plugin of protocol revision 2 sends them, and only
	// when this is set. Display only: the result stays the whole output;
	// keep it cheap and never block in it.
	Partials func(seq uint64, delta []byte)
}

// CallResult is a successful call.
type CallResult struct {
	// Output is the tool's output, JSON.
	Output json.RawMessage
	// Cost is the actual cost if the tool reported one (CostReported),
	// else its declared cost.
	Cost         int64
	CostReported bool
}

// Kind is the stable name of a tool call failure. Kinds cross into run
// events and the CLI, so they never change meaning. The plugin protocol
// spells the same names (sdk/wire); the host's tests hold the two equal.
type Kind string

// The kinds of tool call failure.
const (
	// KindRetryable: the tool reported a failure that may go away; an
	// idempotent tool may be retried.
	KindRetryable Kind = "retryable"
	// KindPermanent: the tool reported a failure that retrying won't fix.
	KindPermanent Kind = "permanent"
	// KindSchema: the input does not match the tool's input schema (or is
	// not JSON); the plugin never saw the call.
	KindSchema Kind = "schema"
	// KindUnknownTool: no installed plugin provides the tool.
	KindUnknownTool Kind = "unknown_tool"
	// KindCrashed: the plugin process died or could not be started; the
	// outcome of the call is unknown. Retryable for an idempotent tool.
	KindCrashed Kind = "crashed"
	// KindDeadline: the call's deadline passed before it finished.
	KindDeadline Kind = "deadline"
	// KindTooLarge: the input or the answer exceeds the message limit.
	KindTooLarge Kind = "too_large"
	// KindCancelled: the caller cancelled the call, or the host closed.
	KindCancelled Kind = "cancelled"
	// KindProtocol: the plugin speaks another protocol version or broke
	// the protocol (bad manifest, output that is not JSON, ...).
	KindProtocol Kind = "protocol"
	// KindChecksum: the plugin binary is missing, not pinned, or no longer
	// matches its pinned SHA-256; it is not launched.
	KindChecksum Kind = "checksum"
	// KindUnknown (protocol revision 2): the tool sent the call on and
	// got no answer (its server's connection was lost mid-call), so the
	// effect may have happened. An idempotent tool is retried with the
	// same key; an at-most-once tool's call ends E_OUTCOME_UNKNOWN.
	KindUnknown Kind = "unknown"
	// KindNotSent (protocol revision 2): the call never reached what
	// performs it (its server was down, or refused the session before
	// reading the call), so nothing happened: it may be made again
	// whatever the tool's effect class.
	KindNotSent Kind = "not_sent"
)

// Error is a failed tool call.
type Error struct {
	Kind Kind
	// Tool is the tool called, or the plugin for failures before a tool
	// is known.
	Tool    string
	Message string
	// Code is the stable code the tool gave the failure (E_MODEL_RATE,
	// say; the plugin protocol checks its form), "" if none.
	Code string
	// RetryAfter is how long the tool asked the caller to wait before a
	// retry; zero means the caller's backoff decides.
	RetryAfter time.Duration
	// InputTokens and OutputTokens, for a chat tool's failed turn, are the
	// tokens the provider reported before it failed (0: none).
	InputTokens, OutputTokens int64
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Tool != "" {
		b.WriteString(e.Tool + ": ")
	}
	b.WriteString(string(e.Kind))
	if e.Code != "" {
		b.WriteString(": " + e.Code)
	}
	b.WriteString(": " + e.Message)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	return b.String()
}

// Retryable reports whether the same call may succeed if made again.
// Whether it may be made again is the caller's decision: KindNotSent may
// be retried for any tool, the other retryable kinds for an idempotent
// tool only.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindRetryable, KindCrashed, KindUnknown, KindNotSent:
		return true
	}
	return false
}

// KindOf returns the kind of an *Error in err's chain, or "".
func KindOf(err error) Kind {
	var te *Error
	if errors.As(err, &te) {
		return te.Kind
	}
	return ""
}

// IsRetryable reports whether err is an *Error that may go away on a
// retry (KindRetryable, KindCrashed, KindUnknown or KindNotSent). Whether
// to retry is the caller's decision: only idempotent tools are retried
// automatically, and any tool after KindNotSent.
func IsRetryable(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.Retryable()
}

// RetryAfterOf returns the wait an *Error in err's chain asked for, or 0.
func RetryAfterOf(err error) time.Duration {
	var te *Error
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	return 0
}
