package host

import (
	"encoding/json"
	"testing"
)

// TestToolInfoFromManifest: registration sees a tool's description, and a
// tool whose input schema is the chat contract's request schema is a chat
// tool an agent may take its turns from; no other tool is.
func TestToolInfoFromManifest(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		schema string
		chat   bool
	}{
		{`{"$id": "urn:weir:chat:v1:request", "type": "object"}`, true},
		{`{"$id": "urn:weir:chat:v2:request", "type": "object"}`, false},
		{`{"type": "object"}`, false},
		{``, false},
		{`[1, 2]`, false},
	} {
		info := toolInfo(ToolManifest{Name: "m.chat", Description: "One turn.", Idempotent: true, Cost: 3, InputSchema: json.RawMessage(tt.schema)})
		if info.Chat != tt.chat || info.Description != "One turn." || info.Cost != 3 || !info.Idempotent {
			t.Errorf("schema %s: %+v, want chat %v with the manifest's description", tt.schema, info, tt.chat)
		}
	}
}
