package flows

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator checks data against a user's schema where the work can be
// stopped: the schema library's Validate takes no context and a
// goroutine cannot be killed, so a validation whose estimated work
// (ValidationWork) passes MaxInProcessWork runs in a process that a
// deadline can end (the sandbox's workers). runtime/sandbox's Pool
// implements it.
type Validator interface {
	// ValidateSchema checks value (JSON) against schema (a flow's JSON
	// schema, within the bounds of schemabound.go). The data's refusal is
	// an *InvalidValueError; a limit the work hit is a *LimitError; any
	// other error says the validator itself failed.
	ValidateSchema(ctx context.Context, schema, value json.RawMessage) error
}

// MaxInProcessWork is the most estimated work (ValidationWork) a
// validation may cost to run in the daemon's own process. One unit
// costs up to about half a microsecond (a value of one byte checked
// against a failing subschema, its error built), so this is about a
// tenth of a second at worst, and any input the API takes against a
// schema without alternatives stays in process. Registration bounds
// every schema's weight (MaxSchemaFanout, MaxSchemaPatternBytes), but
// not the data: 100,000 items against a schema of 1,000 alternatives
// take over a minute and gigabytes, which only a worker's deadline and
// memory cap can end.
const MaxInProcessWork = 1 << 18

// InvalidValueError is data a schema refused; Msg says why, bounded.
type InvalidValueError struct{ Msg string }

func (e *InvalidValueError) Error() string { return e.Msg }

// ValidationWork estimates what validating dataBytes of JSON against
// schema costs: the most subschemas one value is checked against plus
// the bytes of the schema's regular expressions, per byte of the data.
// A schema that does not compile is estimated at 0 (validating says
// why).
func ValidationWork(schema []byte, dataBytes int) int64 {
	_, w, err := compileUserSchema(schema)
	if err != nil {
		return 0
	}
	return w.work(dataBytes)
}

// ValidateJSON checks value against schema in this process. It is what
// a Validator runs where it can be stopped, and what the daemon runs for
// validations within MaxInProcessWork.
func ValidateJSON(schema, value []byte) error {
	s, _, err := compileUserSchema(schema)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return &InvalidValueError{Msg: "the value is not JSON"}
	}
	if err := validateValue(s, v); err != nil {
		return &InvalidValueError{Msg: err.Error()}
	}
	return nil
}

// IsInvalidValue reports whether err is data a schema refused.
func IsInvalidValue(err error) bool {
	var iv *InvalidValueError
	return errors.As(err, &iv)
}
