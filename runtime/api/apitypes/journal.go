package apitypes

import "encoding/json"

// RunJournal is GET /v1/runs/{id}/journal: what a recording of a run
// (weir run export) needs beyond the run, its events and its version's
// sources, which other endpoints serve.
type RunJournal struct {
	// Turns are the model turns the run's agents journaled, in node,
	// visit and turn order, each as the store keeps it (its "v" says the
	// record's version): the request's digest, the model's answer and
	// the ends of the tool calls it asked for.
	Turns []json.RawMessage `json:"turns"`
	// Tools declare the tools the run's version calls, as their
	// manifests do (never a plugin's config); a tool the daemon no
	// longer has is left out.
	Tools []ToolDecl `json:"tools"`
}

// ToolDecl is what a tool declares: its effect class, cost, schemas and,
// for a model tool, the chat contract and its models.
type ToolDecl struct {
	Name         string          `json:"name"`
	Effect       string          `json:"effect,omitempty"`
	Idempotent   bool            `json:"idempotent,omitempty"`
	Cost         int64           `json:"cost,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Description  string          `json:"description,omitempty"`
	Chat         bool            `json:"chat,omitempty"`
	Models       []ModelDecl     `json:"models,omitempty"`
	// TimeoutMS is the tool's declared call deadline in milliseconds (0:
	// the engine's default).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	Reconcile bool  `json:"reconcile,omitempty"`
}

// ModelDecl is one model a chat tool offers: its alias, its most output
// tokens per turn and its prices in budget units per million tokens.
type ModelDecl struct {
	Alias      string `json:"alias"`
	MaxTokens  int    `json:"max_tokens,omitempty"`
	InputCost  int64  `json:"input_cost,omitempty"`
	OutputCost int64  `json:"output_cost,omitempty"`
}
