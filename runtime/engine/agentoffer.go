package engine

import (
	"encoding/json"
	"fmt"
	"slices"
)

// wrappedInputKey is the one property under which an agent offers its
// model a flow or tool whose input is not an object.
const wrappedInputKey = "input"

// offerSchema is the input schema an agent offers its model for a flow or
// tool whose own input schema is schema. The chat contract and every
// provider take object arguments only, so an input of another type (an
// array, a string, a number) is offered wrapped, as
// {"type":"object","properties":{"input": SCHEMA},"required":["input"],
// "additionalProperties":false},
// and callInput unwraps the model's call. A schema that is not a JSON
// object is offered as none (any object), as before.
func offerSchema(schema json.RawMessage) (json.RawMessage, bool) {
	if !isJSONObject(schema) {
		return nil, false
	}
	if !wrapsInput(schema) {
		return schema, false
	}
	b, _ := json.Marshal(map[string]any{ // from JSON: marshals
		"type":                 "object",
		"properties":           map[string]json.RawMessage{wrappedInputKey: schema},
		"required":             []string{wrappedInputKey},
		"additionalProperties": false,
	})
	return b, true
}

// wrapsInput tells an input schema whose type leaves out object: the one
// offerSchema wraps. A schema without a type is offered as it is.
func wrapsInput(schema json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return false
	}
	switch t := s.Type.(type) {
	case string:
		return t != "object"
	case []any:
		return !slices.Contains(t, any("object"))
	}
	return false
}

// callInput is the input a model's call with args gives a flow or tool
// whose input schema is schema: args themselves, or, when offerSchema
// wrapped the schema, the value under "input". A wrapped call without it
// is refused, as the call's result the model is told.
func callInput(schema, args json.RawMessage) (json.RawMessage, error) {
	if !isJSONObject(schema) || !wrapsInput(schema) {
		return args, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return nil, fmt.Errorf("the arguments are not a JSON object")
	}
	in, ok := m[wrappedInputKey]
	if !ok || len(m) != 1 {
		return nil, fmt.Errorf("this input is offered as {%q: VALUE}: the arguments must carry exactly that one property", wrappedInputKey)
	}
	return in, nil
}
