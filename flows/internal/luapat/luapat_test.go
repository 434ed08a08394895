package luapat

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// capText renders a match's captures as Lua returns them: substrings, and
// positions as 1-based numbers.
func capText(src string, caps []Capture) []string {
	var out []string
	for _, c := range caps {
		if c.IsPos {
			out = append(out, "@"+strconv.Itoa(c.Start+1))
			continue
		}
		out = append(out, src[c.Start:c.End])
	}
	return out
}

func TestFind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, subject, pattern string
		init                   int
		match                  string // what matched; no match when none
		caps                   []string
		none                   bool
	}{
		{"literal", "hello world", "o w", 0, "o w", nil, false},
		{"no match", "hello", "xyz", 0, "", nil, true},
		{"init skips", "abcabc", "b", 2, "b", nil, false}, // the second b
		{"class", "abc 123 def", "%d+", 0, "123", nil, false},
		{"negated class", "   x  ", "%S", 0, "x", nil, false},
		{"set and range", "xyz-42", "[%-0-9]+", 0, "-42", nil, false},
		{"negated set", "aaab", "[^a]", 0, "b", nil, false},
		{"dot and star", "a1b2c", "a.*c", 0, "a1b2c", nil, false},
		{"lazy", "<a><b>", "<.->", 0, "<a>", nil, false},
		{"optional", "color colour", "colou?r", 6, "colour", nil, false},
		{"captures", "key = value", "(%w+)%s*=%s*(%w+)", 0, "key = value", []string{"key", "value"}, false},
		{"nested captures", "abc", "((a)(b))c", 0, "abc", []string{"ab", "a", "b"}, false},
		{"position captures", "hello", "()ll()", 0, "ll", []string{"@3", "@5"}, false},
		{"back reference", `say "hi" now`, `(["'])(.-)%1`, 0, `"hi"`, []string{`"`, "hi"}, false},
		{"balanced", "f(a(b)c) d", "%b()", 0, "(a(b)c)", nil, false},
		{"frontier", "THE (quick) fox", "%f[%a]%a+", 4, "quick", nil, false},
		{"frontier at end", "word", "%a%f[%A]", 0, "d", nil, false},
		{"anchored start", "xab", "^ab", 0, "", nil, true},
		{"anchored at init", "xab", "^ab", 1, "ab", nil, false},
		{"anchored end", "abab", "ab$", 0, "ab", nil, false},
		{"dollar not last", "a$b", "a$b", 0, "a$b", nil, false},
		{"empty pattern", "abc", "", 1, "", nil, false},
		{"escaped special", "1+1=2", "%+", 0, "+", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := New(tt.subject, tt.pattern, 0)
			s, e, caps, err := m.Find(tt.init)
			if err != nil {
				t.Fatal(err)
			}
			if tt.none {
				if s != -1 {
					t.Fatalf("matched %q at %d, want no match", tt.subject[s:e], s)
				}
				return
			}
			if s < 0 || tt.subject[s:e] != tt.match {
				t.Fatalf("got start %d end %d, want %q", s, e, tt.match)
			}
			if got := capText(tt.subject, caps); strings.Join(got, "|") != strings.Join(tt.caps, "|") {
				t.Fatalf("captures %q, want %q", got, tt.caps)
			}
			if m.Steps == 0 {
				t.Fatal("no steps counted")
			}
		})
	}
}

// MatchAt matches at one position only, and its "^" is a character
// unless skipCaret says it anchors (gmatch's rule).
func TestMatchAt(t *testing.T) {
	t.Parallel()
	m := New("abab", "ab", 0)
	if e, _, err := m.MatchAt(1, false); err != nil || e != -1 {
		t.Fatalf("at 1: end %d, %v", e, err)
	}
	if e, _, err := m.MatchAt(2, false); err != nil || e != 4 {
		t.Fatalf("at 2: end %d, %v", e, err)
	}
	if e, _, _ := New("^a", "^a", 0).MatchAt(0, false); e != 2 {
		t.Fatalf("^ as a character: end %d", e)
	}
	if e, _, _ := New("a", "^a", 0).MatchAt(0, true); e != 1 {
		t.Fatalf("^ as an anchor: end %d", e)
	}
}

func TestMalformedPatterns(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]string{
		"%":                                "malformed pattern (ends with '%')",
		"[a":                               "malformed pattern (missing ']')",
		"[%":                               "malformed pattern",
		"(a":                               "unfinished capture",
		"a)":                               "invalid pattern capture",
		"%1":                               "invalid capture index",
		"(a)%2":                            "invalid capture index",
		"%b(":                              "missing arguments to '%b'",
		"%fa":                              "missing '[' after '%f' in pattern",
		strings.Repeat("(", MaxCaptures+1): "too many captures",
	} {
		_, _, _, err := New("a(a)", pattern, 0).Find(0)
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Msg, want) {
			t.Errorf("%q: got %v, want *Error containing %q", pattern, err, want)
		}
	}
}

// The budget is exact: a match that takes n steps succeeds with a budget
// of n and fails with ErrBudget under n-1, having counted the step it
// was refused; a backtracking bomb stops at its budget.
func TestBudget(t *testing.T) {
	t.Parallel()
	subject, pattern := strings.Repeat("a", 30), strings.Repeat("a*", 8)+"b"
	free := New(subject, strings.Repeat("a*", 3)+"$", 0)
	if _, e, _, err := free.Find(0); err != nil || e != 30 {
		t.Fatalf("unbudgeted: end %d, %v", e, err)
	}
	n := free.Steps
	at := New(subject, strings.Repeat("a*", 3)+"$", n)
	if _, e, _, err := at.Find(0); err != nil || e != 30 || at.Steps != n {
		t.Fatalf("budget %d: end %d, steps %d, %v", n, e, at.Steps, err)
	}
	under := New(subject, strings.Repeat("a*", 3)+"$", n-1)
	if _, _, _, err := under.Find(0); !errors.Is(err, ErrBudget) || under.Steps != n {
		t.Fatalf("budget %d: steps %d, %v; want ErrBudget after %d steps", n-1, under.Steps, err, n)
	}
	bomb := New(subject, pattern, 100_000)
	if _, _, _, err := bomb.Find(0); !errors.Is(err, ErrBudget) || bomb.Steps != 100_001 {
		t.Fatalf("bomb: steps %d, %v", bomb.Steps, err)
	}
}

// Recursion stops at MaxDepth with ErrDepth, a limit rather than a
// malformed pattern.
func TestMaxDepth(t *testing.T) {
	t.Parallel()
	subject := strings.Repeat("a", 2*MaxDepth)
	if _, e, _, err := New(subject, strings.Repeat("a?", MaxDepth-1), 0).Find(0); err != nil || e != MaxDepth-1 {
		t.Fatalf("%d items: end %d, %v", MaxDepth-1, e, err)
	}
	_, _, _, err := New(subject, strings.Repeat("a?", MaxDepth), 0).Find(0)
	var pe *Error
	if !errors.Is(err, ErrDepth) || errors.As(err, &pe) {
		t.Fatalf("%d items: %v, want ErrDepth", MaxDepth, err)
	}
}

func TestHasSpecials(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]bool{"abc": false, "a.c": true, "a%d": true, "": false, "a-b": true, "x^": true} {
		if got := HasSpecials(pattern); got != want {
			t.Errorf("%q: %v, want %v", pattern, got, want)
		}
	}
}
