package replay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// MaxRedactions bounds the pointers one recording may blank.
const MaxRedactions = 256

// pointer is a parsed JSON pointer (RFC 6901): its reference tokens.
type pointer struct {
	text   string
	tokens []string
}

// parsePointers parses the --redact pointers: each "/a/b" with ~0 for ~
// and ~1 for /; the whole document ("") is no field to blank.
func parsePointers(texts []string) ([]pointer, error) {
	if len(texts) > MaxRedactions {
		return nil, &Error{Code: CodeRedact, Message: fmt.Sprintf("%d pointers to redact, more than %d", len(texts), MaxRedactions)}
	}
	out := make([]pointer, 0, len(texts))
	for _, t := range texts {
		if !strings.HasPrefix(t, "/") {
			return nil, &Error{Code: CodeRedact, Message: fmt.Sprintf("%q is no JSON pointer to a field: one starts with / (/customer/email)", t)}
		}
		p := pointer{text: t}
		for _, tok := range strings.Split(t[1:], "/") {
			if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(tok, "~0", ""), "~1", ""), "~") {
				return nil, &Error{Code: CodeRedact, Message: fmt.Sprintf("%q: ~ is written ~0 and / is written ~1 in a JSON pointer", t)}
			}
			p.tokens = append(p.tokens, strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"))
		}
		out = append(out, p)
	}
	return out, nil
}

// CodeRedact refuses a --redact pointer that is not one.
const CodeRedact = "E_BAD_INPUT"

// redact blanks the pointers' fields everywhere the run's own data is
// kept.
func (r *Recording) redact(ps []pointer) {
	if len(ps) == 0 {
		return
	}
	for _, p := range ps {
		r.Redacted = append(r.Redacted, p.text)
	}
	r.Run.Input = blankAll(r.Run.Input, ps)
	r.Run.Output = blankAll(r.Run.Output, ps)
	for i := range r.Calls {
		r.Calls[i].Args = blankAll(r.Calls[i].Args, ps)
		r.Calls[i].Output = blankAll(r.Calls[i].Output, ps)
	}
	for i := range r.Decisions {
		r.Decisions[i].Payload = blankAll(r.Decisions[i].Payload, ps)
	}
}

// blankAll is doc with the value at every pointer that resolves in it
// replaced by the blank of its JSON type ("" for a string, 0, false, {}
// or []), so that schemas still hold; doc itself when none resolves.
func blankAll(doc json.RawMessage, ps []pointer) json.RawMessage {
	if len(doc) == 0 || len(ps) == 0 {
		return doc
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return doc
	}
	changed := false
	for _, p := range ps {
		var ok bool
		if v, ok = blankAt(v, p.tokens); ok {
			changed = true
		}
	}
	if !changed {
		return doc
	}
	b, err := json.Marshal(v)
	if err != nil {
		return doc
	}
	return b
}

// blankAt blanks the value at tokens under v.
func blankAt(v any, tokens []string) (any, bool) {
	if len(tokens) == 0 {
		return blankOf(v), true
	}
	switch c := v.(type) {
	case map[string]any:
		child, ok := c[tokens[0]]
		if !ok {
			return v, false
		}
		nv, done := blankAt(child, tokens[1:])
		c[tokens[0]] = nv
		return c, done
	case []any:
		i, err := strconv.Atoi(tokens[0])
		if err != nil || i < 0 || i >= len(c) {
			return v, false
		}
		nv, done := blankAt(c[i], tokens[1:])
		c[i] = nv
		return c, done
	}
	return v, false
}

func blankOf(v any) any {
	switch v.(type) {
	case string:
		return ""
	case json.Number, float64:
		return 0
	case bool:
		return false
	case map[string]any:
		return map[string]any{}
	case []any:
		return []any{}
	}
	return nil
}
