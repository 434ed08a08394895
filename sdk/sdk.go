package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weirhq/weir/sdk/wire"
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
	// Effect is the tool's effect class: EffectRead, EffectIdempotent or
	// EffectAtMostOnce (see Effect). Unset, Idempotent says: idempotent
	// when true, at most once when false, as before effect classes.
	Effect Effect
	// Idempotent declares that Run dedupes on Call.IdempotencyKey, so that
	// weir may retry the call. It is the older form of Effect: leave it
	// false for a tool whose effect must happen at most once and that
	// cannot dedupe (weir then serializes its calls and never retries them
	// automatically). Set with Effect, it must agree: true with
	// EffectAtMostOnce is refused by Serve.
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
	// Contract names the contract the tool speaks, such as chat.Contract
	// ("weir.chat/v1"); empty: none. Optional.
	Contract string
	// Timeout is the deadline of a call whose flow node sets no timeout
	// (0: weir's default, five minutes for a node). Declare it for a tool
	// whose calls are quick when healthy, so that a stuck call ends early
	// for every caller; at most an hour (wire.MaxToolTimeout). Weir
	// honours it from plugin protocol revision 2 on. Optional.
	Timeout time.Duration
	// Models lists the models a chat tool serves, with their limits and
	// prices, so that registration checks a flow's model alias and the
	// engine reserves a turn at its price. Optional.
	Models []Model
	// Run performs one call. ctx is cancelled when weir cancels the call
	// (run cancelled, deadline, shutdown). It returns a value encodable
	// as JSON (or a Result carrying one), or an error.
	Run func(ctx context.Context, call *Call) (any, error)
	// Reconcile is the tool's reconcile probe, optional: asked by weir
	// when the outcome of a call is unknown (weir crashed, or the plugin,
	// after the call was sent and before its answer was recorded), it
	// tells whether the call made with call.IdempotencyKey and call.Input
	// happened. It must have no effect of its own and may be asked more
	// than once; ctx carries weir's deadline for the answer. Only
	// call.Tool, IdempotencyKey, Input, Deadline, StateDir and Config are
	// set. An error or a panic counts as ReconcileUnknown. Not for a tool
	// of EffectRead, which has no effect to tell.
	Reconcile func(ctx context.Context, call *Call) (ReconcileAnswer, error)

	// declErr is the mistake NewTool found in the declaration, reported
	// by CheckTools.
	declErr error
}

// Effect is a tool's effect class: what repeating one of its calls does.
// weir reads it to decide what it may retry after a failure or a crash,
// what a fork or a replay may run again, and what an agent's approval
// policy must stop for.
type Effect string

// The effect classes.
const (
	// EffectRead: the tool has no side effect (it reads a file, fetches a
	// page, asks a model). weir may repeat its calls freely, and a fork
	// or a replay may run them again.
	EffectRead Effect = "read"
	// EffectIdempotent: the tool has an effect but dedupes on
	// Call.IdempotencyKey, so weir may retry a call with the same key.
	EffectIdempotent Effect = "idempotent"
	// EffectAtMostOnce: the effect must happen at most once and the tool
	// cannot dedupe (a mail sent, a payment made). weir records the call
	// as started, serializes the tool's calls and never makes one again
	// blindly; a Reconcile probe lets it find out what happened.
	EffectAtMostOnce Effect = "at_most_once"
)

// Class is the tool's effect class as Serve declares it: Effect, or, when
// unset, idempotent or at most once as Idempotent says. A declaration
// CheckTools refuses has no class: Class is then "".
func (t Tool) Class() Effect {
	c, err := t.class()
	if err != nil {
		return ""
	}
	return c
}

// class resolves the effect class, refusing an unknown one and one that
// Idempotent contradicts.
func (t Tool) class() (Effect, error) {
	switch t.Effect {
	case "":
		if t.Idempotent {
			return EffectIdempotent, nil
		}
		return EffectAtMostOnce, nil
	case EffectRead, EffectIdempotent:
		return t.Effect, nil
	case EffectAtMostOnce:
		if t.Idempotent {
			return "", errors.New("Effect is EffectAtMostOnce but Idempotent is true: a tool that dedupes is EffectIdempotent; drop one of the two")
		}
		return t.Effect, nil
	}
	return "", fmt.Errorf("Effect %q is not one of %q, %q and %q", t.Effect, EffectRead, EffectIdempotent, EffectAtMostOnce)
}

// Reconciled is a reconcile probe's answer (see Tool.Reconcile).
type Reconciled string

// The answers of a reconcile probe.
const (
	// ReconcileHappened: the call had its effect. weir takes
	// ReconcileAnswer.Output as its result (the journaled one if it has
	// it) and never makes the call again.
	ReconcileHappened Reconciled = "happened"
	// ReconcileNotHappened: the call had no effect, and will not have it
	// later: weir may make it once more (still at most once).
	ReconcileNotHappened Reconciled = "not_happened"
	// ReconcileUnknown: the tool cannot tell; weir treats the outcome as
	// unknown (the node's error wire, or a person decides).
	ReconcileUnknown Reconciled = "unknown"
)

// ReconcileAnswer is what a reconcile probe answers.
type ReconcileAnswer struct {
	// Outcome is ReconcileHappened, ReconcileNotHappened or
	// ReconcileUnknown; anything else is refused as an error.
	Outcome Reconciled
	// Output, for ReconcileHappened, is the call's result as Run would
	// have returned it (a value encodable as JSON, or a Result), when the
	// tool still knows it; nil when it does not. Ignored for the others.
	Output any
}

// Model is one model a chat tool serves.
type Model struct {
	// Alias is the name flows use (model = "small").
	Alias string
	// MaxTokens is the most output tokens one turn may ask for (0: unsaid).
	MaxTokens int64
	// InputCost and OutputCost are budget units per million tokens.
	InputCost  int64
	OutputCost int64
	// MaxConcurrent, RequestsPerMinute and TokensPerMinute are the
	// provider's limits for the model (0: none). weir admits each turn
	// against them before it calls (Call.ModelAdmitted), so turns over
	// the limits wait in weir's queue holding no worker slot.
	MaxConcurrent, RequestsPerMinute, TokensPerMinute int64
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
	// TraceParent is the W3C traceparent of the call, "" for none: weir's
	// trace of the run, with the calling node's span as the parent. Pass
	// it on (an HTTP "traceparent" header, an MCP request's _meta), or
	// start spans under it, and they join the run's trace
	// (docs/plugins.md, "Joining the run's trace").
	TraceParent string
	// TraceState is the W3C tracestate that goes with TraceParent (the
	// run's caller's), "" for none.
	TraceState string
	// ModelAdmitted says weir admitted this call against the model's
	// declared limits (Model.MaxConcurrent and the rest): a chat tool
	// need not count it against them again. False for a call weir did
	// not admit so (`weir tool call`, an older host).
	ModelAdmitted bool

	progress func(done, total int64)
	partial  func(delta string)
	logger   *slog.Logger
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

// Partial shows the next piece of the call's output as it comes — for a
// chat tool, the text of the tokens the provider streamed since the last
// piece — to whoever watches the call (`weir run watch RUN --tokens`). It
// is display only: the output Run returns stays the whole answer, a piece
// may be dropped rather than slow the tool (the pieces are numbered, so a
// watcher sees the gap), and it does nothing unless weir asked for the
// call's pieces, which it does only while someone watches. An empty delta
// is not sent.
func (c *Call) Partial(delta string) {
	if c.partial != nil && delta != "" {
		c.partial(delta)
	}
}

// Logger returns a logger whose records weir keeps in its own log under
// the plugin's name, at their level, with their attributes and the tool's
// name as "tool". Serve writes them as slog JSON lines to the plugin's
// stderr, and weir's plugin host reads those lines back (see the package
// doc); the level is weir's plugin log level (WEIR_PLUGIN_LOG_LEVEL). Under
// sdktest it discards.
func (c *Call) Logger() *slog.Logger {
	if c.logger == nil {
		return slog.New(slog.DiscardHandler)
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

// The kinds of failure a tool reports, in Error.Kind. A call cancelled by
// weir is reported as cancelled by itself (see Tool.Run): there is no kind
// to set for it.
const (
	// KindPermanent: retrying the same call will not help. A plain error,
	// and an Error with an empty or unknown Kind, are permanent.
	KindPermanent = wire.KindPermanent
	// KindRetryable: the same call may succeed later; weir retries it if
	// the tool is Idempotent and the flow allows retries.
	KindRetryable = wire.KindRetryable
	// KindUnknown: the tool passed the call on (to a server, say) and lost
	// it without an answer, so its effect may have happened. weir retries
	// an Idempotent tool (with the same key); another tool's call ends as
	// an unknown outcome, never made again.
	KindUnknown = wire.KindUnknown
	// KindNotSent: the call never reached what performs it (its server
	// was down, or refused the connection before reading the call), so
	// nothing happened: weir retries it, within the flow's retries,
	// whether or not the tool is Idempotent.
	KindNotSent = wire.KindNotSent
)

// Error is a failure with more to say than its message: whether the call
// may be retried, a stable code a flow can branch on, and how long to wait
// before retrying. Return one from Run, or build one with the helpers
// Retryable, WithCode and RetryAfter, which keep what an inner Error said:
//
//	return nil, sdk.RetryAfter(sdk.WithCode(err, "E_MODEL_RATE"), 20*time.Second)
//
// weir finds the Error with errors.As, so wrapping it with fmt.Errorf and %w
// keeps it; the message weir records is that of the whole error returned.
type Error struct {
	// Kind is KindRetryable, KindPermanent, KindUnknown or KindNotSent;
	// anything else is permanent.
	Kind string
	// Code names the failure for callers: upper-case letters, digits and
	// '_', starting with a letter, at most 64 bytes ("E_MODEL_RATE"). A
	// malformed code turns the error into a permanent one that says so.
	// Empty: none.
	Code string
	// Message describes the failure; empty means Err's message.
	Message string
	// RetryAfter, for KindRetryable, is the earliest a retry is worth it
	// (say, a provider's Retry-After). It is capped at an hour, ignored
	// when not positive or on another kind; weir's backoff applies when
	// it is zero.
	RetryAfter time.Duration
	// InputTokens and OutputTokens, for a chat tool's failed turn, are the
	// tokens the provider reported before it failed (billed, though no
	// answer came): weir shows them as the waste of retried turns. 0:
	// none reported.
	InputTokens, OutputTokens int64
	// Err is the underlying error, for errors.Is and errors.As. Optional.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Message != "":
		return e.Message
	case e.Err != nil:
		return e.Err.Error()
	case e.Code != "":
		return e.Code
	}
	return "tool error"
}

func (e *Error) Unwrap() error { return e.Err }

// annotate wraps err in an Error that starts from what the outermost Error
// in err's chain already says, then applies set. annotate(nil) is nil.
func annotate(err error, set func(*Error)) error {
	if err == nil {
		return nil
	}
	e := &Error{Err: err}
	var inner *Error
	if errors.As(err, &inner) {
		e.Kind, e.Code, e.RetryAfter = inner.Kind, inner.Code, inner.RetryAfter
	}
	set(e)
	return e
}

// Retryable marks err as retryable: the same call may succeed later.
// Retryable(nil) is nil.
func Retryable(err error) error {
	return annotate(err, func(e *Error) { e.Kind = KindRetryable })
}

// Unknown marks err as an unknown outcome (KindUnknown): the call was sent
// on and no answer came back. Unknown(nil) is nil.
func Unknown(err error) error {
	return annotate(err, func(e *Error) { e.Kind, e.RetryAfter = KindUnknown, 0 })
}

// NotSent marks err as a call that was never sent on (KindNotSent).
// NotSent(nil) is nil.
func NotSent(err error) error {
	return annotate(err, func(e *Error) { e.Kind, e.RetryAfter = KindNotSent, 0 })
}

// WithCode gives err a stable code (see Error.Code), keeping its kind.
// WithCode(nil, code) is nil.
func WithCode(err error, code string) error {
	return annotate(err, func(e *Error) { e.Code = code })
}

// RetryAfter marks err as retryable no sooner than d from now (see
// Error.RetryAfter). RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	return annotate(err, func(e *Error) { e.Kind, e.RetryAfter = KindRetryable, d })
}

// IsRetryable reports whether err was marked retryable (Retryable,
// RetryAfter, or an Error of KindRetryable in its chain).
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindRetryable
}

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
