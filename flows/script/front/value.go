package front

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"

	"github.com/weirhq/weir/flows"
	"go.starlark.net/starlark"
)

// Values cross between Go and Starlark as JSON-compatible values: nil, bool,
// string, int64 or float64, []any and map[string]any. JSON has one number
// type, so a float64 that holds a whole number (as encoding/json decodes
// every number) becomes a Starlark int; json.Number is accepted too.
// Every Starlark value made here is frozen: scripts read the context, they
// never change it.

// Nesting is bounded in both directions by MaxValueDepth, so that a cyclic
// or absurdly deep value is an error instead of a stack overflow.

// ToStarlark converts a JSON-compatible Go value to a frozen Starlark value.
func ToStarlark(v any) (starlark.Value, error) {
	sv, err := toStarlarkDepth(v, 0)
	if err != nil {
		return nil, err
	}
	sv.Freeze()
	return sv, nil
}

func toStarlarkDepth(v any, depth int) (starlark.Value, error) {
	if depth > flows.MaxValueDepth {
		return nil, fmt.Errorf("value nested more than %d deep", flows.MaxValueDepth)
	}
	switch x := v.(type) {
	case nil:
		return starlark.None, nil
	case starlark.Value:
		return x, nil
	case bool:
		return starlark.Bool(x), nil
	case string:
		return starlark.String(x), nil
	case int:
		return starlark.MakeInt(x), nil
	case int32:
		return starlark.MakeInt64(int64(x)), nil
	case int64:
		return starlark.MakeInt64(x), nil
	case uint64:
		return starlark.MakeUint64(x), nil
	case float64:
		return floatToStarlark(x), nil
	case float32:
		return floatToStarlark(float64(x)), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return starlark.MakeInt64(i), nil
		}
		if b, ok := new(big.Int).SetString(string(x), 10); ok {
			return starlark.MakeBigInt(b), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", string(x), err)
		}
		return floatToStarlark(f), nil
	case []any:
		elems := make([]starlark.Value, len(x))
		for i, e := range x {
			sv, err := toStarlarkDepth(e, depth+1)
			if err != nil {
				return nil, err
			}
			elems[i] = sv
		}
		return starlark.NewList(elems), nil
	case map[string]any:
		// Go maps have no order; sort the keys so that iteration in the
		// script is the same on every evaluation.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := starlark.NewDict(len(x))
		for _, k := range keys {
			sv, err := toStarlarkDepth(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			if err := d.SetKey(starlark.String(k), sv); err != nil {
				return nil, err
			}
		}
		return d, nil
	case json.RawMessage:
		var decoded any
		if err := UnmarshalNumbers(x, &decoded); err != nil {
			return nil, err
		}
		return toStarlarkDepth(decoded, depth)
	}
	// Anything else (structs, typed maps and slices): through JSON.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot pass %T to a script: %w", v, err)
	}
	var decoded any
	if err := UnmarshalNumbers(b, &decoded); err != nil {
		return nil, err
	}
	return toStarlarkDepth(decoded, depth)
}

// UnmarshalNumbers decodes JSON keeping numbers as json.Number, so that
// integers beyond 2^53 keep every digit.
func UnmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func floatToStarlark(f float64) starlark.Value {
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return starlark.MakeInt64(int64(f))
	}
	return starlark.Float(f)
}

// FromStarlark converts a Starlark value to a JSON-compatible Go value.
// Functions, nodes and other values with no JSON form are errors, as are
// dict keys that are not strings and non-finite floats.
func FromStarlark(v starlark.Value) (any, error) {
	nodes := 0
	return fromStarlarkDepth(v, 0, &nodes)
}

// fromStarlarkDepth counts the values it makes in nodes: a list or dict
// holding itself twice, nested 40 times, is a few hundred bytes of
// Starlark and 2^40 values of JSON.
func fromStarlarkDepth(v starlark.Value, depth int, nodes *int) (any, error) {
	if depth > flows.MaxValueDepth {
		return nil, fmt.Errorf("value nested more than %d deep", flows.MaxValueDepth)
	}
	if *nodes++; *nodes > flows.MaxValueNodes {
		return nil, fmt.Errorf("value has more than %d parts (MaxValueNodes); a list or dict that holds the same value many times is copied each time", flows.MaxValueNodes)
	}
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.String:
		return string(x), nil
	case starlark.Int:
		if i, ok := x.Int64(); ok {
			return i, nil
		}
		return nil, fmt.Errorf("integer %s does not fit in 64 bits", x)
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("float %s has no JSON form", x)
		}
		return f, nil
	case *starlark.List:
		out := make([]any, x.Len())
		for i := range x.Len() {
			e, err := fromStarlarkDepth(x.Index(i), depth+1, nodes)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case starlark.Tuple:
		out := make([]any, len(x))
		for i, e := range x {
			g, err := fromStarlarkDepth(e, depth+1, nodes)
			if err != nil {
				return nil, err
			}
			out[i] = g
		}
		return out, nil
	case *starlark.Dict:
		out := make(map[string]any, x.Len())
		for _, item := range x.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("dict key %s is a %s; JSON objects need string keys", item[0], item[0].Type())
			}
			e, err := fromStarlarkDepth(item[1], depth+1, nodes)
			if err != nil {
				return nil, err
			}
			out[string(k)] = e
		}
		return out, nil
	case *Ctx:
		return nil, fmt.Errorf("ctx itself cannot be returned; return fields of it, e.g. ctx.input")
	}
	return nil, fmt.Errorf("a %s has no JSON form", v.Type())
}
