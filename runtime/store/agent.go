package store

import (
	"encoding/json"
	"time"
)

// AgentTurnVersion is the format version of the AgentTurn records written
// today (docs/design.md §11: persisted formats are versioned). A reader refuses a
// version it does not know instead of guessing.
const AgentTurnVersion = 1

// AgentTurn is one model turn of one visit of an agent node, journaled
// before any tool call it asks for is dispatched (docs/design.md §9). Turns are
// records of their own, not part of the continuation, so a long
// conversation never has to fit one transaction: each write holds one
// turn. A turn is written once when the model has answered and again as
// the results of its calls become known; turns are only ever added.
type AgentTurn struct {
	V     int    `json:"v"`
	RunID string `json:"run_id"`
	Node  string `json:"node"`
	Visit int    `json:"visit"`
	// Turn numbers the turns of one visit from 1.
	Turn int `json:"turn"`
	// Model is the model alias the turn asked the model tool for.
	Model string `json:"model,omitempty"`
	// RequestDigest (SHA-256, hex) and RequestBytes identify the request
	// sent, without keeping it: it is rebuilt from the turns before.
	RequestDigest string `json:"request_digest"`
	RequestBytes  int    `json:"request_bytes"`
	// Response is the model's message (role assistant): its text and the
	// tool calls it asked for, in the chat contract's JSON.
	Response   json.RawMessage `json:"response"`
	StopReason string          `json:"stop_reason,omitempty"`
	// Usage is the tokens the tool reported; UsageReported is false when
	// it reported none and the turn was charged its reservation.
	Usage         AgentUsage `json:"usage"`
	UsageReported bool       `json:"usage_reported,omitempty"`
	// Reserved is the worst case reserved from the budget before the
	// call; Cost is what the turn was charged.
	Reserved int64 `json:"reserved"`
	Cost     int64 `json:"cost"`
	// Attempt is the run's attempt (Run.Attempt) of the agent step that
	// last wrote the turn, and StepAttempt the attempt of the run's step
	// task then. Cut is how many times a crash may have cut this turn off
	// after it was asked and before its answer was journaled — the leases
	// the step lost since the turn before was last written by a step
	// (nothing is written before a model turn answers, so weir cannot know
	// more; only the step asks, so the calls' lost leases, which raise the
	// run's attempt too, are not counted) — and CutReserved their upper
	// bound: Cut times the turn's reservation, the same request each time.
	Attempt     int   `json:"attempt,omitempty"`
	StepAttempt int   `json:"step_attempt,omitempty"`
	Cut         int   `json:"cut,omitempty"`
	CutReserved int64 `json:"cut_reserved,omitempty"`
	// Retried is how many tries of this turn failed (retryable errors)
	// before the one that answered, and RetriedUsage the tokens the
	// provider reported for them: billed, though no answer came.
	Retried      int        `json:"retried,omitempty"`
	RetriedUsage AgentUsage `json:"retried_usage,omitzero"`
	// Calls are the tool calls the model asked for, in its order, with
	// their ends once known.
	Calls []AgentCall `json:"calls,omitempty"`
	// Correction is set on a final answer that did not satisfy the
	// node's output schema: why not, sent back to the model as the next
	// turn's user message.
	Correction string `json:"correction,omitempty"`
	// Note is what a person said when they resumed the agent after its
	// runaway guard parked it past this turn: sent to the model after the
	// results of the turn's calls, as a user message.
	Note string `json:"note,omitempty"`
	// At is when the turn was asked.
	At time.Time `json:"at"`
	// Prompt, on a visit's first turn and only while the trace export
	// captures content, is the system instructions and user prompt the
	// visit began with (each cut to telemetry.MaxContentBytes): the rest
	// of every request is rebuilt from the turns, these are not.
	Prompt *AgentPrompt `json:"prompt,omitempty"`
}

// AgentPrompt is what an agent visit's conversation began with.
type AgentPrompt struct {
	System string `json:"system,omitempty"`
	User   string `json:"user"`
}

// AgentUsage counts the tokens of a turn.
type AgentUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// AgentCall is one tool call a turn asked for and, once it ended, its
// result or error (which goes back to the model as the call's result).
type AgentCall struct {
	// ID is the provider's id of the call, which the tool message
	// answers; the call's idempotency key does not use it.
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Done says the call ended: Result or Error holds its end.
	Done   bool            `json:"done,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RunError       `json:"error,omitempty"`
	// Cost is what the call was charged.
	Cost int64 `json:"cost,omitempty"`
	// Child is the child run of a call of one of the agent's flows,
	// recorded in the write that starts it.
	Child string `json:"child,omitempty"`
	// Task is the task that runs the call, recorded in the write that
	// queues it.
	Task string `json:"task,omitempty"`
	// Edited holds the arguments a person's approval gave the call in
	// place of the proposed ones (an edit), recorded in the write that
	// queues it: the call runs with them, and the model is told so.
	Edited json.RawMessage `json:"edited,omitempty"`
	// Responded says a person answered the call in the tool's place:
	// Result is their answer and the tool never ran.
	Responded bool `json:"responded,omitempty"`
}

// AgentTurnListParams selects the turns of one visit of an agent node.
type AgentTurnListParams struct {
	RunID string
	Node  string
	Visit int
}
