package escape

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer line of text", 10, "a longe" + Ellipsis},
		{"ünïcode ✓✓✓", 9, "ünïc" + Ellipsis}, // ü and ï are 2 bytes each
		{"ünïcode ✓✓✓", 8, "ünï" + Ellipsis},  // "ünï" is 5 bytes
		{"ünïcode ✓✓✓", 7, "ün" + Ellipsis},   // not half of ï
		{"✓✓✓✓", 7, "✓" + Ellipsis},
		{"abcdef", 2, "\xe2\x80"[:2]},
		{"abcdef", 0, ""},
	} {
		got := Cut(tt.in, tt.n)
		if tt.n >= len(Ellipsis) && got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
		if len(got) > tt.n {
			t.Errorf("Cut(%q, %d) = %q: %d bytes", tt.in, tt.n, got, len(got))
		}
		if tt.n >= len(Ellipsis) && !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q: a rune is split", tt.in, tt.n, got)
		}
	}
}

// A huge text costs the cut's size, whatever its own.
func TestCutHuge(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 1<<20)
	got := Cut(s, 200)
	if len(got) > 200 || !utf8.ValidString(got) || !strings.HasSuffix(got, Ellipsis) {
		t.Fatalf("Cut of 2 MiB: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
