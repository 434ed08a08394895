package main

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/weirhq/weir/sdk/chat"
)

// openAIProvider speaks Chat Completions through openai-go, to OpenAI or
// any server compatible with it (base_url).
type openAIProvider struct {
	client openai.Client
}

func newOpenAI(p *providerConfig, hc *http.Client) *openAIProvider {
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		// Every try is the engine's: it counts them and honours
		// Retry-After itself.
		option.WithMaxRetries(0),
		option.WithAPIKey(p.apiKey),
	}
	if p.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(p.BaseURL))
	}
	return &openAIProvider{client: openai.NewClient(opts...)}
}

func (o *openAIProvider) turn(ctx context.Context, t *turnRequest) (*chat.Response, error) {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(t.model.Model),
		Messages:      openAIMessages(t.req),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	// The model's token_limit_field: OpenAI's reasoning models refuse
	// max_tokens, while older compatible servers read only max_tokens.
	if t.model.TokenLimitField == fieldMaxTokens {
		params.MaxTokens = openai.Int(t.maxTokens)
	} else {
		params.MaxCompletionTokens = openai.Int(t.maxTokens)
	}
	for _, o := range t.offers {
		fn := shared.FunctionDefinitionParam{Name: o.name, Parameters: shared.FunctionParameters(o.schema)}
		if o.description != "" {
			fn.Description = openai.String(o.description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}

	var ro []option.RequestOption
	for k, v := range t.callerHeaders() {
		ro = append(ro, option.WithHeader(k, v))
	}
	stream := o.client.Chat.Completions.NewStreaming(ctx, params, ro...)
	defer stream.Close()
	type callState struct {
		id, name string
		args     strings.Builder
	}
	var (
		text   strings.Builder
		calls  = map[int64]*callState{}
		finish string
		usage  chat.Usage
		model  string
		deltas int64
		size   answerSize
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Model != "" {
			model = chunk.Model
		}
		if chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0 {
			usage = chat.Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			d := ch.Delta
			n := len(d.Content)
			for _, tc := range d.ToolCalls {
				n += len(tc.Function.Arguments) + len(tc.Function.Name)
			}
			if err := size.add(n); err != nil {
				return nil, err
			}
			if d.Content != "" {
				text.WriteString(d.Content)
				t.text(d.Content)
				deltas++
			}
			for _, tc := range d.ToolCalls {
				c, ok := calls[tc.Index]
				if !ok {
					c = &callState{}
					calls[tc.Index] = c
				}
				if tc.ID != "" {
					c.id = tc.ID
				}
				if tc.Function.Name != "" {
					c.name += tc.Function.Name
				}
				c.args.WriteString(tc.Function.Arguments)
				deltas++
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
			if d.Content != "" || len(d.ToolCalls) > 0 {
				t.progress(deltas)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if finish == "" {
		return nil, &cutShortError{msg: "the stream ended before the model finished its turn"}
	}
	resp := &chat.Response{
		Message: chat.Message{Role: chat.RoleAssistant, Content: text.String()},
		Usage:   usage,
		Model:   model,
	}
	switch finish {
	case "stop":
		resp.StopReason = chat.StopEndTurn
	case "tool_calls", "function_call":
		resp.StopReason = chat.StopToolUse
	case "length":
		resp.StopReason = chat.StopMaxTokens
	case "content_filter":
		resp.StopReason = chat.StopRefusal
	default:
		resp.StopReason = chat.StopOther
	}
	indexes := make([]int64, 0, len(calls))
	for i := range calls {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })
	for _, i := range indexes {
		c := calls[i]
		if err := t.addToolCall(resp, c.id, c.name, c.args.String(), "a tool call came without its id or name"); err != nil {
			return nil, err
		}
	}
	// Some compatible servers end a turn of tool calls with "stop".
	if len(resp.Message.ToolCalls) > 0 && resp.StopReason == chat.StopEndTurn {
		resp.StopReason = chat.StopToolUse
	}
	return resp, nil
}

func openAIMessages(r *chat.Request) []openai.ChatCompletionMessageParamUnion {
	var msgs []openai.ChatCompletionMessageParamUnion
	if r.System != "" {
		msgs = append(msgs, openai.SystemMessage(r.System))
	}
	for _, m := range r.Messages {
		switch m.Role {
		case chat.RoleSystem:
			msgs = append(msgs, openai.SystemMessage(m.Content))
		case chat.RoleUser:
			msgs = append(msgs, openai.UserMessage(m.Content))
		case chat.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, c := range m.ToolCalls {
				name, _ := chat.ProviderToolName(c.Name)
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: string(c.Arguments)},
					},
				})
			}
			msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case chat.RoleTool:
			content := m.Content
			if m.IsError {
				// Chat Completions has no error flag on a tool result.
				content = "ERROR: " + content
			}
			msgs = append(msgs, openai.ToolMessage(content, m.ToolCallID))
		}
	}
	return msgs
}
