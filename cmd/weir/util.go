package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
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

// readInput reads --input: inline JSON, or @file.
func readInput(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] == '@' {
		b, err := os.ReadFile(s[1:])
		if err != nil {
			return nil, usageErrorf("--input: %v", err)
		}
		s = string(b)
	}
	if !json.Valid([]byte(s)) {
		return nil, usageErrorf("--input is not valid JSON: %s", s)
	}
	return json.RawMessage(s), nil
}

// absPath is path made absolute, or path itself if that fails.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
