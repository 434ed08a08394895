package replay

import (
	"bytes"
	"testing"
)

// FuzzRead: a recording file is untrusted input (a repository's
// testdata, a colleague's attachment): Read refuses what it cannot trust
// with an *Error and never panics; what it takes, Write writes back to a
// file Read takes again.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	if err := Write(&buf, &Recording{Run: Run{ID: "run_1", Flow: "f", Phase: "completed"},
		Steps: []Step{{Node: "a", Visit: 1, Completed: true}}, Calls: []Call{{Node: "a", Visit: 1, Try: 1, Tool: "kit.echo", Output: []byte(`{"x":1}`)}}}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":"weirrun","format_version":2,"sha256":"","body":{}}`))
	f.Add([]byte(`{"format":"weirrun","format_version":1,"sha256":"00","body":{"run":{}}}`))
	f.Add([]byte(`{"format":"weirrun","format_version":1,"sha256":"x","body":1e999}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := Read(bytes.NewReader(data))
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("a refusal that is no *Error: %T %v", err, err)
			}
			return
		}
		var out bytes.Buffer
		if err := Write(&out, rec); err != nil {
			return // too large once indented: refused, as it should be
		}
		if _, err := Read(&out); err != nil {
			t.Fatalf("a recording read, written again, is refused: %v", err)
		}
	})
}
