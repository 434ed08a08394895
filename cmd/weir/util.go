package main

import (
	"encoding/json"
	"io"
	"os"
	"sort"

	"github.com/weirhq/weir/internal/textbound"
)

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// printJSON writes v indented, for --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// readInput reads --input: inline JSON, or @file. A refusal quotes a
// bounded head of what it was given.
func readInput(s string) (json.RawMessage, error) { return readJSONFlag("--input", s) }

// readJSONFlag is readInput for the flag named flag (--payload, say),
// which its refusals name.
func readJSONFlag(flag, s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] == '@' {
		b, err := os.ReadFile(s[1:])
		if err != nil {
			return nil, usageErrorf("%s: %v", flag, err)
		}
		s = string(b)
	}
	if !json.Valid([]byte(s)) {
		return nil, usageErrorf("%s is not valid JSON: %s", flag, textbound.Quote(s))
	}
	return json.RawMessage(s), nil
}
