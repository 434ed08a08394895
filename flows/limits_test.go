package flows

import (
	"strings"
	"testing"
)

func TestDocSummary(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	for _, tt := range []struct{ doc, want string }{
		{"", ""},
		{"Say hello.", "Say hello."},
		{"\n\n   First line.  \nSecond line.", "First line."},
		{long, long[:MaxDocSummaryBytes-4] + "…"}, // not half an é
		{strings.Repeat("x", 7000000), strings.Repeat("x", MaxDocSummaryBytes-3) + "…"},
		{strings.Repeat(" ", 5000) + "late", ""}, // only a summary's worth is read
	} {
		got := DocSummary(tt.doc)
		if got != tt.want || len(got) > MaxDocSummaryBytes {
			t.Errorf("DocSummary(%.20q…) = %q, want %q", tt.doc, got, tt.want)
		}
	}
}
