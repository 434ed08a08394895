package flows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// wideSchema is an array schema whose items are checked against n
// alternatives each, all of which the number 1 fails.
func wideSchema(n int) string {
	br := make([]string, n)
	for i := range br {
		br[i] = fmt.Sprintf(`{"type":"string","minLength":%d}`, i)
	}
	return `{"type":"array","items":{"anyOf":[` + strings.Join(br, ",") + `]}}`
}

// ones is a JSON array of n ones.
func ones(n int) string { return "[" + strings.Repeat("1,", n-1) + "1]" }

// TestValidationWork: the estimate of a validation's work grows with the
// schema's fan-out, its patterns and the data's size, and decides what
// the daemon validates in its own process: a usual input stays there, a
// wide schema against many items does not.
func TestValidationWork(t *testing.T) {
	t.Parallel()
	pattern := `{"type":"string","pattern":"^` + strings.Repeat("a", MaxSchemaPatternBytes-2) + `$"}`
	for _, tt := range []struct {
		name      string
		schema    string
		dataBytes int
		inProcess bool
	}{
		{"an object of three fields, 2 KB", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"array","items":{"type":"string"}}}}`, 2 << 10, true},
		{"no constraint, 100 KB", `{}`, 100 << 10, true},
		{"1,000 alternatives, one item", wideSchema(1000), len(ones(1)), true},
		{"1,000 alternatives, 100 items", wideSchema(1000), len(ones(100)), true},
		{"1,000 alternatives, 20,000 items", wideSchema(1000), len(ones(20_000)), false},
		{"a 4 KB pattern, 10 KB", pattern, 10 << 10, true},
		{"a 4 KB pattern, 256 KB", pattern, 256 << 10, false},
		{"a schema that does not compile", `{"type": 7}`, 1 << 20, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := ValidationWork([]byte(tt.schema), tt.dataBytes)
			if got := w <= MaxInProcessWork; got != tt.inProcess {
				t.Fatalf("work %d against MaxInProcessWork %d: in process %v, want %v", w, MaxInProcessWork, got, tt.inProcess)
			}
			f := &Flow{Name: "f", Input: json.RawMessage(tt.schema)}
			if fw := f.InputWork(tt.dataBytes); fw != w {
				t.Fatalf("Flow.InputWork %d, ValidationWork %d: one estimate, two answers", fw, w)
			}
		})
	}
}

// TestValidateJSON: the data's refusal is an *InvalidValueError with a
// bounded text; a schema that does not compile is not (it is no fault of
// the data); accepted data is nil.
func TestValidateJSON(t *testing.T) {
	t.Parallel()
	if err := ValidateJSON([]byte(wideSchema(10)), []byte(`["abcdefghijk"]`)); err != nil {
		t.Fatalf("valid data: %v", err)
	}
	err := ValidateJSON([]byte(wideSchema(10)), []byte(ones(500)))
	if !IsInvalidValue(err) || len(err.Error()) > 8<<10 {
		t.Fatalf("500 failing items: %v (%d bytes), want a bounded InvalidValueError", err, len(err.Error()))
	}
	if err := ValidateJSON([]byte(`{}`), []byte(`{`)); !IsInvalidValue(err) {
		t.Fatalf("data that is not JSON: %v, want an InvalidValueError", err)
	}
	if err := ValidateJSON([]byte(`{"type": 7}`), []byte(`1`)); err == nil || IsInvalidValue(err) {
		t.Fatalf("a schema that does not compile: %v, want an error that is not the data's", err)
	}
	if err := ValidateAgentAnswer([]byte(`{"type":"object"}`), []byte(`sure!`)); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("an answer that is not JSON: %v", err)
	}
}
