package front

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/weirhq/weir/flows"
)

func TestConversions(t *testing.T) {
	t.Parallel()
	type payload struct {
		A int      `json:"a"`
		B []string `json:"b"`
	}
	tests := []struct {
		in   any
		want any
	}{
		{nil, nil},
		{true, true},
		{"s", "s"},
		{7, int64(7)},
		{int64(-3), int64(-3)},
		{2.0, int64(2)},
		{2.5, 2.5},
		{json.Number("12"), int64(12)},
		{json.Number("1.5"), 1.5},
		{[]any{1.0, "x"}, []any{int64(1), "x"}},
		{map[string]any{"k": map[string]any{"n": nil}}, map[string]any{"k": map[string]any{"n": nil}}},
		{payload{A: 1, B: []string{"x"}}, map[string]any{"a": int64(1), "b": []any{"x"}}},
		{json.RawMessage(`{"z":[1,2]}`), map[string]any{"z": []any{int64(1), int64(2)}}},
	}
	for _, tt := range tests {
		sv, err := ToStarlark(tt.in)
		if err != nil {
			t.Errorf("%#v: %v", tt.in, err)
			continue
		}
		got, err := FromStarlark(sv)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%#v: round trip gave %#v, %v; want %#v", tt.in, got, err, tt.want)
		}
	}

	deep := any("leaf")
	for range flows.MaxValueDepth + 2 {
		deep = []any{deep}
	}
	if _, err := ToStarlark(deep); err == nil {
		t.Error("a value nested deeper than the limit was converted")
	}
	if _, err := ToStarlark(make(chan int)); err == nil {
		t.Error("a channel was converted")
	}
}
