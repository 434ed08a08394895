package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"

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

// answer is how a command shows what the daemon answered: the refusal
// (err), or v as JSON (--json) or as text.
func answer[T any](m *Main, v T, err error, asJSON bool, text func(io.Writer, T)) error {
	if err != nil {
		return m.apiFailure(err)
	}
	if asJSON {
		return printJSON(m.Stdout, v)
	}
	text(m.Stdout, v)
	return nil
}

// printTable prints rows as the CLI's tables are printed: the header and
// one line a row (row gives its tab-separated cells), in aligned columns;
// "none" when there are no rows.
func printTable[T any](w io.Writer, header string, rows []T, row func(T) string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "none")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, row(r))
	}
	return tw.Flush()
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
