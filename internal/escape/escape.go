// Package escape makes text that came from someone else (a flow's doc, a
// run's error, a plugin's log output) safe to show on an operator's
// terminal or in a log line: control characters, DEL and C1 codes are
// written as \u escapes (\u001b, \u0000, \u009b) and invalid UTF-8 bytes
// as \x escapes (\xff), so an escape sequence in a flow doc cannot
// recolour, retitle or rewrite the screen of whoever lists the flows, and
// a NUL cannot cut a log line.
// Newline and tab are kept by Writer: they lay out the writer's own
// output. The \u form keeps JSON valid: inside a JSON string it means the
// same character, and outside strings JSON has no such characters.
package escape

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// String returns s with every control character (newline and tab
// included), DEL, C1 code and invalid UTF-8 byte escaped.
func String(s string) string {
	if clean(s, false) {
		return s
	}
	var b strings.Builder
	appendEscaped(&b, []byte(s), false)
	return b.String()
}

// clean reports whether s needs no escaping.
func clean(s string, keepLayout bool) bool {
	for _, r := range s {
		if unsafe(r, keepLayout) {
			return false
		}
	}
	return true
}

// unsafe reports whether r must be escaped. utf8.RuneError stands for an
// invalid byte (a literal U+FFFD is escaped too, which is harmless).
func unsafe(r rune, keepLayout bool) bool {
	switch {
	case keepLayout && (r == '\n' || r == '\t'):
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r == utf8.RuneError:
		return true
	}
	return false
}

func appendEscaped(b *strings.Builder, p []byte, keepLayout bool) {
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(b, `\x%02x`, p[0])
		case !unsafe(r, keepLayout) || (r == utf8.RuneError && n == 3):
			b.Write(p[:n])
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
		p = p[n:]
	}
}

// Writer escapes what it writes to w as String does, except newline and
// tab. A rune split across two writes is escaped whole. Writer is safe
// for concurrent use when w is.
type Writer struct {
	w       io.Writer
	mu      sync.Mutex
	pending []byte // the start of a rune the next write may complete
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it. It reports len(p) written when the
// underlying write succeeds.
func (e *Writer) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	buf := p
	if len(e.pending) > 0 {
		buf = append(e.pending, p...)
		e.pending = nil
	}
	// Hold back an incomplete rune at the end for the next write.
	if tail := incompleteTail(buf); tail > 0 {
		e.pending = append([]byte(nil), buf[len(buf)-tail:]...)
		buf = buf[:len(buf)-tail]
	}
	var b strings.Builder
	b.Grow(len(buf))
	appendEscaped(&b, buf, true)
	if _, err := io.WriteString(e.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the writer under e, for a caller that writes its own
// terminal controls (and escapes what it shows with String).
func (e *Writer) Unwrap() io.Writer { return e.w }

// Flush writes, escaped, an incomplete rune held back from the last
// write.
func (e *Writer) Flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pending) == 0 {
		return nil
	}
	var b strings.Builder
	appendEscaped(&b, e.pending, true)
	e.pending = nil
	_, err := io.WriteString(e.w, b.String())
	return err
}

// incompleteTail returns how many bytes at the end of p start a UTF-8
// sequence that p does not finish (0 if none).
func incompleteTail(p []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(p); i++ {
		c := p[len(p)-i]
		if c < 0x80 {
			return 0 // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(p[len(p)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}
