package main

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/sdk/chat"
)

// offer is one tool as a provider is offered it: its provider-side name
// and a schema that provider accepts.
type offer struct {
	name, description string
	schema            map[string]any
}

// schemaRules is what one provider kind refuses in a tool's input schema,
// from its published rules (testdata/README.md names them):
//
//   - OpenAI Chat Completions: the root must be of type "object" and must
//     not have oneOf, anyOf, allOf, enum or not ("schema must have type
//     'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top
//     level"), and every object schema, nested ones included, must list
//     its properties ("object schema missing properties").
//   - Anthropic Messages: input_schema.type is the constant "object" and
//     the root must not have oneOf, allOf or anyOf ("input_schema does not
//     support oneOf, allOf, or anyOf at the top level"); properties may be
//     absent.
//
// additionalProperties is left as the tool says: both accept it as a
// boolean or a schema outside strict mode, which weir does not ask for.
type schemaRules struct {
	// rootRefused are the keywords refused at the root.
	rootRefused []string
	// propertiesEverywhere: every object schema must carry properties,
	// not only the root.
	propertiesEverywhere bool
}

var rulesByKind = map[string]schemaRules{
	kindOpenAI: {rootRefused: []string{"oneOf", "anyOf", "allOf", "enum", "not"}, propertiesEverywhere: true},
	// The Responses API checks function parameters by the same rules.
	kindOpenAIResponses: {rootRefused: []string{"oneOf", "anyOf", "allOf", "enum", "not"}, propertiesEverywhere: true},
	kindAnthropic:       {rootRefused: []string{"oneOf", "anyOf", "allOf"}},
}

// Bounds of the normalisation: a schema nested deeper than
// maxSchemaDepth is left as it is below that depth (the provider judges
// it), and the constraints moved into a description take at most
// maxMovedConstraintBytes.
const (
	maxSchemaDepth          = 32
	maxMovedConstraintBytes = 1024
)

// offers makes the request's tools into what a provider of kind accepts:
// the one place tool schemas are normalised. A schema without a type is an
// object; an object schema gains the empty properties the provider wants;
// a root keyword the provider refuses is moved out of the schema into the
// tool's description, for the model to read (the tool still checks its
// input against the whole schema, so nothing is loosened where it is
// enforced). "$schema" is dropped: a draft the provider does not speak
// must not refuse the turn. A root schema of another type than object is
// refused: the chat contract takes object schemas (the engine wraps a
// non-object flow or tool input before offering it).
func offers(kind string, tools []chat.ToolDef) ([]offer, *modelError) {
	rules := rulesByKind[kind]
	out := make([]offer, 0, len(tools))
	for _, td := range tools {
		name, _ := chat.ProviderToolName(td.Name) // Validate checked it
		schema, moved, err := normalise(rules, td.InputSchema)
		if err != nil {
			return nil, failf(codeBadRequest, false, "tool %s: %v", td.Name, err)
		}
		desc := td.Description
		if moved != "" {
			if desc != "" {
				desc += "\n\n"
			}
			desc += "Its input must also match: " + moved
		}
		out = append(out, offer{name: name, description: desc, schema: schema})
	}
	return out, nil
}

// normalise applies rules to one input schema; moved is the JSON of the
// root keywords taken out, bounded, or "".
func normalise(rules schemaRules, raw json.RawMessage) (map[string]any, string, error) {
	m := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, "", fmt.Errorf("input_schema is not a JSON object")
		}
	}
	switch t := m["type"].(type) {
	case nil:
	case string:
		if t != "object" {
			return nil, "", fmt.Errorf("input_schema is of type %q; a model is offered object schemas only", escape.Cut(t, 40))
		}
	case []any:
		if !slices.Contains(t, any("object")) {
			return nil, "", fmt.Errorf("input_schema's types leave out \"object\"; a model is offered object schemas only")
		}
	default:
		return nil, "", fmt.Errorf("input_schema's type is not a string")
	}
	m["type"] = "object"
	delete(m, "$schema")
	taken := map[string]any{}
	for _, k := range rules.rootRefused {
		if v, ok := m[k]; ok {
			taken[k] = v
			delete(m, k)
		}
	}
	if _, ok := m["properties"].(map[string]any); !ok {
		m["properties"] = map[string]any{}
	}
	if rules.propertiesEverywhere {
		walkSchemas(m, 0, addProperties)
	}
	moved := ""
	if len(taken) > 0 {
		b, _ := json.Marshal(taken) // from JSON: marshals
		moved = escape.Cut(string(b), maxMovedConstraintBytes)
	}
	return m, moved, nil
}

// addProperties gives an object schema the properties it lacks.
func addProperties(s map[string]any) {
	if !isObjectSchema(s) {
		return
	}
	if _, ok := s["properties"].(map[string]any); !ok {
		s["properties"] = map[string]any{}
	}
}

// isObjectSchema tells a schema whose type is, or includes, object.
func isObjectSchema(s map[string]any) bool {
	switch t := s["type"].(type) {
	case string:
		return t == "object"
	case []any:
		return slices.Contains(t, any("object"))
	}
	return false
}

// Keywords whose values are subschemas, by shape.
var (
	schemaMapKeywords   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaOneKeywords   = []string{"items", "additionalProperties", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedProperties", "unevaluatedItems"}
	schemaArrayKeywords = []string{"items", "prefixItems", "allOf", "anyOf", "oneOf"}
)

// walkSchemas calls fn on s and every subschema below it, to
// maxSchemaDepth.
func walkSchemas(s map[string]any, depth int, fn func(map[string]any)) {
	if depth > maxSchemaDepth {
		return
	}
	fn(s)
	for _, k := range schemaMapKeywords {
		if sub, ok := s[k].(map[string]any); ok {
			for _, v := range sub {
				if c, ok := v.(map[string]any); ok {
					walkSchemas(c, depth+1, fn)
				}
			}
		}
	}
	for _, k := range schemaOneKeywords {
		if c, ok := s[k].(map[string]any); ok {
			walkSchemas(c, depth+1, fn)
		}
	}
	for _, k := range schemaArrayKeywords {
		if list, ok := s[k].([]any); ok {
			for _, e := range list {
				if c, ok := e.(map[string]any); ok {
					walkSchemas(c, depth+1, fn)
				}
			}
		}
	}
}
