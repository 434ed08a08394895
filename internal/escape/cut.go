package escape

import "unicode/utf8"

// Ellipsis ends a text that Cut shortened.
const Ellipsis = "…"

// Cut returns s if it is at most n bytes, else its longest prefix that
// ends on a rune boundary and leaves room for Ellipsis, then Ellipsis:
// never more than n bytes. A listing, a log line or an error text that
// quotes someone else's text cuts it here, so that its size is the
// caller's choice and not the author's.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	k := n - len(Ellipsis)
	if k <= 0 {
		return Ellipsis[:max(n, 0)]
	}
	// Step back over at most a rune's continuation bytes.
	for i := 0; i < utf8.UTFMax && k > 0 && !utf8.RuneStart(s[k]); i++ {
		k--
	}
	return s[:k] + Ellipsis
}
