package sdk

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// ToolOption sets a declaration of a tool made with NewTool.
type ToolOption func(*Tool)

// Description sets what the tool does, for flow authors.
func Description(text string) ToolOption { return func(t *Tool) { t.Description = text } }

// Idempotent declares that the tool dedupes on Call.IdempotencyKey (see
// Tool.Idempotent).
func Idempotent() ToolOption { return func(t *Tool) { t.Idempotent = true } }

// ReadOnly declares that the tool has no side effect (EffectRead): weir
// may repeat its calls freely.
func ReadOnly() ToolOption { return func(t *Tool) { t.Effect = EffectRead } }

// AtMostOnce declares that the tool's effect must happen at most once and
// that it cannot dedupe (EffectAtMostOnce). It is the default of a tool
// that declares neither Idempotent nor an Effect; saying it is clearer.
func AtMostOnce() ToolOption { return func(t *Tool) { t.Effect = EffectAtMostOnce } }

// ReconcileWith gives the tool a reconcile probe (see Tool.Reconcile).
func ReconcileWith(probe func(ctx context.Context, call *Call) (ReconcileAnswer, error)) ToolOption {
	return func(t *Tool) { t.Reconcile = probe }
}

// Cost declares the budget units one call consumes (see Tool.Cost).
func Cost(units int64) ToolOption { return func(t *Tool) { t.Cost = units } }

// InputSchema declares the input's JSON schema instead of deriving it from
// the input type; NewTool checks that the two agree (see NewTool).
func InputSchema(schema string) ToolOption { return func(t *Tool) { t.InputSchema = schema } }

// OutputSchema declares the output's JSON schema instead of deriving it
// from the output type. It is informational and not checked.
func OutputSchema(schema string) ToolOption { return func(t *Tool) { t.OutputSchema = schema } }

// NewTool declares a tool from a typed function: each call's input is
// decoded into an In, and fn's Out is the output (an Out of type Result
// reports the cost too). The options set the rest of the declaration.
//
// The input schema is derived from In unless InputSchema declares one. A
// struct becomes an object with a property per field, named as
// encoding/json names it; a field is required unless its tag says
// omitempty (or omitzero), and properties In has no field for are refused,
// so that a flow's misspelt key fails before the call instead of being
// dropped. Strings, booleans, numbers (integers for integer fields),
// slices, maps and time.Time (a date-time string) map as expected; an
// interface, json.RawMessage or a type with its own UnmarshalJSON accepts
// any JSON value. A declared schema is checked against In instead: every
// property it declares must be a field of In, every field without
// omitempty must be required, and a property's type must fit its field's.
//
// A mistake (a type JSON cannot carry, a schema that disagrees with In) is
// not a panic: it is reported, naming the field, by CheckTools and by
// Serve, which refuses to start; a call of the tool fails with it too.
// The output schema is derived from Out the same way, for documentation,
// unless OutputSchema declares one or Out is Result or an interface.
func NewTool[In, Out any](name string, fn func(ctx context.Context, call *Call, in In) (Out, error), opts ...ToolOption) Tool {
	t := Tool{Name: name}
	for _, o := range opts {
		o(&t)
	}
	inType, outType := reflect.TypeFor[In](), reflect.TypeFor[Out]()
	if t.InputSchema == "" {
		s, err := deriveSchema(inType)
		if err != nil {
			t.declErr = fmt.Errorf("input type %v: %w", inType, err)
		} else {
			t.InputSchema = s
		}
	} else if err := checkSchema(t.InputSchema, inType); err != nil {
		t.declErr = fmt.Errorf("InputSchema does not fit the input type %v: %w", inType, err)
	}
	if t.OutputSchema == "" && t.declErr == nil && outType != reflect.TypeFor[Result]() && outType.Kind() != reflect.Interface {
		s, err := deriveSchema(outType)
		if err != nil {
			t.declErr = fmt.Errorf("output type %v: %w", outType, err)
		} else {
			t.OutputSchema = s
		}
	}
	if fn == nil && t.declErr == nil {
		t.declErr = fmt.Errorf("NewTool: fn is nil")
	}
	declErr := t.declErr
	t.Run = func(ctx context.Context, call *Call) (any, error) {
		if declErr != nil {
			return nil, fmt.Errorf("tool %s is declared wrongly: %w", call.Tool, declErr)
		}
		var in In
		if err := call.Decode(&in); err != nil {
			return nil, err
		}
		out, err := fn(ctx, call, in)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return t
}

// schemaNode is a JSON schema as a map, marshalled with sorted keys so
// that the derived schema of a type is always the same text.
type schemaNode = map[string]any

// deriveSchema returns the JSON schema of the values encoding/json decodes
// into t ("" for any value).
func deriveSchema(t reflect.Type) (string, error) {
	n, err := schemaOf(t, nil)
	if err != nil {
		return "", err
	}
	if len(n) == 0 {
		return "", nil
	}
	b, err := json.Marshal(n)
	return string(b), err
}

var (
	timeType            = reflect.TypeFor[time.Time]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// schemaOf derives t's schema; seen holds the struct types being derived,
// to refuse a recursive type instead of looping.
func schemaOf(t reflect.Type, seen []reflect.Type) (schemaNode, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return schemaNode{"type": "string", "format": "date-time"}, nil
	case t == rawMessageType, reflect.PointerTo(t).Implements(jsonUnmarshalerType):
		return schemaNode{}, nil
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return schemaNode{"type": "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return schemaNode{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return schemaNode{"type": "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return schemaNode{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return schemaNode{"type": "number"}, nil
	case reflect.String:
		return schemaNode{"type": "string"}, nil
	case reflect.Interface:
		return schemaNode{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return schemaNode{"type": "string", "contentEncoding": "base64"}, nil
		}
		items, err := schemaOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		n := schemaNode{"type": "array", "items": items}
		if t.Kind() == reflect.Array {
			n["minItems"], n["maxItems"] = t.Len(), t.Len()
		}
		return n, nil
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			if !reflect.PointerTo(t.Key()).Implements(textUnmarshalerType) {
				return nil, fmt.Errorf("map key type %v is not one JSON can carry", t.Key())
			}
		}
		values, err := schemaOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return schemaNode{"type": "object", "additionalProperties": values}, nil
	case reflect.Struct:
		if slices.Contains(seen, t) {
			return nil, fmt.Errorf("type %v contains itself: derive no schema, declare one with InputSchema", t)
		}
		fields, err := jsonFields(t)
		if err != nil {
			return nil, err
		}
		props := schemaNode{}
		required := []string{}
		for _, f := range fields {
			var p schemaNode
			if f.asString {
				p = schemaNode{"type": "string"}
			} else if p, err = schemaOf(f.typ, append(seen, t)); err != nil {
				return nil, fmt.Errorf("field %s: %w", f.goName, err)
			}
			props[f.name] = p
			if f.required {
				required = append(required, f.name)
			}
		}
		n := schemaNode{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			n["required"] = required
		}
		return n, nil
	}
	return nil, fmt.Errorf("type %v is not one JSON can carry", t)
}

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name     string // the JSON key
	goName   string // the Go field, with the path through embedded structs
	typ      reflect.Type
	required bool // no omitempty or omitzero
	asString bool // the ",string" option
}

// jsonFields lists the fields encoding/json decodes into a struct of type
// t: exported fields not tagged "-", with the fields of untagged embedded
// structs promoted. Two fields with one JSON key at the same depth are
// refused: encoding/json would silently ignore both.
func jsonFields(t reflect.Type) ([]jsonField, error) {
	var out []jsonField
	depth := map[string]int{}
	goNames := map[string]string{}
	var walk func(t reflect.Type, prefix string, level int) error
	walk = func(t reflect.Type, prefix string, level int) error {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if sf.Anonymous && name == "" {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					if err := walk(et, prefix+sf.Name+".", level+1); err != nil {
						return err
					}
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if d, ok := depth[name]; ok {
				if d == level {
					return fmt.Errorf("fields %s and %s both decode the JSON key %q", goNames[name], prefix+sf.Name, name)
				}
				if d < level {
					continue // the shallower one wins, as in encoding/json
				}
				out = slices.DeleteFunc(out, func(f jsonField) bool { return f.name == name })
			}
			depth[name], goNames[name] = level, prefix+sf.Name
			o := "," + opts + ","
			out = append(out, jsonField{
				name:     name,
				goName:   prefix + sf.Name,
				typ:      ft,
				required: !strings.Contains(o, ",omitempty,") && !strings.Contains(o, ",omitzero,"),
				asString: strings.Contains(o, ",string,"),
			})
		}
		return nil
	}
	if err := walk(t, "", 0); err != nil {
		return nil, err
	}
	return out, nil
}

// checkSchema reports where a declared schema and the type t its input is
// decoded into disagree.
func checkSchema(src string, t reflect.Type) error {
	var decl schemaNode
	if err := json.Unmarshal([]byte(src), &decl); err != nil {
		return fmt.Errorf("the schema is not a JSON object: %w", err)
	}
	derived, err := schemaOf(t, nil)
	if err != nil {
		return err
	}
	if err := checkType("the input", decl, derived); err != nil {
		return err
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if derived["type"] != "object" || t.Kind() != reflect.Struct {
		return nil
	}
	fields, _ := jsonFields(t) // schemaOf succeeded, so this does too
	byName := map[string]jsonField{}
	for _, f := range fields {
		byName[f.name] = f
	}
	props, _ := decl["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		f, ok := byName[name]
		if !ok {
			return fmt.Errorf("property %q has no field in %v: its value would be dropped", name, t)
		}
		p, _ := props[name].(map[string]any)
		what := fmt.Sprintf("property %q (field %s)", name, f.goName)
		if err := checkType(what, p, derived["properties"].(schemaNode)[name].(schemaNode)); err != nil {
			return err
		}
	}
	required := map[string]bool{}
	list, _ := decl["required"].([]any)
	for _, r := range list {
		name, _ := r.(string)
		if _, ok := byName[name]; !ok {
			return fmt.Errorf("required property %q has no field in %v", name, t)
		}
		required[name] = true
	}
	for _, f := range fields {
		if f.required && !required[f.name] {
			return fmt.Errorf("field %s (JSON %q) has no omitempty, so the schema must require it: add it to \"required\" or tag the field omitempty", f.goName, f.name)
		}
	}
	return nil
}

// checkType reports a declared "type" that the derived one cannot hold: an
// integer fits a number, nothing else is converted.
func checkType(what string, decl, derived schemaNode) error {
	dt, _ := decl["type"].(string)
	gt, _ := derived["type"].(string)
	if dt == "" || gt == "" || dt == gt || (dt == "integer" && gt == "number") {
		return nil
	}
	return fmt.Errorf("%s is declared %q but decodes into a Go %s", what, dt, gt)
}
