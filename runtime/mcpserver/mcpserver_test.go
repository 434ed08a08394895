package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestInputSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flow, want string
		wrapped    bool
	}{
		{``, `{"properties":{"weir_request_id":{"type":"string","description":"your business id for this call: the same id returns the same run"}},"type":"object"}`, false},
		{`{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false}`,
			`{"additionalProperties":false,"properties":{"q":{"type":"string"},"weir_request_id":{"type":"string","description":"your business id for this call: the same id returns the same run"}},"type":"object"}`, false},
		{`{"type":"array"}`, `{"properties":{"input":{"type":"array"},"weir_request_id":{"type":"string","description":"your business id for this call: the same id returns the same run"}},"required":["input"],"type":"object"}`, true},
	}
	for _, tt := range tests {
		got, wrapped := inputSchema(json.RawMessage(tt.flow))
		if string(got) != tt.want || wrapped != tt.wrapped {
			t.Errorf("inputSchema(%s) = %s, %v\nwant %s, %v", tt.flow, got, wrapped, tt.want, tt.wrapped)
		}
	}
}

func TestRunID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		uri, suffix, want string
		ok                bool
	}{
		{"weir://runs/run_1", "", "run_1", true},
		{"weir://runs/run_1/timeline", "/timeline", "run_1", true},
		{"weir://runs/run_1/timeline", "", "", false},
		{"weir://runs/", "", "", false},
		{"weir://runs/a/b/timeline", "/timeline", "", false},
		{"file:///etc/passwd", "", "", false},
	}
	for _, tt := range tests {
		got, ok := runID(tt.uri, tt.suffix)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("runID(%q, %q) = %q, %v", tt.uri, tt.suffix, got, ok)
		}
	}
}
