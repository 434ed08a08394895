package apitypes

import "encoding/json"

// Refusal codes of resolving an unknown outcome.
const (
	// CodeWaitExpired: the wait's deadline passed; the run goes on without
	// the answer (409).
	CodeWaitExpired = "E_WAIT_EXPIRED"
	// CodeBadResult: a resolve's result is not JSON or does not fit the
	// tool's output schema; the wait stays open (400).
	CodeBadResult = "E_BAD_RESULT"
)

// WaitUnknown is the kind of wait of a run whose at-most-once call's
// outcome is unknown on a node that says on_unknown = "ask": a resolve
// ends it.
const WaitUnknown = "unknown"

// ResolveRequest is the body of POST /v1/runs/{id}/waits/{wait}/resolve:
// whether the call happened (required), its result when it did (optional,
// null when left out; checked against the tool's output schema), and why.
type ResolveRequest struct {
	Happened *bool           `json:"happened"`
	Result   json.RawMessage `json:"result,omitempty"`
	Reason   string          `json:"reason,omitempty"`
}

// ResolveResponse answers a resolve.
type ResolveResponse struct {
	RunID    string `json:"run_id"`
	Node     string `json:"node"`
	Wait     string `json:"wait"`
	Happened bool   `json:"happened"`
}
