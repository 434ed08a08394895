package telemetry

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/weirhq/weir/runtime/internal/transcript"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// MaxContentBytes bounds each text a content attribute carries (a prompt,
// an answer, a tool's result): a trace backend is no place for a whole
// document, and an attribute past its limits is dropped by some.
const MaxContentBytes = 16 << 10

// CutContent is s cut to MaxContentBytes on a rune boundary, marked "…"
// when cut.
func CutContent(s string) string {
	if len(s) <= MaxContentBytes {
		return s
	}
	cut := MaxContentBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// AddContent puts each model turn's messages on its span, as the GenAI
// conventions spell them (gen_ai.system_instructions, gen_ai.input.messages,
// gen_ai.output.messages): the input is what the request held that the
// turn before did not (the prompt for a visit's first turn, then the
// results of the calls the last turn asked for, a correction, a note),
// the output the model's answer. turns are the run's journaled turns. Only
// for an operator who turned content capture on: prompts and answers hold
// what users and tools said.
func AddContent(spans []Span, turns []*store.AgentTurn) {
	byKey := make(map[string]*store.AgentTurn, len(turns))
	first := map[string]*store.AgentPrompt{}
	for _, t := range turns {
		byKey[turnKey(t.Node, t.Visit, t.Turn)] = t
		if t.Prompt != nil {
			first[turnKey(t.Node, t.Visit, 0)] = t.Prompt
		}
	}
	for i := range spans {
		s := &spans[i]
		n, ok := strings.CutPrefix(s.Key.Call, "turn:")
		if !ok {
			continue
		}
		turn, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		t := byKey[turnKey(s.Key.Node, s.Key.Visit, turn)]
		if t == nil {
			continue
		}
		p := first[turnKey(s.Key.Node, s.Key.Visit, 0)]
		if p != nil && p.System != "" {
			s.Attrs = append(s.Attrs, attribute.String("gen_ai.system_instructions", encode([]part{{Type: "text", Content: p.System}})))
		}
		var in []chat.Message
		if turn == 1 && p != nil {
			in = []chat.Message{{Role: chat.RoleUser, Content: p.User}}
		} else if prev := byKey[turnKey(s.Key.Node, s.Key.Visit, turn-1)]; prev != nil {
			in = transcript.After(prev)
		}
		if len(in) > 0 {
			s.Attrs = append(s.Attrs, attribute.String("gen_ai.input.messages", encode(messages(in, ""))))
		}
		s.Attrs = append(s.Attrs, attribute.String("gen_ai.output.messages", encode(messages([]chat.Message{transcript.Answer(t)}, t.StopReason))))
	}
}

func turnKey(node string, visit, turn int) string {
	return node + "\x00" + strconv.Itoa(visit) + "\x00" + strconv.Itoa(turn)
}

// message and part are the GenAI conventions' message shape.
type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  any             `json:"response,omitempty"`
}

// messages are msgs in the conventions' shape, each text cut to
// MaxContentBytes; finish is the output's finish reason ("" for input).
func messages(msgs []chat.Message, finish string) []message {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		om := message{Role: string(m.Role), FinishReason: finish}
		switch {
		case m.Role == chat.RoleTool:
			var resp any = CutContent(m.Content)
			if len(m.Content) <= MaxContentBytes && json.Valid([]byte(m.Content)) {
				resp = json.RawMessage(m.Content) // a result is JSON: kept as such
			}
			om.Parts = append(om.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: resp})
		case m.Content != "":
			om.Parts = append(om.Parts, part{Type: "text", Content: CutContent(m.Content)})
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if len(args) > MaxContentBytes || !json.Valid(args) {
				args = nil
			}
			om.Parts = append(om.Parts, part{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: args})
		}
		if om.Parts == nil {
			om.Parts = []part{}
		}
		out = append(out, om)
	}
	return out
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "[]"
	}
	return string(b)
}
