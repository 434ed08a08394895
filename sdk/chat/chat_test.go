package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestProviderToolNameRoundTrip(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"notes.put":       "notes__put",
		"web.search":      "web__search",
		"mail.send_keyed": "mail__send_keyed",
		"http.post-x":     "http__post-x",
		"summarize":       "summarize",
		"a.b.c":           "a__b__c",
		"Flow-1":          "Flow-1",
	} {
		got, err := ProviderToolName(name)
		if err != nil || got != want {
			t.Errorf("ProviderToolName(%q) = %q, %v; want %q", name, got, err, want)
			continue
		}
		if back := UnmapToolName(got); back != name {
			t.Errorf("UnmapToolName(%q) = %q, want %q", got, back, name)
		}
	}
}

func TestProviderToolNameRefusals(t *testing.T) {
	t.Parallel()
	for name, why := range map[string]string{
		"":                             "empty",
		"a__b.c":                       `"__"`,
		"a_.b":                         "next to a '.'",
		"a._b":                         "next to a '.'",
		"a b.c":                        "outside",
		"notes.pút":                    "outside",
		"p." + strings.Repeat("x", 63): "more than 64",
		strings.Repeat("y", 65):        "more than 64",
		"x." + strings.Repeat("z", 62): "more than 64",
	} {
		_, err := ProviderToolName(name)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ProviderToolName(%q) = %v, want an error saying %q", name, err, why)
		}
	}
	// The longest name that fits.
	if _, err := ProviderToolName("p." + strings.Repeat("x", 61)); err != nil {
		t.Errorf("a name mapping to exactly 64 characters: %v", err)
	}
}

func TestCheckToolNames(t *testing.T) {
	t.Parallel()
	if err := CheckToolNames([]string{"web.search", "notes.put", "mail.send", "summarize"}); err != nil {
		t.Fatalf("good list refused: %v", err)
	}
	err := CheckToolNames([]string{"notes.put", "notes.put", "Notes.put", "bad name", "a__b"})
	if err == nil {
		t.Fatal("bad list accepted")
	}
	for _, want := range []string{`tool "notes.put" is listed twice`, `tools "notes.put" and "Notes.put" collide`, `"bad name"`, `"a__b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := func() Request {
		return Request{
			Model:  "small",
			System: "be brief",
			Messages: []Message{
				{Role: RoleUser, Content: "hi"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "notes.put", Arguments: json.RawMessage(`{"key":"k"}`)}}},
				{Role: RoleTool, ToolCallID: "c1", Content: "ok"},
			},
			Tools: []ToolDef{{Name: "notes.put", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		}
	}
	r := good()
	if err := r.Validate(); err != nil {
		t.Fatalf("good request refused: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(r *Request)
		want string
	}{
		"no model":        {func(r *Request) { r.Model = "" }, "model is empty"},
		"no messages":     {func(r *Request) { r.Messages = nil }, "no messages"},
		"bad role":        {func(r *Request) { r.Messages[0].Role = "robot" }, `unknown role "robot"`},
		"user tool calls": {func(r *Request) { r.Messages[0].ToolCalls = r.Messages[1].ToolCalls }, "carries only content"},
		"args not object": {func(r *Request) { r.Messages[1].ToolCalls[0].Arguments = json.RawMessage(`[1]`) }, "not a JSON object"},
		"call without id": {func(r *Request) { r.Messages[1].ToolCalls[0].ID = "" }, "needs an id"},
		"tool no call id": {func(r *Request) { r.Messages[2].ToolCallID = "" }, "needs the tool_call_id"},
		"negative max":    {func(r *Request) { r.MaxTokens = -1 }, "negative"},
		"bad tool name":   {func(r *Request) { r.Tools[0].Name = "a__b" }, `"a__b"`},
		"bad schema":      {func(r *Request) { r.Tools[0].InputSchema = json.RawMessage(`"x"`) }, "input_schema"},
		"bad output":      {func(r *Request) { r.OutputSchema = json.RawMessage(`3`) }, "output_schema"},
		"too many tools":  {func(r *Request) { r.Tools = make([]ToolDef, MaxTools+1) }, "limit of 128"},
	} {
		r := good()
		tc.edit(&r)
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// The JSON names cross the plugin wire; changing one breaks every chat
// tool built against the contract.
func TestWireNamesAreStable(t *testing.T) {
	t.Parallel()
	resp := Response{
		Message:    Message{Role: RoleAssistant, Content: "x", ToolCalls: []ToolCall{{ID: "1", Name: "a.b", Arguments: json.RawMessage(`{}`)}}},
		StopReason: StopToolUse,
		Usage:      Usage{InputTokens: 3, OutputTokens: 4},
		Model:      "m",
	}
	b, _ := json.Marshal(resp)
	want := `{"message":{"role":"assistant","content":"x","tool_calls":[{"id":"1","name":"a.b","arguments":{}}]},"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4},"model":"m"}`
	if string(b) != want {
		t.Fatalf("response JSON\n got %s\nwant %s", b, want)
	}
	req := Request{Model: "s", System: "y", Messages: []Message{{Role: RoleTool, ToolCallID: "1", Content: "no", IsError: true}},
		Tools: []ToolDef{{Name: "a.b", Description: "d", InputSchema: json.RawMessage(`{}`)}}, MaxTokens: 9, OutputSchema: json.RawMessage(`{}`)}
	b, _ = json.Marshal(req)
	want = `{"model":"s","system":"y","messages":[{"role":"tool","content":"no","tool_call_id":"1","is_error":true}],"tools":[{"name":"a.b","description":"d","input_schema":{}}],"max_tokens":9,"output_schema":{}}`
	if string(b) != want {
		t.Fatalf("request JSON\n got %s\nwant %s", b, want)
	}
}

func TestSchemasAndContractMarker(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]string{"request": RequestSchema, "response": ResponseSchema} {
		if !json.Valid([]byte(s)) {
			t.Errorf("%s schema is not JSON", name)
		}
	}
	if !SpeaksContract(RequestSchema) {
		t.Error("RequestSchema does not declare the contract")
	}
	for _, s := range []string{"", `{"type":"object"}`, ResponseSchema, `{"$id":"urn:other"}`, `not json`} {
		if SpeaksContract(s) {
			t.Errorf("SpeaksContract(%q) = true", s)
		}
	}
}

func TestEstimateInputTokens(t *testing.T) {
	t.Parallel()
	r := Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: strings.Repeat("a", 3000)}}}
	got := EstimateInputTokens(&r)
	b, _ := json.Marshal(r)
	if got*3 < int64(len(b)) || got < 1000 {
		t.Fatalf("estimate %d for %d bytes is not a bound of bytes/3", got, len(b))
	}
}
