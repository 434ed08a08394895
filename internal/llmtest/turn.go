package llmtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// argumentPiece is how many bytes of a tool call's arguments one streamed
// delta carries.
const argumentPiece = 16

// turn is one scripted answer, split into the deltas a stream sends.
type turn struct {
	step    Step
	id      string
	model   string
	text    []string   // text deltas
	calls   []ToolCall // with ids filled in
	args    [][]string // argument deltas per call
	stop    string     // end_turn, tool_use or max_tokens
	usage   Usage
	created int64
}

func newTurn(step Step, seq int, model string, requestBytes int64) *turn {
	t := &turn{step: step, id: fmt.Sprintf("llmtest-%d", seq), model: model, created: time.Now().Unix()}
	if step.Text != "" {
		t.text = strings.SplitAfter(step.Text, " ")
	}
	out := int64(len(t.text))
	for i, c := range step.ToolCalls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d_%d", seq, i)
		}
		raw := c.RawArguments
		if raw == "" {
			raw = "{}"
			if len(c.Arguments) > 0 {
				raw = string(c.Arguments)
			}
		}
		var pieces []string
		for len(raw) > argumentPiece {
			pieces = append(pieces, raw[:argumentPiece])
			raw = raw[argumentPiece:]
		}
		pieces = append(pieces, raw)
		t.calls = append(t.calls, c)
		t.args = append(t.args, pieces)
		out += 1 + int64(len(pieces))
	}
	t.stop = step.StopReason
	if t.stop == "" {
		t.stop = "end_turn"
		if len(t.calls) > 0 {
			t.stop = "tool_use"
		}
	}
	if step.Usage != nil {
		t.usage = *step.Usage
	} else {
		t.usage = Usage{InputTokens: (requestBytes + 3) / 4, OutputTokens: max(out, 1)}
	}
	return t
}

// fullArguments returns call i's arguments as sent.
func (t *turn) fullArguments(i int) string { return strings.Join(t.args[i], "") }

func (t *turn) openAIFinish() string {
	switch t.stop {
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	}
	return "stop"
}

// whole is the answer without streaming.
func (t *turn) whole(api string) any {
	if api == apiResponses {
		return t.responsesObject()
	}
	if api == apiOpenAI {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		if t.step.Text != "" {
			msg["content"] = t.step.Text
		}
		if len(t.calls) > 0 {
			var calls []any
			for i, c := range t.calls {
				calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": t.fullArguments(i)}})
			}
			msg["tool_calls"] = calls
		}
		resp := map[string]any{
			"id": t.id, "object": "chat.completion", "created": t.created, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": t.openAIFinish(), "logprobs": nil}},
		}
		if !t.step.NoUsage {
			resp["usage"] = t.openAIUsage()
		}
		return resp
	}
	content := []any{}
	if t.step.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": t.step.Text})
	}
	for i, c := range t.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": json.RawMessage(t.fullArguments(i))})
	}
	return map[string]any{
		"id": t.id, "type": "message", "role": "assistant", "model": t.model, "content": content,
		"stop_reason": t.stop, "stop_sequence": nil, "usage": t.anthropicUsage(),
	}
}

func (t *turn) openAIUsage() map[string]any {
	return map[string]any{"prompt_tokens": t.usage.InputTokens, "completion_tokens": t.usage.OutputTokens, "total_tokens": t.usage.InputTokens + t.usage.OutputTokens}
}

func (t *turn) anthropicUsage() map[string]any {
	if t.step.NoUsage {
		return map[string]any{"input_tokens": 0, "output_tokens": 0}
	}
	return map[string]any{"input_tokens": t.usage.InputTokens, "output_tokens": t.usage.OutputTokens}
}

// sseWriter writes server-sent events and flushes each.
type sseWriter struct {
	w interface {
		Write([]byte) (int, error)
	}
	flush  func()
	ctx    <-chan struct{}
	deltas int
	broken bool
}

func (s *sseWriter) event(name string, data any) {
	if s.broken {
		return
	}
	b, ok := data.([]byte)
	if !ok {
		b, _ = json.Marshal(data)
	}
	var err error
	if name != "" {
		_, err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	} else {
		_, err = fmt.Fprintf(s.w, "data: %s\n\n", b)
	}
	if err != nil {
		s.broken = true
		return
	}
	if s.flush != nil {
		s.flush()
	}
}

// delta sends one delta event and plays the step's disruption after the
// first: it reports false when the stream must end there.
func (s *sseWriter) delta(t *turn, name string, data any) bool {
	s.event(name, data)
	s.deltas++
	if s.deltas != 1 {
		return !s.broken
	}
	if t.step.Hold != nil {
		select {
		case <-t.step.Hold:
		case <-s.ctx:
			return false
		}
	}
	if t.step.Malformed {
		s.event(name, []byte(`{"oops": not json`))
		return false
	}
	return !t.step.CutShort && !s.broken
}

func (t *turn) streamOpenAI(s *sseWriter, includeUsage bool) {
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{
			"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
		if includeUsage {
			c["usage"] = nil
		}
		return c
	}
	s.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, p := range t.text {
		if !s.delta(t, "", chunk(map[string]any{"content": p}, nil)) {
			return
		}
	}
	for i, c := range t.calls {
		start := map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}
		if !s.delta(t, "", chunk(start, nil)) {
			return
		}
		for _, p := range t.args[i] {
			d := map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}
			if !s.delta(t, "", chunk(d, nil)) {
				return
			}
		}
	}
	if s.deltas == 0 && (t.step.Malformed || t.step.CutShort || t.step.Hold != nil) {
		// An empty answer still plays its disruption.
		if !s.delta(t, "", chunk(map[string]any{"content": ""}, nil)) {
			return
		}
	}
	s.event("", chunk(map[string]any{}, t.openAIFinish()))
	if includeUsage && !t.step.NoUsage {
		s.event("", map[string]any{"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model, "choices": []any{}, "usage": t.openAIUsage()})
	}
	s.event("", []byte("[DONE]"))
}

func (t *turn) streamAnthropic(s *sseWriter) {
	start := t.anthropicUsage()
	start["output_tokens"] = 1
	if t.step.NoUsage {
		start["output_tokens"] = 0
	}
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": t.id, "type": "message", "role": "assistant", "content": []any{}, "model": t.model,
		"stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	s.event("ping", map[string]any{"type": "ping"})
	index := 0
	if len(t.text) > 0 || (len(t.calls) == 0 && (t.step.Malformed || t.step.CutShort || t.step.Hold != nil)) {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		pieces := t.text
		if len(pieces) == 0 {
			pieces = []string{""}
		}
		for _, p := range pieces {
			if !s.delta(t, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": p}}) {
				return
			}
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, c := range t.calls {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		for _, p := range t.args[i] {
			if !s.delta(t, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}}) {
				return
			}
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": t.stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": t.anthropicUsage()["output_tokens"]}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

// responsesItems are the output items of a Responses API answer: a
// message with the text, then one function call per tool call.
func (t *turn) responsesItems() []any {
	var items []any
	if t.step.Text != "" {
		items = append(items, map[string]any{"type": "message", "id": "msg_" + t.id, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": t.step.Text, "annotations": []any{}}}})
	}
	for i, c := range t.calls {
		items = append(items, t.responsesCall(i, c, t.fullArguments(i), "completed"))
	}
	return items
}

func (t *turn) responsesCall(i int, c ToolCall, args, status string) map[string]any {
	return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", t.id, i), "call_id": c.ID, "name": c.Name, "arguments": args, "status": status}
}

// responsesObject is the response object as the Responses API ends a
// turn: completed, or incomplete at max_output_tokens.
func (t *turn) responsesObject() map[string]any {
	r := map[string]any{"id": "resp_" + t.id, "object": "response", "created_at": t.created, "model": t.model,
		"status": "completed", "output": t.responsesItems(), "error": nil, "incomplete_details": nil}
	if t.stop == "max_tokens" {
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	if !t.step.NoUsage {
		r["usage"] = map[string]any{"input_tokens": t.usage.InputTokens, "output_tokens": t.usage.OutputTokens,
			"total_tokens":         t.usage.InputTokens + t.usage.OutputTokens,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	}
	return r
}

func (t *turn) streamResponses(s *sseWriter) {
	seq := 0
	ev := func(typ string, data map[string]any) map[string]any {
		data["type"] = typ
		data["sequence_number"] = seq
		seq++
		return data
	}
	send := func(typ string, data map[string]any) { s.event(typ, ev(typ, data)) }
	delta := func(typ string, data map[string]any) bool { return s.delta(t, typ, ev(typ, data)) }
	head := map[string]any{"id": "resp_" + t.id, "object": "response", "created_at": t.created, "model": t.model, "status": "in_progress", "output": []any{}}
	send("response.created", map[string]any{"response": head})
	out := 0
	if len(t.text) > 0 || (len(t.calls) == 0 && (t.step.Malformed || t.step.CutShort || t.step.Hold != nil)) {
		id := "msg_" + t.id
		send("response.output_item.added", map[string]any{"output_index": out, "item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}})
		pieces := t.text
		if len(pieces) == 0 {
			pieces = []string{""}
		}
		for _, p := range pieces {
			if !delta("response.output_text.delta", map[string]any{"item_id": id, "output_index": out, "content_index": 0, "delta": p}) {
				return
			}
		}
		send("response.output_text.done", map[string]any{"item_id": id, "output_index": out, "content_index": 0, "text": t.step.Text})
		send("response.output_item.done", map[string]any{"output_index": out, "item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": t.step.Text, "annotations": []any{}}}}})
		out++
	}
	for i, c := range t.calls {
		item := t.responsesCall(i, c, "", "in_progress")
		send("response.output_item.added", map[string]any{"output_index": out, "item": item})
		for _, p := range t.args[i] {
			if !delta("response.function_call_arguments.delta", map[string]any{"item_id": item["id"], "output_index": out, "delta": p}) {
				return
			}
		}
		send("response.function_call_arguments.done", map[string]any{"item_id": item["id"], "output_index": out, "arguments": t.fullArguments(i)})
		send("response.output_item.done", map[string]any{"output_index": out, "item": t.responsesCall(i, c, t.fullArguments(i), "completed")})
		out++
	}
	end := "response.completed"
	if t.stop == "max_tokens" {
		end = "response.incomplete"
	}
	send(end, map[string]any{"response": t.responsesObject()})
}
