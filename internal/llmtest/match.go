package llmtest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// NodeHeader is the header that carries the id of the agent node asking
// (weir's llm plugin sets it), which a step's Node matches.
const NodeHeader = "X-Weir-Node"

// seenRequest is what the match keys look at in one request.
type seenRequest struct {
	body     string
	lastUser string
	system   string
	node     string
}

// fits tells whether st is meant for the request r: every match key set
// fits.
func (st *Step) fits(r seenRequest) bool {
	return (st.Match == "" || strings.Contains(r.body, st.Match)) &&
		(st.MatchLastUser == "" || strings.Contains(r.lastUser, st.MatchLastUser)) &&
		(st.MatchSystem == "" || strings.Contains(r.system, st.MatchSystem)) &&
		(st.Node == "" || r.node == st.Node)
}

// wireMessage is a message of either API: content is a string or a list
// of typed blocks.
type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type wireBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// readRequest reads the parts of a request the match keys need. A body it
// cannot read as either API's request leaves them empty: only match then
// fits it.
func readRequest(api string, h http.Header, body []byte) seenRequest {
	r := seenRequest{body: string(body), node: h.Get(NodeHeader)}
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []wireMessage   `json:"messages"`
		// The Responses API's: the system prompt, and the conversation
		// (a string, or items of which messages have a role).
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &req) != nil {
		return r
	}
	var system []string
	if api == apiAnthropic && len(req.System) > 0 {
		if t := texts(req.System); t != "" {
			system = append(system, t)
		}
	}
	msgs := req.Messages
	if api == apiResponses {
		if req.Instructions != "" {
			system = append(system, req.Instructions)
		}
		var s string
		if json.Unmarshal(req.Input, &s) == nil {
			msgs = []wireMessage{{Role: "user", Content: req.Input}}
		} else {
			_ = json.Unmarshal(req.Input, &msgs) // items without a role are tool calls and outputs
		}
	}
	for _, m := range msgs {
		switch m.Role {
		case "system", "developer":
			if t := texts(m.Content); t != "" {
				system = append(system, t)
			}
		case "user":
			if t := texts(m.Content); t != "" {
				r.lastUser = t
			}
		}
	}
	r.system = strings.Join(system, "\n\n")
	return r
}

// texts is the text of content: the string itself, or its text blocks
// joined (text, or the Responses API's input_text; tool results and
// images are not text).
func texts(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []wireBlock
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if (b.Type == "text" || b.Type == "input_text") && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
