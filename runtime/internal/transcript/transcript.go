// Package transcript is what a journaled agent turn adds to the
// conversation, as the model is told it (docs/design.md §9): the engine
// rebuilds each turn's request from it, and the trace export shows the
// same messages on a turn's span when content capture is on, so the two
// can never tell different stories.
package transcript

import (
	"encoding/json"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// Turn is what turn t adds to the conversation: its answer, the result of
// each call of it that ended, its correction and its note.
func Turn(t *store.AgentTurn) []chat.Message {
	return append([]chat.Message{Answer(t)}, After(t)...)
}

// Answer is turn t's answer, the assistant's message.
func Answer(t *store.AgentTurn) chat.Message {
	var m chat.Message
	_ = json.Unmarshal(t.Response, &m) // validated before it was journaled
	m.Role = chat.RoleAssistant
	return m
}

// After is what follows turn t's answer in the next turn's request: the
// result of each call that ended, the correction and the note.
func After(t *store.AgentTurn) []chat.Message {
	var msgs []chat.Message
	for _, c := range t.Calls {
		if c.Done {
			msgs = append(msgs, ToolMessage(c.ID, c))
		}
	}
	if t.Correction != "" {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: t.Correction})
	}
	if t.Note != "" {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: t.Note})
	}
	return msgs
}

// ToolMessage is a call's end as the model is told it: the result, or the
// error with its code (E_OUTCOME_UNKNOWN included, as exactly that). A
// call a person edited is told so, with the arguments it ran with, beside
// its result or error; a call a person answered in the tool's place is
// told their answer as its result.
func ToolMessage(id string, c store.AgentCall) chat.Message {
	if len(c.Edited) > 0 {
		told := map[string]any{"edited_arguments": c.Edited, "note": EditedNote}
		if c.Error != nil {
			told["error"] = map[string]string{"code": c.Error.Code, "message": c.Error.Message}
		} else {
			told["result"] = c.Result
		}
		return chat.Message{Role: chat.RoleTool, ToolCallID: id, IsError: c.Error != nil, Content: encode(told)}
	}
	if c.Error != nil {
		return chat.Message{Role: chat.RoleTool, ToolCallID: id, IsError: true,
			Content: encode(map[string]any{"error": map[string]string{"code": c.Error.Code, "message": c.Error.Message}})}
	}
	return chat.Message{Role: chat.RoleTool, ToolCallID: id, Content: string(c.Result)}
}

// EditedNote tells the model that a person changed a call's arguments
// before it ran.
const EditedNote = "A person edited the arguments of this call before it ran: it ran with edited_arguments, not the arguments you proposed."

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and raw JSON always encode
	}
	return string(b)
}
