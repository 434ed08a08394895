package main

import (
	"context"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/weirhq/weir/sdk/chat"
)

// responsesProvider speaks the OpenAI Responses API (POST /v1/responses)
// through openai-go: what OpenAI's newest models and many gateways
// expose. It is stateless on the provider's side (store = false): every
// turn sends the whole conversation, as with Chat Completions, so a turn
// journaled by weir never depends on what the provider kept.
type responsesProvider struct {
	client openai.Client
}

func newResponses(p *providerConfig, hc *http.Client) *responsesProvider {
	return &responsesProvider{client: newOpenAI(p, hc).client}
}

// responsesFailure is a failure the Responses API reports inside a
// stream that had started well: a response.failed event or an error
// event, with the API's error code.
type responsesFailure struct {
	code, message string
}

func (e *responsesFailure) Error() string { return e.code + ": " + e.message }

func (r *responsesProvider) turn(ctx context.Context, t *turnRequest) (*chat.Response, error) {
	if t.maxTokens < minResponsesTokens {
		// Refused here rather than by the provider: the same answer,
		// without a request.
		return nil, failf(codeBadRequest, false, "max_tokens %d is below the %d the Responses API takes", t.maxTokens, minResponsesTokens)
	}
	params := responses.ResponseNewParams{
		Model:           shared.ResponsesModel(t.model.Model),
		Input:           responses.ResponseNewParamsInputUnion{OfInputItemList: responsesInput(t.req)},
		MaxOutputTokens: openai.Int(t.maxTokens),
		Store:           openai.Bool(false),
	}
	if s := systemPrompt(t.req); s != "" {
		params.Instructions = openai.String(s)
	}
	for _, o := range t.offers {
		// strict defaults to true on this API, which takes a narrower
		// schema language (every property required, no additional
		// ones): the tools are offered as they are, as on Chat
		// Completions.
		fn := responses.FunctionToolParam{Name: o.name, Parameters: o.schema, Strict: openai.Bool(false)}
		if o.description != "" {
			fn.Description = openai.String(o.description)
		}
		params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: &fn})
	}

	var ro []option.RequestOption
	for k, v := range t.callerHeaders() {
		ro = append(ro, option.WithHeader(k, v))
	}
	stream := r.client.Responses.NewStreaming(ctx, params, ro...)
	defer stream.Close()
	type callState struct {
		callID, name string
		args         strings.Builder
	}
	var (
		text   strings.Builder
		calls  = map[string]*callState{}
		order  []string
		final  *responses.Response
		deltas int64
		size   answerSize
	)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			if err := size.add(len(ev.Delta)); err != nil {
				return nil, err
			}
			text.WriteString(ev.Delta)
			t.text(ev.Delta)
			deltas++
			t.progress(deltas)
		case "response.output_item.added":
			if ev.Item.Type == "function_call" {
				if err := size.add(len(ev.Item.Name)); err != nil {
					return nil, err
				}
				if _, ok := calls[ev.Item.ID]; !ok {
					order = append(order, ev.Item.ID)
				}
				calls[ev.Item.ID] = &callState{callID: ev.Item.CallID, name: ev.Item.Name}
			}
		case "response.function_call_arguments.delta":
			c, ok := calls[ev.ItemID]
			if !ok {
				return nil, &malformedError{msg: "arguments came for a function call that was never started"}
			}
			if err := size.add(len(ev.Delta)); err != nil {
				return nil, err
			}
			c.args.WriteString(ev.Delta)
			deltas++
			t.progress(deltas)
		case "response.function_call_arguments.done":
			// The whole arguments, as the deltas added up to.
			if c, ok := calls[ev.ItemID]; ok && ev.Arguments != "" {
				if err := size.add(len(ev.Arguments)); err != nil {
					return nil, err
				}
				c.args.Reset()
				c.args.WriteString(ev.Arguments)
			}
		case "response.completed", "response.incomplete":
			resp := ev.Response
			final = &resp
		case "response.failed":
			return nil, &responsesFailure{code: string(ev.Response.Error.Code), message: ev.Response.Error.Message}
		case "error":
			return nil, &responsesFailure{code: ev.Code, message: ev.Message}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if final == nil {
		return nil, &cutShortError{msg: "the stream ended before the model finished its turn"}
	}
	resp := &chat.Response{
		Message: chat.Message{Role: chat.RoleAssistant, Content: text.String()},
		Usage:   chat.Usage{InputTokens: final.Usage.InputTokens, OutputTokens: final.Usage.OutputTokens},
		Model:   string(final.Model),
	}
	switch {
	case final.Status == "incomplete" && final.IncompleteDetails.Reason == "max_output_tokens":
		resp.StopReason = chat.StopMaxTokens
	case final.Status == "incomplete" && final.IncompleteDetails.Reason == "content_filter":
		resp.StopReason = chat.StopRefusal
	case final.Status == "completed" && len(order) > 0:
		resp.StopReason = chat.StopToolUse
	case final.Status == "completed":
		resp.StopReason = chat.StopEndTurn
	default:
		resp.StopReason = chat.StopOther
	}
	for _, id := range order {
		c := calls[id]
		if err := t.addToolCall(resp, c.callID, c.name, c.args.String(), "a function call came without its call_id or name"); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// responsesInput maps the conversation onto Responses API input items:
// system messages go to the instructions, an assistant's tool calls are
// function_call items and each tool result a function_call_output.
func responsesInput(r *chat.Request) responses.ResponseInputParam {
	var items responses.ResponseInputParam
	for _, m := range r.Messages {
		switch m.Role {
		case chat.RoleUser:
			items = append(items, responses.ResponseInputItemParamOfMessage(m.Content, responses.EasyInputMessageRoleUser))
		case chat.RoleAssistant:
			if m.Content != "" {
				items = append(items, responses.ResponseInputItemParamOfMessage(m.Content, responses.EasyInputMessageRoleAssistant))
			}
			for _, c := range m.ToolCalls {
				name, _ := chat.ProviderToolName(c.Name)
				items = append(items, responses.ResponseInputItemParamOfFunctionCall(string(c.Arguments), c.ID, name))
			}
		case chat.RoleTool:
			content := m.Content
			if m.IsError {
				// Function call outputs have no error flag.
				content = "ERROR: " + content
			}
			out := responses.ResponseInputItemParamOfFunctionCallOutput(content)
			out.OfFunctionCallOutput.CallID = openai.String(m.ToolCallID)
			items = append(items, out)
		}
	}
	return items
}
