package textbound

import (
	"strings"
	"testing"
)

func TestListKeepsTheFirstEntries(t *testing.T) {
	t.Parallel()
	var l List
	for range 120_000 {
		l.Add(strings.Repeat("p", 60_000))
	}
	s := l.Join("; ")
	if max := MaxItems*(MaxQuote+40) + 40; len(s) > max {
		t.Fatalf("%d bytes from 120,000 entries of 60 KB, want at most %d", len(s), max)
	}
	if !strings.HasSuffix(s, "and 119980 more") || l.Len() != 120_000 {
		t.Errorf("tail %q, len %d", s[len(s)-30:], l.Len())
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"short", "short"},
		{"two\nlines\t here", "two lines here"},
		{strings.Repeat("é", 150), strings.Repeat("é", 100) + "… (300 bytes in all)"},
		{strings.Repeat("a", 10_000), strings.Repeat("a", 200) + "… (10000 bytes in all)"},
		{strings.Repeat("a", 799) + "é" + "z", strings.Repeat("a", 200) + "… (802 bytes in all)"},
		{strings.Repeat(" ", 790) + strings.Repeat("é", 10), "ééééé… (810 bytes in all)"},
	} {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%.20q…) = %.60q…, want %.60q…", tt.in, got, tt.want)
		}
	}
}
