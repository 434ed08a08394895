package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Schema is a compiled JSON schema of a tool's input. The host validates
// every input against it before the plugin sees the call, and sdktest does
// the same in-process, with this one implementation.
type Schema struct {
	s *jsonschema.Schema
}

// CompileSchema compiles src, a JSON schema (draft 2020-12 unless it says
// otherwise with $schema). An empty src yields nil: any JSON value is
// accepted. References to other documents are refused: a schema must be
// self-contained, so compiling one never reads a file or the network.
func CompileSchema(src string) (*Schema, error) {
	if src == "" {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(src)))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "weir:tool-input.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, err
	}
	return &Schema{s: s}, nil
}

// Validate checks that input is one JSON value that the schema accepts. A nil
// Schema accepts any JSON value.
func (s *Schema) Validate(input []byte) error {
	if s == nil {
		if !json.Valid(input) {
			return errors.New("input is not JSON")
		}
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return fmt.Errorf("input is not JSON: %w", err)
	}
	if err := s.s.Validate(v); err != nil {
		// Drop the library's first line, which names the schema's internal
		// location, and keep what is wrong where.
		msg := err.Error()
		if _, rest, ok := strings.Cut(msg, "\n"); ok {
			msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "- "))
		}
		return errors.New(msg)
	}
	return nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("schemas must be self-contained: external references are not loaded")
}

// SchemaProblem is one place where a document disagrees with a schema.
type SchemaProblem struct {
	// Path is the location of the value at fault, by object key or array
	// index from the document's root; for an unknown key, the key.
	Path []string
	// Message says what is wrong, naming the location.
	Message string
}

// Problems validates doc against the schema and lists every problem
// found with its location (nil: doc is accepted). A nil Schema accepts
// any JSON value.
func (s *Schema) Problems(doc []byte) ([]SchemaProblem, error) {
	if s == nil {
		if !json.Valid(doc) {
			return nil, errors.New("not JSON")
		}
		return nil, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	err = s.s.Validate(v)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	var out []SchemaProblem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		path := append([]string(nil), e.InstanceLocation...)
		if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok && len(ap.Properties) > 0 {
			path = append(path, ap.Properties[0])
		}
		out = append(out, SchemaProblem{Path: path, Message: e.Error()})
	}
	walk(ve)
	return out, nil
}
