package flows

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestValidationErrorsAreBounded: data failing a schema at a hundred
// thousand places, each failure quoting a long pattern, answers an error
// of a few kilobytes, built without gigabytes on the way — for a run's
// input (an API refusal, a child's input stored in its parent's record)
// and an agent's answer alike.
func TestValidationErrorsAreBounded(t *testing.T) {
	// Not parallel: it measures what validation allocates.
	pattern := "^" + strings.Repeat("x", MaxSchemaPatternBytes-2) + "$"
	for _, tt := range []struct {
		name   string
		schema string
		value  any
	}{
		{"a long pattern failed 60,000 times", fmt.Sprintf(`{"properties":{"a":{"type":"array","items":{"type":"string","pattern":%q}}}}`, pattern),
			map[string]any{"a": repeat("y", 60_000)}},
		{"a type failed 120,000 times", `{"properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
			map[string]any{"a": repeat(1, 120_000)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &Flow{Name: "child", Input: json.RawMessage(tt.schema)}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := f.ValidateInput(tt.value)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("the input passed")
			}
			if n := len(err.Error()); n > 8<<10 {
				t.Errorf("the error is %d bytes, want at most 8 KiB", n)
			}
			if !strings.Contains(err.Error(), " more") {
				t.Errorf("the error does not say how many more failures there were: %.300s", err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
				t.Errorf("validating allocated %d MiB", alloc>>20)
			}
			answer, _ := json.Marshal(tt.value)
			if err := ValidateAgentAnswer([]byte(tt.schema), answer); err == nil || len(err.Error()) > 8<<10 {
				t.Errorf("agent answer: %d bytes of error (%v)", len(fmt.Sprint(err)), err == nil)
			}
		})
	}
}

func repeat[T any](v T, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestStoredSchemaBombIsRefusedAtValidation: a schema stored before its
// bound existed is refused when compiled again, before any value is
// checked against it; so is data nested past MaxInstanceDepth.
func TestStoredSchemaBombIsRefusedAtValidation(t *testing.T) {
	t.Parallel()
	defs := map[string]any{"l40": map[string]any{"type": "integer"}}
	for i := range 40 {
		next := map[string]any{"$ref": fmt.Sprintf("#/$defs/l%d", i+1)}
		defs[fmt.Sprintf("l%d", i)] = map[string]any{"anyOf": []any{map[string]any{"allOf": []any{next, map[string]any{"type": "string"}}}, next}}
	}
	doc, _ := json.Marshal(map[string]any{"$defs": defs, "$ref": "#/$defs/l0"})
	f := &Flow{Name: "bomb", Input: doc}
	start := time.Now()
	err := f.ValidateInput(1)
	if err == nil || !strings.Contains(err.Error(), "more than 1024 subschemas") {
		t.Fatalf("validating against the stored bomb: %v", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("refusing took %s", d)
	}
	var deep any = 1
	for range MaxInstanceDepth + 1 {
		deep = []any{deep}
	}
	ok := &Flow{Name: "any", Input: json.RawMessage(`{"type":["array","integer"]}`)}
	if err := ok.ValidateInput(deep); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("data %d deep: %v", MaxInstanceDepth+1, err)
	}
}

// FuzzValidateInput: whatever schema a flow declares and whatever input
// a caller sends, compiling and validating ends quickly, never panics,
// and its error text stays bounded.
func FuzzValidateInput(f *testing.F) {
	f.Add(`{"anyOf":[{"allOf":[{"$ref":"#"},{"type":"string"}]},{"$ref":"#"}]}`, `1`)
	f.Add(`{"properties":{"a":{"type":"array","items":{"type":"string","pattern":"^x+$"}}}}`, `{"a":["y","y","y"]}`)
	f.Add(`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"}]},"c":{"type":"integer"}},"$ref":"#/$defs/a"}`, `"s"`)
	f.Add(`{"type":"object","properties":{"l":{"$ref":"#"},"r":{"$ref":"#"}}}`, `{"l":{"l":{}},"r":{}}`)
	f.Add(`{"not":{"not":{"$ref":"#"}}}`, `null`)
	f.Fuzz(func(t *testing.T, schema, input string) {
		if len(schema) > 4096 || len(input) > 4096 {
			return
		}
		var v any
		if json.Unmarshal([]byte(input), &v) != nil {
			return
		}
		fl := &Flow{Name: "fuzz", Input: json.RawMessage(schema)}
		start := time.Now()
		err := fl.ValidateInput(v)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("validation took %s", d)
		}
		if err != nil && len(err.Error()) > 16<<10 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
	})
}
