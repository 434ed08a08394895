package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzSchema feeds CompileSchema what a plugin's manifest may declare and
// Validate what a run's input may hold; both are untrusted. Whatever they
// are, neither panics, compiling never reaches outside the schema, an
// empty schema accepts exactly the JSON values, and nothing that is not
// JSON is ever accepted.
func FuzzSchema(f *testing.F) {
	f.Add(`{"type":"object","required":["to"],"properties":{"to":{"type":"string","pattern":"^[^@]+@[^@]+$"}}}`, `{"to":"a@b"}`)
	f.Add(`{"type":"integer","minimum":0}`, `-1`)
	f.Add(`{"$ref":"http://example.com/s.json"}`, `1`)
	f.Add(`{"$ref":"file:///etc/passwd"}`, `{}`)
	f.Add(`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `null`)
	f.Add(`{"type":"string","format":"email"}`, `"x"`)
	f.Add(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"array","items":{"type":"number"}}`, `[1,"a"]`)
	f.Add(`true`, `{"a":[1,2,{"b":null}]}`)
	f.Add(``, `{"a":`)
	f.Add(`{"pattern":"(a+)+$"}`, `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"`)
	f.Fuzz(func(t *testing.T, src, input string) {
		s, err := CompileSchema(src)
		if err != nil {
			if s != nil {
				t.Fatalf("a schema and an error: %v", err)
			}
			return
		}
		if strings.TrimSpace(src) == "" && s != nil {
			t.Fatalf("an empty source compiled to a schema")
		}
		verr := s.Validate([]byte(input))
		if verr == nil && !json.Valid([]byte(input)) {
			t.Fatalf("schema %q accepted %q, which is not JSON", src, input)
		}
		if s == nil && (verr == nil) != json.Valid([]byte(input)) {
			t.Fatalf("no schema: Validate(%q) = %v, json.Valid = %v", input, verr, json.Valid([]byte(input)))
		}
	})
}

// FuzzSplitToolName feeds SplitToolName any name: a plugin name it accepts
// is always a safe file name (it names the binary and the state
// directory), and the two parts put back together are the name.
func FuzzSplitToolName(f *testing.F) {
	for _, s := range []string{"mail.send", "testkit.echo", "a.b.c", ".x", "x.", "../etc.passwd", "Mail.send", "m\x00.x", "é.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, tool, err := SplitToolName(name)
		if err != nil {
			return
		}
		if p+"."+tool != name {
			t.Fatalf("%q split into %q and %q", name, p, tool)
		}
		if err := CheckPluginName(p); err != nil {
			t.Fatalf("%q accepted with plugin part %q that CheckPluginName refuses: %v", name, p, err)
		}
		for _, part := range []string{p, tool} {
			if part == "" || len(part) > 64 || strings.Trim(part, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
				t.Fatalf("%q accepted with part %q", name, part)
			}
		}
		if p[0] < 'a' || p[0] > 'z' {
			t.Fatalf("%q accepted with a plugin part that does not start with a letter", name)
		}
	})
}
