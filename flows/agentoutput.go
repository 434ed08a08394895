package flows

import (
	"encoding/json"
	"errors"
)

// ValidateAgentAnswer checks an agent's final answer (the model's text)
// against the node's output schema: the answer must be JSON that the
// schema accepts. The error says why not in words a model can act on.
func ValidateAgentAnswer(schema, answer []byte) error {
	if !json.Valid(answer) {
		return errAnswerNotJSON
	}
	return ValidateJSON(schema, answer)
}

var errAnswerNotJSON = errors.New("the answer is not JSON; answer with JSON alone that matches the output schema")
