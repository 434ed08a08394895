// Package sdktest runs a tool in-process, the way weir runs it through a
// plugin: the input is validated against the declared schema first, the
// output is encoded as JSON, and errors come back with the kind weir would
// see. Reconcile asks a tool's reconcile probe the same way. A vendor
// unit-tests a tool with it without building a binary; the whole loop
// through a real process is `weir tool call`.
package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/wire"
)

// Request is one call to make.
type Request struct {
	// Input is the JSON input; empty means {}.
	Input string
	// RunID and Node identify the caller; both optional.
	RunID string
	Node  string
	// Attempt defaults to 1.
	Attempt int
	// IdempotencyKey defaults to a fresh key per call, as a new logical
	// call would get. Set it to test dedupe across attempts.
	IdempotencyKey string
	// Deadline, if set, is the call's deadline (ctx carries it too).
	Deadline time.Time
	// StateDir is the plugin's state directory; use t.TempDir().
	StateDir string
	// Config is the plugin's configuration, JSON; empty means none.
	Config string
	// OnProgress, if set, receives each progress report as the tool makes
	// it, from the tool's goroutine and never after Call returns: for a
	// test that watches a call while it runs. Result.Progress holds every
	// report either way.
	OnProgress func(done, total int64)
	// OnPartial, if set, receives each partial result (Call.Partial) as
	// the tool makes it, in the same way. The call is made as if someone
	// watched it, so Partial is never a no-op here; Result.Partials holds
	// every piece either way.
	OnPartial func(delta string)
}

// Result is a successful call.
type Result struct {
	// Output is the tool's output as JSON.
	Output json.RawMessage
	// Cost is the actual cost if the tool reported one, else the declared
	// Tool.Cost; CostReported tells which.
	Cost         int64
	CostReported bool
	// Progress holds every progress report, in order.
	Progress []Progress
	// Partials holds every partial result, in order: for a chat tool, its
	// text deltas, which should add up to its answer's text.
	Partials []string
}

// Progress is one progress report.
type Progress struct{ Done, Total int64 }

// Error kinds, as weir's plugin host reports them.
const (
	KindSchema    = wire.KindSchema
	KindRetryable = wire.KindRetryable
	KindPermanent = wire.KindPermanent
	KindCancelled = wire.KindCancelled
	KindUnknown   = wire.KindUnknown
	KindNotSent   = wire.KindNotSent
)

// Error is a failed call.
type Error struct {
	// Kind is KindSchema (input refused before Run), KindRetryable,
	// KindPermanent, KindCancelled, KindUnknown or KindNotSent.
	Kind    string
	Message string
	// Code is the error's stable code (sdk.WithCode), "" if none.
	Code string
	// RetryAfter is the tool's retry hint (sdk.RetryAfter), as weir would
	// receive it: capped, and zero unless Kind is KindRetryable.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s: %s: %s", e.Kind, e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

// Retryable reports whether weir would retry the call (for an idempotent
// tool; after KindNotSent, for any tool).
func (e *Error) Retryable() bool {
	return e.Kind == KindRetryable || e.Kind == KindUnknown || e.Kind == KindNotSent
}

var keySeq atomic.Int64

// Call runs tool once with req. A mistake in the tool's declaration is
// returned as a plain error; a failed call as an *Error.
func Call(ctx context.Context, tool sdk.Tool, req Request) (*Result, error) {
	if err := sdk.CheckTools(tool); err != nil {
		return nil, err
	}
	input := req.Input
	if input == "" {
		input = "{}"
	}
	schema, err := wire.CompileSchema(tool.InputSchema)
	if err != nil {
		return nil, err
	}
	if err := schema.Validate([]byte(input)); err != nil {
		return nil, &Error{Kind: KindSchema, Message: err.Error()}
	}
	if req.Config != "" && !json.Valid([]byte(req.Config)) {
		return nil, fmt.Errorf("sdktest: Config is not JSON")
	}
	call := &sdk.Call{
		Tool:           tool.Name,
		RunID:          req.RunID,
		Node:           req.Node,
		Attempt:        req.Attempt,
		IdempotencyKey: req.IdempotencyKey,
		Deadline:       req.Deadline,
		Input:          json.RawMessage(input),
		StateDir:       req.StateDir,
	}
	if call.Attempt == 0 {
		call.Attempt = 1
	}
	if call.IdempotencyKey == "" {
		call.IdempotencyKey = fmt.Sprintf("sdktest-%d-%d", time.Now().UnixNano(), keySeq.Add(1))
	}
	ctx, cancel := configure(ctx, call, req.Config, req.Deadline)
	defer cancel()
	var (
		mu       sync.Mutex
		progress []Progress
		partials []string
		returned bool
	)
	res := sdk.InvokeWatched(ctx, tool, call, func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			return // a goroutine of the tool outlived its call
		}
		progress = append(progress, Progress{done, total})
		if req.OnProgress != nil {
			req.OnProgress(done, total) // under mu: in order, never after Call returns
		}
	}, func(delta string) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			return
		}
		partials = append(partials, delta)
		if req.OnPartial != nil {
			req.OnPartial(delta)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	returned = true
	if e := res.GetError(); e != nil {
		return nil, &Error{Kind: e.GetKind(), Message: e.GetMessage(), Code: e.GetCode(), RetryAfter: e.GetRetryAfter().AsDuration()}
	}
	out := &Result{Output: res.GetOutput(), Cost: tool.Cost, Progress: progress, Partials: partials}
	if res.GetHasCost() {
		out.Cost, out.CostReported = res.GetCost(), true
	}
	return out, nil
}

// ReconcileRequest is one question to a tool's reconcile probe: did the
// call made with IdempotencyKey and Input happen?
type ReconcileRequest struct {
	// Input is the call's JSON input; empty means {}.
	Input string
	// IdempotencyKey is the call's key. Required: a probe is always asked
	// about one logical call.
	IdempotencyKey string
	// Deadline, if set, bounds the probe (weir always gives one; without
	// it the SDK's own bound of a minute applies).
	Deadline time.Time
	// StateDir is the plugin's state directory: the one the calls being
	// asked about were made with.
	StateDir string
	// Config is the plugin's configuration, JSON; empty means none.
	Config string
}

// Reconciled is a probe's answer, as weir's plugin host reads it.
type Reconciled struct {
	// Outcome is sdk.ReconcileHappened, ReconcileNotHappened or
	// ReconcileUnknown.
	Outcome sdk.Reconciled
	// Output is the call's result for a happened call, as JSON; nil when
	// the probe did not give one.
	Output json.RawMessage
}

// ReconcileError is a probe that failed: weir counts it as unknown.
type ReconcileError struct {
	// Code is the gRPC code the plugin answers with: Unimplemented (no
	// probe), DeadlineExceeded or Canceled, or Internal (the probe failed,
	// panicked, or answered no valid outcome).
	Code    string
	Message string
}

func (e *ReconcileError) Error() string { return e.Code + ": " + e.Message }

// Reconcile asks tool's reconcile probe about one call in-process, the way
// Serve asks it for weir: bounded by the deadline, a panic recovered. A
// mistake in the tool's declaration is a plain error; a probe that failed
// is a *ReconcileError.
func Reconcile(ctx context.Context, tool sdk.Tool, req ReconcileRequest) (*Reconciled, error) {
	if err := sdk.CheckTools(tool); err != nil {
		return nil, err
	}
	if req.IdempotencyKey == "" {
		return nil, fmt.Errorf("sdktest: ReconcileRequest needs the IdempotencyKey of the call it asks about")
	}
	input := req.Input
	if input == "" {
		input = "{}"
	}
	if !json.Valid([]byte(input)) {
		return nil, fmt.Errorf("sdktest: Input is not JSON")
	}
	if req.Config != "" && !json.Valid([]byte(req.Config)) {
		return nil, fmt.Errorf("sdktest: Config is not JSON")
	}
	call := &sdk.Call{Tool: tool.Name, IdempotencyKey: req.IdempotencyKey, Input: json.RawMessage(input), StateDir: req.StateDir}
	ctx, cancel := configure(ctx, call, req.Config, req.Deadline)
	defer cancel()
	res, err := sdk.InvokeReconcile(ctx, tool, call)
	if err != nil {
		s := status.Convert(err)
		return nil, &ReconcileError{Code: s.Code().String(), Message: s.Message()}
	}
	out := &Reconciled{}
	switch res.GetOutcome() {
	case wire.ReconcileOutcome_RECONCILE_OUTCOME_HAPPENED:
		out.Outcome = sdk.ReconcileHappened
		if r := res.GetResult(); r != nil {
			out.Output = r.GetOutput()
		}
	case wire.ReconcileOutcome_RECONCILE_OUTCOME_NOT_HAPPENED:
		out.Outcome = sdk.ReconcileNotHappened
	default:
		out.Outcome = sdk.ReconcileUnknown
	}
	return out, nil
}

// configure gives call the config, if any, and bounds ctx by the
// deadline, if any, as weir's host does for every call and probe it
// passes on. The cancel function must be called when the call returns.
func configure(ctx context.Context, call *sdk.Call, config string, deadline time.Time) (context.Context, context.CancelFunc) {
	if config != "" {
		call.Config = json.RawMessage(config)
	}
	if deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, deadline)
}
