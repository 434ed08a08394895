// Package textbound bounds the texts built from someone else's data: an
// error that lists what failed in a user's input, a value quoted back in
// a refusal. Such a text is stored (a run's error), answered (an API
// refusal) and recovered (a step replayed after a restart), so one
// hostile input must never make it large: a list keeps its first
// MaxItems entries and says how many more there were, and a quoted value
// is cut at MaxQuote bytes, and what a process printed is kept as the
// Tail of its last bytes. Every validator builds its texts here, so the
// bound is in one place.
package textbound

import (
	"fmt"
	"strings"

	"github.com/weirhq/weir/internal/escape"
)

const (
	// MaxItems is how many entries a List keeps.
	MaxItems = 20
	// MaxQuote is how many bytes of one entry or quoted value are kept.
	MaxQuote = 200
)

// Quote is s on one line (space runs, newlines included, made one
// space) and cut after MaxQuote bytes on a rune boundary (escape.Cut),
// saying how long it was. It reads only the head of a long s.
func Quote(s string) string {
	head := s
	if len(head) > 4*MaxQuote {
		head = strings.ToValidUTF8(head[:4*MaxQuote], "") // a rune split at the end goes
	}
	line := strings.Join(strings.Fields(head), " ")
	if len(head) == len(s) && len(line) <= MaxQuote {
		return line
	}
	cut := escape.Cut(line, MaxQuote+len(escape.Ellipsis))
	if cut == line {
		cut += escape.Ellipsis // the head was cut, the line was not
	}
	return fmt.Sprintf("%s (%d bytes in all)", cut, len(s))
}

// List collects entries and keeps the first MaxItems, each Quoted; the
// rest are only counted. Its zero value is ready to use.
type List struct {
	items []string
	more  int
}

// Full says Add would only count: a caller producing entries lazily can
// stop building their texts.
func (l *List) Full() bool { return len(l.items) >= MaxItems }

// Add adds one entry.
func (l *List) Add(s string) {
	if l.Full() {
		l.more++
		return
	}
	l.items = append(l.items, Quote(s))
}

// Skip counts n entries that were not built (the caller saw Full).
func (l *List) Skip(n int) { l.more += n }

// Len is the number of entries added or skipped.
func (l *List) Len() int { return len(l.items) + l.more }

// Join is the kept entries joined with sep, then "and K more".
func (l *List) Join(sep string) string {
	s := strings.Join(l.items, sep)
	if l.more > 0 {
		s += fmt.Sprintf("%sand %d more", sep, l.more)
	}
	return s
}
