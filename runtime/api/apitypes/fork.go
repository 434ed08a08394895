package apitypes

import "encoding/json"

// Versions a fork may run (ForkRequest.Version).
const (
	ForkPinned = "pinned"
	ForkLatest = "latest"
)

// ForkRequest is the body of POST /v1/runs/{id}/fork: a new run of the
// caller's that starts at From with the source's work before it copied.
type ForkRequest struct {
	// From is the fork point: "NODE" (its latest visit) or "NODE@VISIT".
	From string `json:"from"`
	// Input replaces the source's input; absent: the source's.
	Input json.RawMessage `json:"input,omitempty"`
	// Version is "pinned" (default: the version the source ran) or
	// "latest" (if the fork point and the copied results fit it).
	Version string `json:"version,omitempty"`
	// AllowEffects accepts that at-most-once calls after the fork point
	// are made again; without it such a fork is refused (E_FORK_EFFECTS).
	AllowEffects bool `json:"allow_effects,omitempty"`
	// RequestID makes the fork idempotent: a retry with the same id makes
	// no second fork. "": every request forks anew.
	RequestID string `json:"request_id,omitempty"`
	// Reason is journaled with the fork on both runs.
	Reason string `json:"reason,omitempty"`
}

// ForkRef names where a fork began.
type ForkRef struct {
	RunID string `json:"run_id"`
	Node  string `json:"node"`
	Visit int    `json:"visit"`
}

// EffectSite is a place a fork may call an at-most-once tool again.
type EffectSite struct {
	Flow string `json:"flow"`
	Node string `json:"node"`
	Kind string `json:"kind"`
	Tool string `json:"tool"`
	// Pos is file:line:col where the script names the tool.
	Pos string `json:"pos"`
	// Via is the node that starts the child run making the call.
	Via string `json:"via,omitempty"`
	Why string `json:"why,omitempty"`
}

// ForkResult answers a fork: 201 for a new run, 200 for the one the
// request id made before (Existing; then only RunID, ForkedFrom and
// Version are set).
type ForkResult struct {
	RunID      string  `json:"run_id"`
	Existing   bool    `json:"existing"`
	ForkedFrom ForkRef `json:"forked_from"`
	Version    string  `json:"version"`
	// Copied are the nodes whose results the fork carries; NotCopied the
	// nodes before the point whose result then the source no longer keeps
	// (it ran them again after the point).
	Copied    []string `json:"copied"`
	NotCopied []string `json:"not_copied,omitempty"`
	// Reruns are the nodes reachable from the fork point; Effects the
	// at-most-once calls among them, which run again.
	Reruns  []string     `json:"reruns"`
	Effects []EffectSite `json:"effects"`
}
