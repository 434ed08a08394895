package flows

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidateAgentAnswer checks an agent's final answer (the model's text)
// against the node's output schema: the answer must be JSON that the
// schema accepts. The error says why not in words a model can act on.
func ValidateAgentAnswer(schema, answer []byte) error {
	s, err := compileUserSchema(schema)
	if err != nil {
		return fmt.Errorf("output schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(answer))
	if err != nil {
		return errors.New("the answer is not JSON; answer with JSON alone that matches the output schema")
	}
	return validateValue(s, v)
}
