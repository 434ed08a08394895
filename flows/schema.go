package flows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weirhq/weir/internal/textbound"
)

// inputSchema is a flow's compiled input schema, compiled once per Flow on
// first use.
type inputSchema struct {
	once   sync.Once
	schema *jsonschema.Schema
	weight schemaWeight
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

// compileUserSchema compiles a schema a flow declares (its input, an
// agent's output) within the bounds of schemabound.go: its size, its
// patterns and what validating one value against it may cost. The same
// check runs at registration and wherever a stored schema is compiled
// again, so a schema stored before a bound existed is refused too.
func compileUserSchema(doc []byte) (*jsonschema.Schema, schemaWeight, error) {
	if len(doc) > MaxSchemaBytes {
		return nil, schemaWeight{}, fmt.Errorf("the schema is %d bytes as JSON, more than the limit of %d", len(doc), MaxSchemaBytes)
	}
	s, err := compileSchema(doc)
	if err != nil {
		return nil, schemaWeight{}, err
	}
	w, err := schemaCost(s)
	if err != nil {
		return nil, schemaWeight{}, err
	}
	return s, w, nil
}

// CheckUserSchema checks a schema a flow declares (its input, an agent's
// output) as registration does: it must compile, and validating against
// it must stay within the bounds of schemabound.go. limit says that a
// bound refused it rather than the schema being invalid; the error's text
// is bounded.
func CheckUserSchema(doc []byte) (limit bool, err error) {
	s, err := compileSchema(doc)
	if err != nil {
		return false, errors.New(schemaErrorText(err))
	}
	if _, err := schemaCost(s); err != nil {
		return true, err
	}
	return false, nil
}

// CheckValue validates v against schema as a run's input is validated,
// naming name in the refusal (an *InputError when v does not match).
// compiled is false, and nothing is checked, when the schema does not
// compile: registration leaves that to the schema's owner.
func CheckValue(schema []byte, name string, v any) (compiled bool, err error) {
	s := &inputSchema{}
	s.schema, s.err = compileSchema(schema)
	if s.err != nil {
		return false, nil
	}
	return true, validateWith(s, name, v)
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
	s.once.Do(func() { s.schema, s.weight, s.err = compileUserSchema(f.Input) })
	return validateWith(s, f.Name, input)
}

// InputWork estimates what validating dataBytes of JSON against the
// flow's input schema costs (see ValidationWork); 0 without a schema or
// when it does not compile (ValidateInput then says why).
func (f *Flow) InputWork(dataBytes int) int64 {
	if len(f.Input) == 0 {
		return 0
	}
	s := f.input
	if s == nil {
		s = &inputSchema{}
	}
	s.once.Do(func() { s.schema, s.weight, s.err = compileUserSchema(f.Input) })
	if s.err != nil {
		return 0
	}
	return s.weight.work(dataBytes)
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
	if err := validateValue(s.schema, v); err != nil {
		return &InputError{Flow: flow, Msg: err.Error()}
	}
	return nil
}

// validateValue checks v (as jsonschema.UnmarshalJSON makes it) against a
// flow's compiled schema, refusing data nested past MaxInstanceDepth (the
// depth its cost was bounded to); the error's text is bounded.
func validateValue(s *jsonschema.Schema, v any) error {
	if d := depthOf(v, MaxInstanceDepth+1); d > MaxInstanceDepth {
		return fmt.Errorf("the value is nested more than %d levels deep", MaxInstanceDepth)
	}
	if err := s.Validate(v); err != nil {
		return errors.New(schemaErrorText(err))
	}
	return nil
}

// depthOf is the nesting depth of v (a scalar is 0), counted no further
// than limit.
func depthOf(v any, limit int) int {
	if limit <= 0 {
		return 0
	}
	deepest := 0
	switch x := v.(type) {
	case map[string]any:
		for _, c := range x {
			deepest = max(deepest, 1+depthOf(c, limit-1))
			if deepest >= limit {
				break
			}
		}
	case []any:
		for _, c := range x {
			deepest = max(deepest, 1+depthOf(c, limit-1))
			if deepest >= limit {
				break
			}
		}
	}
	return deepest
}

// schemaErrorText flattens a jsonschema error to one line of its most
// specific causes: diagnostics print one per line, and the outer layers
// ("allOf failed") say nothing a flow author can act on. The text is
// bounded (textbound): the first causes, each cut, then how many more —
// a value failing at 120,000 places, each quoting a 60 KB pattern, must
// not make gigabytes. Only the kept causes' texts are built.
func schemaErrorText(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		err = sve.Err
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return textbound.Quote(err.Error())
	}
	var leaves textbound.List
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if leaves.Full() {
				leaves.Skip(1)
				return
			}
			leaf := *e
			leaves.Add(leaf.Error())
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return leaves.Join("; ")
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
