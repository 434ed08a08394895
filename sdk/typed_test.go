package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/sdktest"
)

type Base struct {
	ID string `json:"id"`
}

type derived struct {
	Base
	Name    string            `json:"name"`
	Count   int               `json:"count,omitempty"`
	Ratio   float64           `json:"ratio,omitzero"`
	Tags    []string          `json:"tags,omitempty"`
	Labels  map[string]uint8  `json:"labels,omitempty"`
	When    time.Time         `json:"when,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Any     any               `json:"any,omitempty"`
	Pair    [2]bool           `json:"pair,omitempty"`
	Blob    []byte            `json:"blob,omitempty"`
	Big     int64             `json:"big,string,omitempty"`
	Ptr     *struct{ X bool } `json:"ptr,omitempty"`
	Skipped string            `json:"-"`
	//lint:ignore U1000 present so the derivation is seen to skip unexported fields
	hidden string
	Plain  bool
}

func echoRun[T any](_ context.Context, _ *sdk.Call, in T) (T, error) { return in, nil }

func TestNewToolDerivesTheInputSchema(t *testing.T) {
	t.Parallel()
	tool := sdk.NewTool("t.derive", echoRun[derived])
	if err := sdk.CheckTools(tool); err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{` +
		`"Plain":{"type":"boolean"},` +
		`"any":{},` +
		`"big":{"type":"string"},` +
		`"blob":{"contentEncoding":"base64","type":"string"},` +
		`"count":{"type":"integer"},` +
		`"id":{"type":"string"},` +
		`"labels":{"additionalProperties":{"minimum":0,"type":"integer"},"type":"object"},` +
		`"name":{"type":"string"},` +
		`"pair":{"items":{"type":"boolean"},"maxItems":2,"minItems":2,"type":"array"},` +
		`"ptr":{"additionalProperties":false,"properties":{"X":{"type":"boolean"}},"required":["X"],"type":"object"},` +
		`"ratio":{"type":"number"},` +
		`"raw":{},` +
		`"tags":{"items":{"type":"string"},"type":"array"},` +
		`"when":{"format":"date-time","type":"string"}` +
		`},"required":["id","name","Plain"],"type":"object"}`
	if tool.InputSchema != want {
		t.Fatalf("derived schema\n%s\nwant\n%s", tool.InputSchema, want)
	}
	if tool.OutputSchema != want {
		t.Fatalf("derived output schema %s", tool.OutputSchema)
	}
}

func TestNewToolDecodesAndValidates(t *testing.T) {
	t.Parallel()
	type in struct {
		City  string `json:"city"`
		Days  int    `json:"days,omitempty"`
		Units string `json:"units,omitempty"`
	}
	type out struct {
		Summary string `json:"summary"`
	}
	tool := sdk.NewTool("weather.forecast", func(ctx context.Context, call *sdk.Call, in in) (out, error) {
		if in.Days == 0 {
			in.Days = 1
		}
		return out{Summary: strings.Repeat("sun ", in.Days) + "in " + in.City}, nil
	}, sdk.Description("Forecast."), sdk.Idempotent(), sdk.Cost(2))
	if tool.Description != "Forecast." || !tool.Idempotent || tool.Cost != 2 {
		t.Fatalf("options not applied: %+v", tool)
	}
	res, err := sdktest.Call(context.Background(), tool, sdktest.Request{Input: `{"city":"Oslo","days":2}`})
	if err != nil || string(res.Output) != `{"summary":"sun sun in Oslo"}` {
		t.Fatalf("got %v, %v", res, err)
	}
	for _, bad := range []string{`{}`, `{"city":"Oslo","dayz":2}`, `{"city":3}`, `{"city":"Oslo","days":1.5}`} {
		_, err := sdktest.Call(context.Background(), tool, sdktest.Request{Input: bad})
		var e *sdktest.Error
		if !errors.As(err, &e) || e.Kind != sdktest.KindSchema {
			t.Errorf("input %s: got %v, want a schema refusal", bad, err)
		}
	}
}

func TestNewToolChecksADeclaredSchema(t *testing.T) {
	t.Parallel()
	type in struct {
		Key  string `json:"key"`
		Text string `json:"text,omitempty"`
		N    int    `json:"n,omitempty"`
	}
	run := echoRun[in]
	ok := `{"type":"object","required":["key"],"properties":{"key":{"type":"string"},"text":{"type":"string"},"n":{"type":"integer"}}}`
	if err := sdk.CheckTools(sdk.NewTool("t.ok", run, sdk.InputSchema(ok))); err != nil {
		t.Fatalf("a matching schema refused: %v", err)
	}
	tests := []struct{ name, schema, want string }{
		{"unknown property", `{"type":"object","required":["key"],"properties":{"key":{"type":"string"},"txt":{"type":"string"}}}`, `property "txt" has no field`},
		{"required field not required", `{"type":"object","properties":{"key":{"type":"string"}}}`, `field Key (JSON "key") has no omitempty`},
		{"unknown required", `{"type":"object","required":["key","other"]}`, `required property "other" has no field`},
		{"type mismatch", `{"type":"object","required":["key"],"properties":{"key":{"type":"integer"}}}`, `property "key" (field Key) is declared "integer" but decodes into a Go string`},
		{"number into an int", `{"type":"object","required":["key"],"properties":{"n":{"type":"number"}}}`, `declared "number" but decodes into a Go integer`},
		{"not an object", `{"type":"array"}`, `the input is declared "array" but decodes into a Go object`},
		{"not JSON", `{`, `not a JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := sdk.NewTool("t.bad", run, sdk.InputSchema(tt.schema))
			err := sdk.CheckTools(tool)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			// A call of a wrongly declared tool fails with the same mistake.
			if _, err := tool.Run(context.Background(), &sdk.Call{Tool: "t.bad", Input: json.RawMessage(`{"key":"k"}`)}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("call got %v", err)
			}
		})
	}
}

func TestNewToolRefusesTypesJSONCannotCarry(t *testing.T) {
	t.Parallel()
	type recursive struct {
		Next *recursive `json:"next,omitempty"`
	}
	type withFunc struct {
		F func() `json:"f"`
	}
	type clashA struct {
		X string
	}
	type clashB struct {
		B string `json:"X"`
	}
	type clash struct {
		clashA
		clashB
	}
	tests := []struct {
		name string
		tool sdk.Tool
		want string
	}{
		{"recursive", sdk.NewTool("t.r", echoRun[recursive]), "contains itself"},
		{"func field", sdk.NewTool("t.f", echoRun[withFunc]), "field F: type func() is not one JSON can carry"},
		{"chan input", sdk.NewTool("t.c", echoRun[chan int]), "type chan int is not one JSON can carry"},
		{"map key", sdk.NewTool("t.m", echoRun[map[bool]int]), "map key type bool"},
		{"clashing keys", sdk.NewTool("t.k", echoRun[clash]), `fields clashA.X and clashB.B both decode the JSON key "X"`},
		{"nil fn", sdk.NewTool[int, int]("t.n", nil), "fn is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := sdk.CheckTools(tt.tool)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewToolAnyInputAndResultOutput(t *testing.T) {
	t.Parallel()
	tool := sdk.NewTool("t.any", func(ctx context.Context, call *sdk.Call, in map[string]any) (sdk.Result, error) {
		return sdk.Result{Output: len(in), Cost: 4}, nil
	})
	if tool.OutputSchema != "" {
		t.Fatalf("an output schema derived from Result: %s", tool.OutputSchema)
	}
	res, err := sdktest.Call(context.Background(), tool, sdktest.Request{Input: `{"a":1,"b":2}`})
	if err != nil || string(res.Output) != "2" || res.Cost != 4 {
		t.Fatalf("got %+v, %v", res, err)
	}
}
