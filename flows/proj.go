package flows

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
)

// Proj is a callable proven at registration to do nothing but project its
// ctx: a dict literal whose values are literals, ctx.input, ctx.results,
// ctx.run_id or ctx.attempt, indexed by literal keys, and dicts and lists
// of those (`args = lambda ctx: {"payload": ctx.input["p"]}`). It is
// data, not code: the runtime evaluates it natively (Eval), without a
// round trip to a sandbox worker, and gets exactly the value the script
// would return. Wherever the script's answer would be an error or a value
// the conversion treats specially (a missing key, an index out of range,
// an integer past 64 bits), Eval says so and the runtime asks the
// sandbox, whose answer stands: a projection is never a second
// implementation of a callable's failures.
type Proj struct {
	// Op is one of the Proj* operations.
	Op string `json:"op"`
	// Value is a literal's JSON (ProjLiteral).
	Value json.RawMessage `json:"value,omitempty"`
	// Of is what ProjIndex indexes; Key its literal key, a JSON string or
	// integer.
	Of  *Proj           `json:"of,omitempty"`
	Key json.RawMessage `json:"key,omitempty"`
	// Keys and Items are a dict's keys and values (ProjDict), or a list's
	// items (ProjList).
	Keys  []string `json:"keys,omitempty"`
	Items []*Proj  `json:"items,omitempty"`
}

// The operations of a Proj.
const (
	ProjLiteral = "literal"
	ProjInput   = "input"
	ProjResults = "results"
	ProjRunID   = "run_id"
	ProjAttempt = "attempt"
	ProjIndex   = "index"
	ProjDict    = "dict"
	ProjList    = "list"
)

// Eval is the projection's value against c, as the script would return it
// (JSON-compatible Go values, a whole number as int64), or false when only
// the script can say: the runtime then evaluates the callable itself.
func (p *Proj) Eval(c Context) (any, bool) {
	// The script converts the whole of ctx.input or ctx.results the first
	// time it reads either: a part it does not read can still fail it.
	input, results := p.reads()
	if input && !convertible(c.Input, 0) {
		return nil, false
	}
	if results {
		for _, r := range c.Results {
			if !convertible(r, 1) { // each result sits in the results dict
				return nil, false
			}
		}
	}
	nodes := 0
	return p.eval(c, &nodes, 0)
}

// reads says whether the projection reads ctx.input, ctx.results.
func (p *Proj) reads() (input, results bool) {
	switch p.Op {
	case ProjInput:
		return true, false
	case ProjResults:
		return false, true
	case ProjIndex:
		return p.Of.reads()
	}
	for _, it := range p.Items {
		i, r := it.reads()
		input, results = input || i, results || r
	}
	return input, results
}

// convertible says the script's conversion of v (JSON as the runtime
// passes it, at depth) succeeds: nested at most MaxValueDepth, every
// number one it can hold.
func convertible(v any, depth int) bool {
	b, ok := v.(json.RawMessage)
	if v == nil {
		return true
	}
	if !ok {
		return false
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&x) != nil {
		return false
	}
	return convertibleValue(x, depth)
}

func convertibleValue(v any, depth int) bool {
	if depth > MaxValueDepth {
		return false
	}
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return true
		}
		if _, ok := new(big.Int).SetString(string(x), 10); ok {
			return true
		}
		_, err := x.Float64()
		return err == nil
	case []any:
		for _, e := range x {
			if !convertibleValue(e, depth+1) {
				return false
			}
		}
	case map[string]any:
		for _, e := range x {
			if !convertibleValue(e, depth+1) {
				return false
			}
		}
	}
	return true
}

// eval is the value at depth in the result (the script refuses a result
// nested past MaxValueDepth, or of more than MaxValueNodes parts).
func (p *Proj) eval(c Context, nodes *int, depth int) (any, bool) {
	if *nodes++; *nodes > MaxValueNodes || depth > MaxValueDepth {
		return nil, false
	}
	switch p.Op {
	case ProjLiteral:
		return decodeProj(p.Value, nodes, depth)
	case ProjRunID:
		return c.RunID, true
	case ProjAttempt:
		return int64(c.Attempt), true
	case ProjDict:
		if len(p.Keys) != len(p.Items) {
			return nil, false
		}
		out := make(map[string]any, len(p.Keys))
		for i, k := range p.Keys {
			v, ok := p.Items[i].eval(c, nodes, depth+1)
			if !ok {
				return nil, false
			}
			out[k] = v
		}
		return out, true
	case ProjList:
		out := make([]any, len(p.Items))
		for i, it := range p.Items {
			v, ok := it.eval(c, nodes, depth+1)
			if !ok {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	case ProjIndex:
		raw, ok := p.raw(c)
		if !ok {
			return nil, false
		}
		return decodeProj(raw, nodes, depth)
	}
	return nil, false // ctx.input or ctx.results whole, or an unknown op
}

// raw is the JSON an index chain over ctx.input or ctx.results reaches,
// read without decoding what it passes by.
func (p *Proj) raw(c Context) (json.RawMessage, bool) {
	switch p.Op {
	case ProjInput:
		if c.Input == nil {
			return json.RawMessage("null"), true
		}
		b, ok := c.Input.(json.RawMessage)
		return b, ok
	case ProjResults:
		return nil, false // indexed by node id: see below
	case ProjIndex:
		if p.Of.Op == ProjResults {
			var id string
			if json.Unmarshal(p.Key, &id) != nil {
				return nil, false
			}
			b, ok := c.Results[id].(json.RawMessage)
			return b, ok
		}
		of, ok := p.Of.raw(c)
		if !ok {
			return nil, false
		}
		return index(of, p.Key)
	}
	return nil, false
}

// index is of[key]: a JSON object's member by string key, or a JSON
// array's element by integer key (negative from the end, as in the
// script); false for anything the script would refuse.
func index(of, key json.RawMessage) (json.RawMessage, bool) {
	of = bytes.TrimSpace(of)
	if len(of) == 0 {
		return nil, false
	}
	switch of[0] {
	case '{':
		var k string
		if json.Unmarshal(key, &k) != nil {
			return nil, false
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(of, &m) != nil {
			return nil, false
		}
		v, ok := m[k]
		return v, ok
	case '[':
		i, err := strconv.Atoi(string(key))
		if err != nil {
			return nil, false
		}
		var l []json.RawMessage
		if json.Unmarshal(of, &l) != nil {
			return nil, false
		}
		if i < 0 {
			i += len(l)
		}
		if i < 0 || i >= len(l) {
			return nil, false
		}
		return l[i], true
	}
	return nil, false
}

// decodeProj decodes JSON as the script's conversions would hand it back:
// a number that is a whole number within 2^53 (or any int64 written as
// one) as int64, any other finite number as float64; an integer past 64
// bits, which the script refuses, is left to it.
func decodeProj(b json.RawMessage, nodes *int, depth int) (any, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return normalize(v, depth, nodes)
}

func normalize(v any, depth int, nodes *int) (any, bool) {
	if depth > MaxValueDepth {
		return nil, false
	}
	if *nodes++; *nodes > MaxValueNodes {
		return nil, false
	}
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, true
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		if f == math.Trunc(f) {
			if math.Abs(f) <= 1<<53 {
				return int64(f), true
			}
			return nil, false // a whole number past 2^53: the script's to say
		}
		return f, true
	case []any:
		for i, e := range x {
			n, ok := normalize(e, depth+1, nodes)
			if !ok {
				return nil, false
			}
			x[i] = n
		}
		return x, true
	case map[string]any:
		for k, e := range x {
			n, ok := normalize(e, depth+1, nodes)
			if !ok {
				return nil, false
			}
			x[k] = n
		}
		return x, true
	}
	return v, true // nil, bool, string
}
