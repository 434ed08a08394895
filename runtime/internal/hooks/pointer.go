package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParsePointer splits a JSON pointer (RFC 6901) into its reference
// tokens, unescaped: "/repository/full_name" → [repository full_name];
// "" is the whole document.
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q must start with / (e.g. \"/repository/full_name\")", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 (for ~) or 1 (for /)", p)
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// errNoValue is a pointer that names nothing in the document (or null).
var errNoValue = errors.New("no value")

// decodeDoc decodes a JSON document keeping numbers as written.
func decodeDoc(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// scalarAt finds the value at pointer toks in the decoded document v and
// writes it as a string: a string as itself, a number as written.
// errNoValue if the pointer names nothing; an error naming the type if it
// names an object, an array or a boolean.
func scalarAt(v any, toks []string) (string, error) {
	for _, t := range toks {
		switch x := v.(type) {
		case map[string]any:
			v = x[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) || (len(t) > 1 && t[0] == '0') {
				return "", errNoValue
			}
			v = x[i]
		default:
			return "", errNoValue
		}
	}
	switch x := v.(type) {
	case nil:
		return "", errNoValue
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return "", errors.New("a boolean, not a string or number")
	case []any:
		return "", errors.New("an array, not a string or number")
	default:
		return "", errors.New("an object, not a string or number")
	}
}
