package tool

import (
	"context"
	"encoding/json"
	"time"
)

// ReconcileRequest asks a tool's reconcile probe (DESIGN §12) whether the
// call made with IdempotencyKey happened. Recovery asks it when an at most
// once call's outcome is unknown: the call was started and no answer was
// recorded.
type ReconcileRequest struct {
	// Tool is the full tool name, "plugin.tool".
	Tool string
	// IdempotencyKey is the key the call was made with.
	IdempotencyKey string
	// Input is the call's input, as it was sent.
	Input json.RawMessage
	// RunID and Node identify the caller, as on the call.
	RunID string
	Node  string
	// Deadline bounds the probe; zero means the caller's default.
	Deadline time.Time
}

// Reconciled is a probe's answer.
type Reconciled string

// The answers of a reconcile probe.
const (
	// Happened: the call had its effect; Output holds its result when the
	// tool can still tell it.
	Happened Reconciled = "happened"
	// NotHappened: the call had no effect; it may be made once more.
	NotHappened Reconciled = "not_happened"
	// Unknown: the tool cannot tell.
	Unknown Reconciled = "unknown"
)

// ReconcileResult is a probe's answer, with the call's result when it
// happened and the tool still knows it.
type ReconcileResult struct {
	Answer Reconciled
	Output json.RawMessage
}

// Reconciler is what a tool provider implements when it can ask tools'
// reconcile probes (the plugin host does). A tool that declares no probe
// (flows.ToolInfo.Reconcile false) is never asked; an error (the plugin
// is down, the probe failed) counts as Unknown.
type Reconciler interface {
	Reconcile(ctx context.Context, req ReconcileRequest) (*ReconcileResult, error)
}
