package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/sdk/chat"
)

// TestOfferSchemaWrapsNonObjectInput: what an agent offers for each kind
// of input schema, and what a call's arguments give the flow or tool.
func TestOfferSchemaWrapsNonObjectInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema, offered string
		args, input, refused  string
	}{
		{"object", `{"type":"object","properties":{"k":{"type":"string"}}}`, `{"type":"object","properties":{"k":{"type":"string"}}}`, `{"k":"v"}`, `{"k":"v"}`, ""},
		{"object or null", `{"type":["object","null"]}`, `{"type":["object","null"]}`, `{}`, `{}`, ""},
		{"no type", `{"properties":{"k":{}}}`, `{"properties":{"k":{}}}`, `{"k":1}`, `{"k":1}`, ""},
		{"none", ``, ``, `{"a":1}`, `{"a":1}`, ""},
		{"array", `{"type":"array","items":{"type":"integer"}}`,
			`{"additionalProperties":false,"properties":{"input":{"type":"array","items":{"type":"integer"}}},"required":["input"],"type":"object"}`,
			`{"input":[1,2]}`, `[1,2]`, ""},
		{"string", `{"type":"string"}`, `{"additionalProperties":false,"properties":{"input":{"type":"string"}},"required":["input"],"type":"object"}`,
			`{"input":"hi"}`, `"hi"`, ""},
		{"string or number", `{"type":["string","number"]}`, `{"additionalProperties":false,"properties":{"input":{"type":["string","number"]}},"required":["input"],"type":"object"}`,
			`{"input":3}`, `3`, ""},
		{"wrapper left out", `{"type":"array"}`, "", `{"numbers":[1]}`, "", "exactly that one property"},
		{"extra property", `{"type":"array"}`, "", `{"input":[1],"more":2}`, "", "exactly that one property"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, wrapped := offerSchema(json.RawMessage(tc.schema))
			if tc.offered != "" && string(got) != tc.offered {
				t.Errorf("offered %s, want %s", got, tc.offered)
			}
			if wrapped != strings.Contains(string(got), `"required":["input"]`) {
				t.Errorf("wrapped %v for %s", wrapped, got)
			}
			in, err := callInput(json.RawMessage(tc.schema), json.RawMessage(tc.args))
			switch {
			case tc.refused != "":
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Errorf("call %s: %v, want a refusal saying %q", tc.args, err, tc.refused)
				}
			case err != nil || string(in) != tc.input:
				t.Errorf("call %s gives %s (%v), want %s", tc.args, in, err, tc.input)
			}
		})
	}
}

// TestAgentToolWithArrayInput: a tool whose input is an array is offered
// wrapped, and the tool receives the array the model put under "input".
func TestAgentToolWithArrayInput(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "kv.many", `{"input":["a","b"]}`), tc("c2", "kv.many", `["a"]`)),
		answer("read", use(10, 1)),
	)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "batching", `{}`)
	if r := resultOf(t, run); r.Answer != "read" {
		t.Fatalf("result %+v", r)
	}
	reqs := m.asked()
	if len(reqs[0].Tools) != 1 || !strings.Contains(string(reqs[0].Tools[0].InputSchema), `"properties":{"input":{"type":"array","items":{"type":"string"}}}`) {
		t.Fatalf("offered %+v", reqs[0].Tools)
	}
	told := map[string]chat.Message{}
	for _, msg := range reqs[1].Messages {
		told[msg.ToolCallID] = msg
	}
	if told["c1"].Content != `{"got":["a","b"]}` || told["c1"].IsError {
		t.Errorf("c1 told %+v: want the tool's answer to the unwrapped array", told["c1"])
	}
	if !told["c2"].IsError || !strings.Contains(told["c2"].Content, CodeBadInput) {
		t.Errorf("c2 told %+v: want %s", told["c2"], CodeBadInput)
	}
	if n := m.called("kv.many"); n != 1 {
		t.Errorf("kv.many called %d times, want 1", n)
	}
}
