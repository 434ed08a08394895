package main

import (
	"context"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/weirhq/weir/sdk/chat"
)

// anthropicProvider speaks the Messages API through anthropic-sdk-go.
type anthropicProvider struct {
	client anthropic.Client
}

func newAnthropic(p *providerConfig, hc *http.Client) *anthropicProvider {
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		// Every try is the engine's: it counts them and honours
		// Retry-After itself.
		option.WithMaxRetries(0),
		// The key is the config's alone: nothing is read from the
		// environment or a profile on disk.
		option.WithoutEnvironmentDefaults(),
		// The API version the request and stream shapes are written
		// for, not the SDK's newest.
		option.WithHeader("anthropic-version", p.AnthropicVersion),
	}
	// The SDK's WithAPIKey sends Authorization: Bearer; the Messages API
	// documents x-api-key. A request that carries either header is sent
	// as it is, with no other credential resolved.
	switch {
	case p.apiKey == "":
	case p.Auth == authBearer:
		opts = append(opts, option.WithHeader("Authorization", "Bearer "+p.apiKey))
	default:
		opts = append(opts, option.WithHeader("X-Api-Key", p.apiKey))
	}
	if p.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(p.BaseURL))
	}
	return &anthropicProvider{client: anthropic.NewClient(opts...)}
}

func (a *anthropicProvider) turn(ctx context.Context, t *turnRequest) (*chat.Response, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(t.model.Model),
		MaxTokens: t.maxTokens,
		Messages:  anthropicMessages(t.req),
	}
	if s := systemPrompt(t.req); s != "" {
		params.System = []anthropic.TextBlockParam{{Text: s}}
	}
	for _, o := range t.offers {
		schema := o.schema
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "type" && k != "properties" && k != "required" {
				in.ExtraFields[k] = v
			}
		}
		tool := anthropic.ToolParam{Name: o.name, InputSchema: in}
		if o.description != "" {
			tool.Description = anthropic.String(o.description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}

	var ro []option.RequestOption
	for k, v := range t.callerHeaders() {
		ro = append(ro, option.WithHeader(k, v))
	}
	stream := a.client.Messages.NewStreaming(ctx, params, ro...)
	defer stream.Close()
	var (
		msg     anthropic.Message
		stopped bool
		deltas  int64
		// inputs keeps each tool_use block's streamed input as sent: the
		// SDK's accumulator empties input that is not JSON, which would
		// hide a malformed call as one without arguments.
		inputs = map[int64]*strings.Builder{}
		size   answerSize
	)
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, &malformedError{msg: "the stream does not add up to a message: " + err.Error()}
		}
		switch ev.Type {
		case "content_block_delta":
			if err := size.add(len(ev.Delta.Text) + len(ev.Delta.PartialJSON)); err != nil {
				return nil, err
			}
			if ev.Delta.Type == "input_json_delta" {
				b, ok := inputs[ev.Index]
				if !ok {
					b = &strings.Builder{}
					inputs[ev.Index] = b
				}
				b.WriteString(ev.Delta.PartialJSON)
			} else if ev.Delta.Type == "text_delta" {
				t.text(ev.Delta.Text)
			}
			deltas++
			t.progress(deltas)
		case "message_stop":
			stopped = true
		}
	}
	// A stream cut off after its start has said what its prompt costs:
	// the provider bills it though no answer came.
	used := &chat.Response{Usage: chat.Usage{InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens}}
	if err := stream.Err(); err != nil {
		return used, err
	}
	if !stopped {
		return used, &cutShortError{msg: "the stream ended before the model finished its turn"}
	}
	resp := &chat.Response{
		Message: chat.Message{Role: chat.RoleAssistant},
		Usage:   chat.Usage{InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens},
		Model:   string(msg.Model),
	}
	switch msg.StopReason {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		resp.StopReason = chat.StopEndTurn
	case anthropic.StopReasonToolUse:
		resp.StopReason = chat.StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		resp.StopReason = chat.StopMaxTokens
	case anthropic.StopReasonRefusal:
		resp.StopReason = chat.StopRefusal
	default:
		resp.StopReason = chat.StopOther
	}
	var text strings.Builder
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			input := string(b.Input)
			if streamed, ok := inputs[int64(i)]; ok {
				input = streamed.String()
			}
			if err := t.addToolCall(resp, b.ID, b.Name, input, "a tool_use block came without its id or name"); err != nil {
				return nil, err
			}
		}
	}
	resp.Message.Content = text.String()
	return resp, nil
}

// anthropicMessages maps the conversation onto Messages API turns: system
// messages go to the system prompt, and consecutive tool results and user
// text merge into one user turn, tool results first, as the API wants.
func anthropicMessages(r *chat.Request) []anthropic.MessageParam {
	type turn struct {
		user   bool
		blocks []anthropic.ContentBlockParamUnion
	}
	var turns []turn
	add := func(user bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{user: user, blocks: blocks})
	}
	for _, m := range r.Messages {
		switch m.Role {
		case chat.RoleUser:
			if m.Content != "" {
				add(true, anthropic.NewTextBlock(m.Content))
			}
		case chat.RoleTool:
			add(true, anthropic.NewToolResultBlock(m.ToolCallID, m.Content, m.IsError))
		case chat.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				name, _ := chat.ProviderToolName(c.Name)
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, c.Arguments, name))
			}
			add(false, blocks...)
		}
	}
	out := make([]anthropic.MessageParam, len(turns))
	for i, t := range turns {
		if t.user {
			out[i] = anthropic.NewUserMessage(t.blocks...)
		} else {
			out[i] = anthropic.NewAssistantMessage(t.blocks...)
		}
	}
	return out
}
