// Package chat is the contract of a chat tool: one model turn, with the
// conversation so far in and the model's answer out (docs/design.md §9).
//
// weir knows no model provider. A model is a tool that speaks this
// contract: its input is a Request and its output a Response, both as JSON
// on the plugin wire. The first-party llm plugin serves llm.chat for
// OpenAI-compatible and Anthropic endpoints; a vendor may ship another model
// back end by serving a tool that speaks the same contract and declares it
// (see Contract and SpeaksContract), and an agent node can then name that
// tool as its model.
//
// The JSON names below are part of the contract and never change meaning
// within one Contract version. The package imports only the standard
// library, so that a vendor's module stays small.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Contract names this version of the chat contract. A tool declares that
// it speaks it by using RequestSchema as its input schema: the schema's
// $id is RequestSchemaID, which SpeaksContract recognises. Once tool
// manifests carry a contract field, the tool declares Contract there.
const Contract = "weir.chat/v1"

// Role is who speaks a message.
type Role string

// The roles of a conversation.
const (
	// RoleSystem gives instructions; it may also be given as Request.System.
	RoleSystem Role = "system"
	// RoleUser is the person or the flow talking to the model.
	RoleUser Role = "user"
	// RoleAssistant is the model: text, tool calls, or both.
	RoleAssistant Role = "assistant"
	// RoleTool carries the result of one tool call back to the model.
	RoleTool Role = "tool"
)

// Request is the input of one model turn.
type Request struct {
	// Model is the model alias the chat tool resolves (for llm.chat, a key
	// of its models config), not a provider's model id.
	Model string `json:"model"`
	// System is the system prompt; optional.
	System string `json:"system,omitempty"`
	// Messages is the conversation so far, oldest first; at least one.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call this turn, with weir's names
	// (the chat tool maps them onto its provider's alphabet, see
	// ProviderToolName).
	Tools []ToolDef `json:"tools,omitempty"`
	// MaxTokens bounds the output tokens of this turn; 0 means the
	// chat tool's default for the model.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// OutputSchema is an optional JSON schema the final answer should
	// satisfy. It is a hint: the chat tool may pass it to the provider,
	// and whoever asked checks the answer against it.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Message is one message of the conversation.
type Message struct {
	Role Role `json:"role"`
	// Content is the message's text: the prompt, the model's text answer,
	// or a tool's result.
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers (RoleTool only).
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError says a tool message carries a failure, not a result.
	IsError bool `json:"is_error,omitempty"`
}

// ToolCall is one tool call the model asked for.
type ToolCall struct {
	// ID is the provider's id of the call; tool messages answer it. It
	// is not a stable identity across retries of a turn.
	ID string `json:"id"`
	// Name is the tool's weir name (already mapped back from the
	// provider's alphabet).
	Name string `json:"name"`
	// Arguments is the call's input: a JSON object.
	Arguments json.RawMessage `json:"arguments"`
}

// ToolDef offers one tool to the model.
type ToolDef struct {
	// Name is the tool's weir name, e.g. "notes.put".
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON schema of the tool's input; an object
	// schema. Empty means any object.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// StopReason says why the model ended its turn.
type StopReason string

// The stop reasons. A provider's own reasons are mapped onto these.
const (
	// StopEndTurn: the model gave its answer.
	StopEndTurn StopReason = "end_turn"
	// StopToolUse: the model asks for the tool calls in its message.
	StopToolUse StopReason = "tool_use"
	// StopMaxTokens: the turn hit MaxTokens (or the context window); the
	// answer is cut short.
	StopMaxTokens StopReason = "max_tokens"
	// StopRefusal: the model or the provider's filter refused to answer.
	StopRefusal StopReason = "refusal"
	// StopOther: any other reason the provider gave.
	StopOther StopReason = "other"
)

// Usage counts the tokens of one turn.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Response is the output of one model turn.
type Response struct {
	// Message is the model's answer, role assistant: text, tool calls, or
	// both.
	Message    Message    `json:"message"`
	StopReason StopReason `json:"stop_reason"`
	Usage      Usage      `json:"usage"`
	// UsageEstimated says the provider reported no usage and Usage is the
	// conservative estimate the turn was charged instead (docs/design.md §9).
	UsageEstimated bool `json:"usage_estimated,omitempty"`
	// Model is the provider's id of the model that answered.
	Model string `json:"model"`
	// Provider names the API that answered as the OpenTelemetry GenAI
	// conventions name providers ("openai", "anthropic"); empty when the
	// tool does not say. Traces carry it as gen_ai.provider.name.
	Provider string `json:"provider,omitempty"`
}

// Limits of a request, named so that a refusal can cite them.
const (
	// MaxMessages bounds the messages of one request.
	MaxMessages = 10000
	// MaxTools bounds the tools offered in one turn.
	MaxTools = 128
	// MaxToolCalls bounds the tool calls of one assistant message.
	MaxToolCalls = 128
)

// Validate reports the first thing wrong with r that no provider would
// accept: an empty model or conversation, an unknown role, a tool message
// without the call it answers, arguments that are not a JSON object, a
// tool name that cannot be shown to a provider, or a limit exceeded.
func (r *Request) Validate() error {
	if r.Model == "" {
		return errors.New("chat request: model is empty")
	}
	if len(r.Messages) == 0 {
		return errors.New("chat request: no messages")
	}
	if len(r.Messages) > MaxMessages {
		return fmt.Errorf("chat request: %d messages, more than the limit of %d", len(r.Messages), MaxMessages)
	}
	if len(r.Tools) > MaxTools {
		return fmt.Errorf("chat request: %d tools, more than the limit of %d", len(r.Tools), MaxTools)
	}
	if r.MaxTokens < 0 {
		return fmt.Errorf("chat request: max_tokens %d is negative", r.MaxTokens)
	}
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
		if len(t.InputSchema) > 0 && !isObject(t.InputSchema) {
			return fmt.Errorf("chat request: tool %q: input_schema is not a JSON object", t.Name)
		}
	}
	if err := CheckToolNames(names); err != nil {
		return fmt.Errorf("chat request: %w", err)
	}
	if len(r.OutputSchema) > 0 && !isObject(r.OutputSchema) {
		return errors.New("chat request: output_schema is not a JSON object")
	}
	for i, m := range r.Messages {
		if err := m.validate(); err != nil {
			return fmt.Errorf("chat request: message %d: %w", i, err)
		}
	}
	return nil
}

func (m *Message) validate() error {
	switch m.Role {
	case RoleSystem, RoleUser:
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.IsError {
			return fmt.Errorf("a %s message carries only content", m.Role)
		}
	case RoleAssistant:
		if m.ToolCallID != "" || m.IsError {
			return errors.New("an assistant message has no tool_call_id or is_error")
		}
		if len(m.ToolCalls) > MaxToolCalls {
			return fmt.Errorf("%d tool calls, more than the limit of %d", len(m.ToolCalls), MaxToolCalls)
		}
		for j, c := range m.ToolCalls {
			if c.ID == "" || c.Name == "" {
				return fmt.Errorf("tool call %d needs an id and a name", j)
			}
			if !isObject(c.Arguments) {
				return fmt.Errorf("tool call %d (%s): arguments are not a JSON object", j, c.Name)
			}
		}
	case RoleTool:
		if m.ToolCallID == "" {
			return errors.New("a tool message needs the tool_call_id it answers")
		}
		if len(m.ToolCalls) > 0 {
			return errors.New("a tool message carries no tool calls")
		}
	default:
		return fmt.Errorf("unknown role %q (system, user, assistant or tool)", m.Role)
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(b, &v) == nil && v != nil
}

// EstimateInputTokens is a conservative bound of the input tokens of r,
// known before the call: the bytes of its JSON divided by three, rounded
// up. Tokenizers average about four bytes per token on English text and
// JSON, so the bound holds without a tokenizer per model; the turn is
// settled to the provider's reported usage afterwards (docs/design.md §9).
func EstimateInputTokens(r *Request) int64 {
	b, err := json.Marshal(r)
	if err != nil {
		return 0
	}
	return (int64(len(b)) + 2) / 3
}
