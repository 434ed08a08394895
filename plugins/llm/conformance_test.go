package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weirhq/weir/internal/llmtest"
)

// The providers' published request schemas (testdata/README.md), compiled
// once.
var (
	requestSchemasOnce sync.Once
	requestSchemas     map[string]*jsonschema.Schema
	requestSchemasErr  error
)

func requestSchema(t testing.TB, api string) *jsonschema.Schema {
	t.Helper()
	requestSchemasOnce.Do(func() {
		requestSchemas = map[string]*jsonschema.Schema{}
		for api, file := range map[string]string{kindOpenAI: "openai-chat-completions.json", kindOpenAIResponses: "openai-responses.json", kindAnthropic: "anthropic-messages.json"} {
			s, err := compileFile(filepath.Join("testdata", file))
			if err != nil {
				requestSchemasErr = fmt.Errorf("%s: %w", file, err)
				return
			}
			requestSchemas[api] = s
		}
	})
	if requestSchemasErr != nil {
		t.Fatal(requestSchemasErr)
	}
	return requestSchemas[api]
}

func compileFile(path string) (*jsonschema.Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return compileSchemaDoc(path, b)
}

func compileSchemaDoc(loc string, b []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(loc, v); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// checkConforms fails t for every request srv received that the
// provider's published request schema, its documented headers or its
// published tool schema rules refuse: what a real provider would have
// answered with a 400 for the whole turn.
func checkConforms(t testing.TB, srv *llmtest.Server) {
	t.Helper()
	for i, r := range srv.Requests() {
		if err := conforms(t, r); err != nil {
			t.Errorf("request %d to %s would be refused: %v\n%s", i, r.API, err, r.Body)
		}
	}
}

func conforms(t testing.TB, r llmtest.Request) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
	if err != nil {
		return fmt.Errorf("the body is not JSON: %v", err)
	}
	if err := requestSchema(t, r.API).Validate(v); err != nil {
		return err
	}
	if r.API == kindAnthropic {
		if got := r.Header.Get("Anthropic-Version"); got != defaultAnthropicVersion {
			return fmt.Errorf("anthropic-version %q, want the documented %s", got, defaultAnthropicVersion)
		}
		if r.Header.Get("X-Api-Key") != "" && r.Header.Get("Authorization") != "" {
			return fmt.Errorf("both x-api-key and Authorization sent")
		}
	}
	var body struct {
		Tools []struct {
			Function struct {
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
			} `json:"function"`
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return err
	}
	for _, tool := range body.Tools {
		name, schema := tool.Function.Name, tool.Function.Parameters
		switch r.API {
		case kindAnthropic:
			name, schema = tool.Name, tool.InputSchema
		case kindOpenAIResponses:
			name, schema = tool.Name, tool.Parameters
		}
		if schema == nil {
			continue // OpenAI: no parameters is an empty parameter list
		}
		if why := providerRulesRefuse(r.API, schema); why != "" {
			return fmt.Errorf("tool %s: %s", name, why)
		}
		// Each provider takes a tool schema that is itself valid JSON
		// Schema (Anthropic: draft 2020-12).
		b, _ := json.Marshal(schema)
		if _, err := compileSchemaDoc("tool.json", b); err != nil {
			return fmt.Errorf("tool %s: not a valid JSON schema: %v", name, err)
		}
	}
	return nil
}

// providerRulesRefuse is what a provider says of a tool schema its
// published rules refuse (testdata/README.md), or "". It is written from
// the providers' rules and errors, apart from the plugin's normalisation,
// so that the one can catch the other.
func providerRulesRefuse(api string, schema map[string]any) string {
	if api == kindOpenAIResponses {
		api = kindOpenAI // function parameters follow the same rules
	}
	if schema["type"] != "object" {
		if api == kindOpenAI {
			return fmt.Sprintf(`schema must be a JSON Schema of 'type: "object"', got 'type: %v'`, schema["type"])
		}
		return "input_schema.type: must be \"object\""
	}
	top := []string{"oneOf", "allOf", "anyOf"}
	if api == kindOpenAI {
		top = append(top, "enum", "not")
	}
	for _, k := range top {
		if _, ok := schema[k]; ok {
			if api == kindOpenAI {
				return "schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level"
			}
			return "input_schema does not support oneOf, allOf, or anyOf at the top level"
		}
	}
	if api != kindOpenAI {
		return ""
	}
	var missing []string
	var walk func(s map[string]any, at string)
	walk = func(s map[string]any, at string) {
		if t, _ := s["type"].(string); t == "object" {
			if _, ok := s["properties"]; !ok {
				missing = append(missing, at)
			}
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for k, v := range props {
				if c, ok := v.(map[string]any); ok {
					walk(c, at+"properties."+k+".")
				}
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			if c, ok := s[k].(map[string]any); ok {
				walk(c, at+k+".")
			}
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if list, ok := s[k].([]any); ok {
				for i, e := range list {
					if c, ok := e.(map[string]any); ok {
						walk(c, fmt.Sprintf("%s%s.%d.", at, k, i))
					}
				}
			}
		}
	}
	walk(schema, "")
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Sprintf("In context=(%s), object schema missing properties", strings.TrimSuffix(missing[0], "."))
	}
	return ""
}
