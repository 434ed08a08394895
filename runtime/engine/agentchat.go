package engine

import "encoding/json"

// The chat contract (DESIGN §9) as the engine writes and reads it: the
// input and output of a model tool, JSON on the plugin wire. The field
// names are the contract's (weir.chat/v1) and never change meaning; a
// model tool of any vendor speaks them.

// Roles of a conversation's messages.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// Stop reasons of a model turn.
const (
	stopEndTurn   = "end_turn"
	stopMaxTokens = "max_tokens"
	stopRefusal   = "refusal"
)

// chatRequest is the input of one model turn.
type chatRequest struct {
	Model        string          `json:"model"`
	System       string          `json:"system,omitempty"`
	Messages     []chatMessage   `json:"messages"`
	Tools        []chatToolDef   `json:"tools,omitempty"`
	MaxTokens    int64           `json:"max_tokens,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// chatMessage is one message of the conversation.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	IsError    bool           `json:"is_error,omitempty"`
}

// chatToolCall is one tool call the model asked for, under the tool's weir
// name (the chat tool maps names onto its provider's alphabet and back).
type chatToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// chatToolDef offers one tool to the model.
type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// chatUsage counts the tokens of one turn.
type chatUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// chatResponse is the output of one model turn.
type chatResponse struct {
	Message    chatMessage `json:"message"`
	StopReason string      `json:"stop_reason"`
	Usage      chatUsage   `json:"usage"`
	// UsageEstimated: the provider reported no usage and Usage is the
	// chat tool's estimate.
	UsageEstimated bool   `json:"usage_estimated,omitempty"`
	Model          string `json:"model"`
}
