package escape

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"plain doc, ünïcode ✓", "plain doc, ünïcode ✓"},
		{"\x1b[2J\x1b]0;pwned\x07", `\u001b[2J\u001b]0;pwned\u0007`},
		{"nul\x00 ff\xff del\x7f", `nul\u0000 ff\xff del\u007f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"two\nlines\r\tx", `two\u000alines\u000d\u0009x`},
		{"cut \xe2\x9c", `cut \xe2\x9c`},
	} {
		if got := String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriterKeepsLayoutAndJoinsSplitRunes(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	w := NewWriter(&out)
	for _, p := range []string{"a\tb\n", "\x1b[31mred", " \xe2\x9c", "\x93 ok\n", "\xff", "\xe2"} {
		if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "a\tb\n" + `\u001b[31mred` + " ✓ ok\n" + `\xff\xe2`
	if out.String() != want {
		t.Fatalf("wrote %q, want %q", out.String(), want)
	}
}
