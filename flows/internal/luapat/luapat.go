// Package luapat matches Lua 5.1 patterns under a step budget.
//
// gopher-lua's own matcher (its pm package) is Go code that the Lua
// instruction limit does not see: a pattern such as ("a*"):rep(20).."b"
// backtracks for hours while the VM counts one instruction. The Lua
// sandbox of package flows replaces string.find, match, gmatch and gsub
// with functions built on this matcher, which charges every step it takes
// (each character tested against a pattern item, each backtrack) to the
// same budget as the VM's instructions, so a pathological pattern ends
// with the step limit, exactly and the same every time.
package luapat

import (
	"errors"
	"fmt"
)

// MaxCaptures is the most captures one pattern may declare, as in Lua.
const MaxCaptures = 32

// MaxDepth bounds the matcher's recursion (one level per pattern item
// that may backtrack): deeper patterns are "too complex".
const MaxDepth = 200

// ErrBudget is returned when matching would take more steps than the
// budget holds.
var ErrBudget = errors.New("pattern matching exceeded the step limit")

// ErrDepth is returned when matching would recurse more than MaxDepth
// levels: the pattern is too complex for the subject.
var ErrDepth = errors.New("pattern too complex")

// Error is a malformed pattern.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Capture is one captured substring, or a position capture (Pos: the
// 1-based position, as Lua returns it).
type Capture struct {
	Start, End int // byte offsets in the subject
	IsPos      bool
}

// Matcher matches one pattern against one subject. Steps counts every
// step taken; Budget, when positive, is the most steps allowed.
type Matcher struct {
	src, pat string
	Steps    uint64
	Budget   uint64
	depth    int
	caps     [MaxCaptures]struct {
		start, len int // len: capUnfinished, capPosition or a length
	}
	ncap int
}

const (
	capUnfinished = -1
	capPosition   = -2
)

type failure struct{ err error }

// New returns a matcher of pattern over subject.
func New(subject, pattern string, budget uint64) *Matcher {
	return &Matcher{src: subject, pat: pattern, Budget: budget}
}

// Anchored reports whether the pattern starts with "^": it then matches
// only where the search starts (except in gmatch, where "^" is an
// ordinary character).
func (m *Matcher) Anchored() bool { return len(m.pat) > 0 && m.pat[0] == '^' }

// Find looks for the first match starting at or after init (a byte
// offset), or only at init when the pattern is Anchored. It returns the
// match's bounds and its captures (none when the pattern declares none);
// start is -1 when there is none.
func (m *Matcher) Find(init int) (start, end int, caps []Capture, err error) {
	for s := init; s <= len(m.src); s++ {
		e, caps, err := m.MatchAt(s, m.Anchored())
		if err != nil || e >= 0 {
			return s, e, caps, err
		}
		if m.Anchored() {
			break
		}
	}
	return -1, -1, nil, nil
}

// MatchAt matches the pattern (after its "^" when skipCaret) at s only:
// the end of the match and its captures, or end -1.
func (m *Matcher) MatchAt(s int, skipCaret bool) (end int, caps []Capture, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			end, caps, err = -1, nil, f.err
		}
	}()
	p := 0
	if skipCaret && m.Anchored() {
		p = 1
	}
	m.ncap, m.depth = 0, 0
	if e := m.match(s, p); e >= 0 {
		return e, m.captures(), nil
	}
	return -1, nil, nil
}

func (m *Matcher) step() {
	m.Steps++
	if m.Budget > 0 && m.Steps > m.Budget {
		panic(failure{ErrBudget})
	}
}

func (m *Matcher) fail(format string, args ...any) {
	panic(failure{&Error{Msg: fmt.Sprintf(format, args...)}})
}

// captures are a match's captures.
func (m *Matcher) captures() []Capture {
	out := make([]Capture, m.ncap)
	for i := range m.ncap {
		c := m.caps[i]
		switch c.len {
		case capUnfinished:
			m.fail("unfinished capture")
		case capPosition:
			out[i] = Capture{Start: c.start, End: c.start, IsPos: true}
		default:
			out[i] = Capture{Start: c.start, End: c.start + c.len}
		}
	}
	return out
}

// match matches the pattern from p against the subject from s and
// returns the end of the match, or -1.
func (m *Matcher) match(s, p int) int {
	m.depth++
	if m.depth > MaxDepth {
		panic(failure{ErrDepth})
	}
	defer func() { m.depth-- }()
	for {
		m.step()
		if p == len(m.pat) {
			return s
		}
		switch m.pat[p] {
		case '(':
			if p+1 < len(m.pat) && m.pat[p+1] == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case '$':
			if p+1 == len(m.pat) {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		case '%':
			if p+1 < len(m.pat) {
				switch c := m.pat[p+1]; {
				case c == 'b':
					if s = m.balance(s, p+2); s < 0 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					p += 2
					if p >= len(m.pat) || m.pat[p] != '[' {
						m.fail("missing '[' after '%%f' in pattern")
					}
					ep := m.classEnd(p)
					var prev, cur byte
					if s > 0 {
						prev = m.src[s-1]
					}
					if s < len(m.src) {
						cur = m.src[s]
					}
					if m.inSet(prev, p, ep-1) || !m.inSet(cur, p, ep-1) {
						return -1
					}
					p = ep
					continue
				case c >= '0' && c <= '9':
					if s = m.backref(s, int(c-'1')); s < 0 {
						return -1
					}
					p += 2
					continue
				}
			}
		}
		ep := m.classEnd(p)
		ok := s < len(m.src) && m.single(m.src[s], p, ep)
		if ep < len(m.pat) {
			switch m.pat[ep] {
			case '?':
				if ok {
					if r := m.match(s+1, ep+1); r >= 0 {
						return r
					}
				}
				p = ep + 1
				continue
			case '*':
				return m.maxExpand(s, p, ep)
			case '+':
				if !ok {
					return -1
				}
				return m.maxExpand(s+1, p, ep)
			case '-':
				return m.minExpand(s, p, ep)
			}
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

func (m *Matcher) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(m.src) && m.single(m.src[s+i], p, ep) {
		m.step()
		i++
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1); r >= 0 {
			return r
		}
	}
	return -1
}

func (m *Matcher) minExpand(s, p, ep int) int {
	for {
		if r := m.match(s, ep+1); r >= 0 {
			return r
		}
		if s < len(m.src) && m.single(m.src[s], p, ep) {
			s++
			continue
		}
		return -1
	}
}

func (m *Matcher) startCapture(s, p, what int) int {
	if m.ncap >= MaxCaptures {
		m.fail("too many captures")
	}
	m.caps[m.ncap].start, m.caps[m.ncap].len = s, what
	m.ncap++
	r := m.match(s, p)
	if r < 0 {
		m.ncap--
	}
	return r
}

func (m *Matcher) endCapture(s, p int) int {
	l := -1
	for i := m.ncap - 1; i >= 0; i-- {
		if m.caps[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.fail("invalid pattern capture")
	}
	m.caps[l].len = s - m.caps[l].start
	r := m.match(s, p)
	if r < 0 {
		m.caps[l].len = capUnfinished
	}
	return r
}

func (m *Matcher) balance(s, p int) int {
	if p+1 >= len(m.pat) {
		m.fail("missing arguments to '%%b'")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	open, close := m.pat[p], m.pat[p+1]
	depth := 1
	for i := s + 1; i < len(m.src); i++ {
		m.step()
		switch m.src[i] {
		case close:
			if depth--; depth == 0 {
				return i + 1
			}
		case open:
			depth++
		}
	}
	return -1
}

func (m *Matcher) backref(s, l int) int {
	if l < 0 || l >= m.ncap || m.caps[l].len == capUnfinished {
		m.fail("invalid capture index")
	}
	c := m.caps[l]
	n := 0
	if c.len > 0 {
		n = c.len
	}
	for i := range n {
		m.step()
		if s+i >= len(m.src) || m.src[s+i] != m.src[c.start+i] {
			return -1
		}
	}
	return s + n
}

// classEnd is the end of the single-character class at p.
func (m *Matcher) classEnd(p int) int {
	c := m.pat[p]
	p++
	switch c {
	case '%':
		if p >= len(m.pat) {
			m.fail("malformed pattern (ends with '%%')")
		}
		return p + 1
	case '[':
		if p < len(m.pat) && m.pat[p] == '^' {
			p++
		}
		for first := true; ; first = false {
			if p >= len(m.pat) {
				m.fail("malformed pattern (missing ']')")
			}
			c := m.pat[p]
			p++
			if c == ']' && !first {
				return p
			}
			if c == '%' {
				if p >= len(m.pat) {
					m.fail("malformed pattern (missing ']')")
				}
				p++
			}
		}
	}
	return p
}

// single reports whether c matches the class from p to ep.
func (m *Matcher) single(c byte, p, ep int) bool {
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return classMatches(c, m.pat[p+1])
	case '[':
		return m.inSet(c, p, ep-1)
	}
	return m.pat[p] == c
}

// inSet reports whether c is in the set from p ('[') to ec (']').
func (m *Matcher) inSet(c byte, p, ec int) bool {
	want := true
	p++
	if m.pat[p] == '^' {
		want = false
		p++
	}
	for ; p < ec; p++ {
		switch {
		case m.pat[p] == '%' && p+1 < ec:
			p++
			if classMatches(c, m.pat[p]) {
				return want
			}
		case p+2 < ec && m.pat[p+1] == '-':
			if m.pat[p] <= c && c <= m.pat[p+2] {
				return want
			}
			p += 2
		case m.pat[p] == c:
			return want
		}
	}
	return !want
}

// classMatches reports whether c is in the class %cl.
func classMatches(c, cl byte) bool {
	var ok bool
	switch cl | 0x20 {
	case 'a':
		ok = isAlpha(c)
	case 'c':
		ok = c < 32 || c == 127
	case 'd':
		ok = '0' <= c && c <= '9'
	case 'l':
		ok = 'a' <= c && c <= 'z'
	case 'p':
		ok = isPunct(c)
	case 's':
		ok = c == ' ' || ('\t' <= c && c <= '\r')
	case 'u':
		ok = 'A' <= c && c <= 'Z'
	case 'w':
		ok = isAlpha(c) || ('0' <= c && c <= '9')
	case 'x':
		ok = ('0' <= c && c <= '9') || ('a' <= c|0x20 && c|0x20 <= 'f')
	case 'z':
		ok = c == 0
	default:
		return cl == c
	}
	if 'A' <= cl && cl <= 'Z' {
		return !ok
	}
	return ok
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func isPunct(c byte) bool {
	return c > 32 && c < 127 && !isAlpha(c) && !('0' <= c && c <= '9')
}

// HasSpecials reports whether pattern uses any character that is not
// matched literally, so that a plain search finds what it would.
func HasSpecials(pattern string) bool {
	for i := range len(pattern) {
		switch pattern[i] {
		case '^', '$', '*', '+', '?', '.', '(', ')', '[', ']', '%', '-':
			return true
		}
	}
	return false
}
