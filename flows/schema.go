package flows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// inputSchema is a flow's compiled input schema, compiled once per Flow on
// first use.
type inputSchema struct {
	once   sync.Once
	schema *jsonschema.Schema
	err    error
}

// compileSchema compiles a JSON schema document (draft 2020-12 unless it
// says otherwise). References to other documents are refused: compiling a
// flow's schema must never read a file or the network.
func compileSchema(doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	const loc = "weir:flow-input.json"
	if err := c.AddResource(loc, v); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, errors.New("a flow's schemas (input, an agent's output) must be self-contained: external references are not loaded")
}

// ValidateInput checks a run's input (a JSON-compatible Go value, as
// decoded by encoding/json) against the flow's declared input schema. A flow
// that declares none accepts any input.
func (f *Flow) ValidateInput(input any) error {
	if len(f.Input) == 0 {
		return nil
	}
	s := f.input
	if s == nil {
		// A Flow built by hand compiles its schema on every call; loaded
		// and decoded flows share one compiled schema.
		s = &inputSchema{}
	}
	s.once.Do(func() { s.schema, s.err = compileSchema(f.Input) })
	return validateWith(s, f.Name, input)
}

func validateWith(s *inputSchema, flow string, input any) error {
	if s.err != nil {
		return fmt.Errorf("flow %s: input schema: %w", flow, s.err)
	}
	// The validator wants values as its own decoder makes them; a round
	// trip through JSON accepts whatever Go value encoding/json can write.
	b, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("flow %s: input is not JSON: %w", flow, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("flow %s: input is not JSON: %w", flow, err)
	}
	if err := s.schema.Validate(v); err != nil {
		return &InputError{Flow: flow, Msg: schemaErrorText(err)}
	}
	return nil
}

// schemaErrorText flattens a jsonschema error to one line of its most
// specific causes: diagnostics print one per line, and the outer layers
// ("allOf failed") say nothing a flow author can act on.
func schemaErrorText(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		err = sve.Err
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaf := *e
			leaves = append(leaves, strings.Join(strings.Fields(leaf.Error()), " "))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(leaves, "; ")
}

// InputError is a run input that does not match its flow's input schema.
type InputError struct {
	Flow string
	Msg  string
}

// Error says which flow refused the input and why.
func (e *InputError) Error() string {
	return fmt.Sprintf("flow %s: input does not match the flow's schema: %s", e.Flow, e.Msg)
}
