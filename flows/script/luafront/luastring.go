package luafront

import (
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/luapat"
)

// The sandbox's string.find, match, gmatch and gsub match with luapat,
// whose every step counts against the step limit: gopher-lua's own
// matcher runs outside it, so a backtracking pattern would run for hours
// on one instruction. gsub builds its result once, refusing one over
// LuaMaxStringBytes.
func setPatternFuncs(L *lua.LState, str *lua.LTable, sc *stepCounter) {
	for name, fn := range map[string]func(*lua.LState, *stepCounter) int{
		"find": luaFind, "match": luaMatch, "gmatch": luaGmatch, "gsub": luaGsub,
	} {
		str.RawSetString(name, L.NewFunction(func(L *lua.LState) int { return fn(L, sc) }))
	}
}

// matcher is a luapat matcher with what the step limit has left.
func (c *stepCounter) matcher(subject, pattern string) *luapat.Matcher {
	m := luapat.New(subject, pattern, 0)
	c.refill(m)
	return m
}

// refill gives m what the step limit has left, before a match.
func (c *stepCounter) refill(m *luapat.Matcher) {
	m.Steps, m.Budget = 0, 1
	if c.steps < c.limit {
		m.Budget = c.limit - c.steps
	}
}

// charge counts m's steps and raises the matcher's error, if any: a
// budget overrun as the step limit, recursion past luapat.MaxDepth as
// the depth limit (both E_SCRIPT_LIMIT).
func (c *stepCounter) charge(L *lua.LState, fn string, m *luapat.Matcher, err error) {
	c.steps += m.Steps
	if errors.Is(err, luapat.ErrBudget) {
		c.steps = c.limit + 1
		L.RaiseError("%s: step limit exceeded while matching a pattern", fn)
	}
	if errors.Is(err, luapat.ErrDepth) {
		raiseLimit(L, flows.LimitDepth, "%s: pattern too complex: matching recursed more than %d deep (luapat.MaxDepth)", fn, luapat.MaxDepth)
	}
	if err != nil {
		L.RaiseError("%s: %v", fn, err)
	}
}

// luaInit is Lua 5.1's start position: negative from the end, clamped to
// the string.
func luaInit(L *lua.LState, n int, s string) int {
	i := L.OptInt(n, 1)
	if i < 0 {
		i += len(s) + 1
	}
	return min(max(i-1, 0), len(s))
}

func pushCaptures(L *lua.LState, src string, caps []luapat.Capture, s, e int) int {
	if len(caps) == 0 {
		L.Push(lua.LString(src[s:e]))
		return 1
	}
	for _, c := range caps {
		L.Push(captureValue(src, c))
	}
	return len(caps)
}

func captureValue(src string, c luapat.Capture) lua.LValue {
	if c.IsPos {
		return lua.LNumber(c.Start + 1)
	}
	return lua.LString(src[c.Start:c.End])
}

func luaFind(L *lua.LState, sc *stepCounter) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	init := luaInit(L, 3, src)
	if lua.LVAsBool(L.Get(4)) || !luapat.HasSpecials(pat) {
		i := strings.Index(src[init:], pat)
		scanned := len(src) - init
		if i >= 0 {
			scanned = i + len(pat)
		}
		chargeSteps(L, "string.find", uint64(scanned)/LuaBytesPerStep)
		if i < 0 {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(init + i + 1))
		L.Push(lua.LNumber(init + i + len(pat)))
		return 2
	}
	m := sc.matcher(src, pat)
	s, e, caps, err := m.Find(init)
	sc.charge(L, "string.find", m, err)
	if s < 0 {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(lua.LNumber(s + 1))
	L.Push(lua.LNumber(e))
	for _, c := range caps {
		L.Push(captureValue(src, c))
	}
	return 2 + len(caps)
}

func luaMatch(L *lua.LState, sc *stepCounter) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	m := sc.matcher(src, pat)
	s, e, caps, err := m.Find(luaInit(L, 3, src))
	sc.charge(L, "string.match", m, err)
	if s < 0 {
		L.Push(lua.LNil)
		return 1
	}
	return pushCaptures(L, src, caps, s, e)
}

func luaGmatch(L *lua.LState, sc *stepCounter) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := sc.matcher(src, pat)
		for ; pos <= len(src); pos++ {
			sc.refill(m)
			e, caps, err := m.MatchAt(pos, false)
			sc.charge(L, "string.gmatch", m, err)
			if e >= 0 {
				s := pos
				pos = e
				if e == s {
					pos++
				}
				return pushCaptures(L, src, caps, s, e)
			}
		}
		return 0
	}))
	return 1
}

func luaGsub(L *lua.LState, sc *stepCounter) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	L.CheckTypes(3, lua.LTString, lua.LTNumber, lua.LTTable, lua.LTFunction)
	repl := L.Get(3)
	limit := L.OptInt(4, len(src)+1)
	var b strings.Builder
	add := func(s string) {
		if int64(b.Len())+int64(len(s)) > LuaMaxStringBytes {
			tooLong(L, "string.gsub", int64(b.Len())+int64(len(s)))
		}
		b.WriteString(s)
	}
	m := sc.matcher(src, pat)
	anchored := m.Anchored()
	pos, n := 0, 0
	for n < limit {
		sc.refill(m)
		e, caps, err := m.MatchAt(pos, true)
		sc.charge(L, "string.gsub", m, err)
		if e >= 0 {
			n++
			add(gsubValue(L, src, pos, e, caps, repl))
		}
		switch {
		case e > pos:
			pos = e
		case pos < len(src):
			add(src[pos : pos+1])
			pos++
		default:
			pos = len(src) + 1
		}
		if pos > len(src) || anchored {
			break
		}
	}
	if pos < len(src) {
		add(src[pos:])
	}
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubValue is what replaces the match src[s:e].
func gsubValue(L *lua.LState, src string, s, e int, caps []luapat.Capture, repl lua.LValue) string {
	whole := src[s:e]
	capture := func(i int) lua.LValue {
		if i < len(caps) {
			return captureValue(src, caps[i])
		}
		if i == 0 {
			return lua.LString(whole)
		}
		L.RaiseError("string.gsub: invalid capture index %%%d in the replacement", i+1)
		return nil
	}
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		t := lua.LVAsString(r)
		var b strings.Builder
		for i := 0; i < len(t); i++ {
			if t[i] != '%' || i+1 == len(t) {
				b.WriteByte(t[i])
				continue
			}
			i++
			switch d := t[i]; {
			case d == '0':
				b.WriteString(whole)
			case '1' <= d && d <= '9':
				b.WriteString(lua.LVAsString(capture(int(d - '1'))))
			default:
				b.WriteByte(d)
			}
			if b.Len() > LuaMaxStringBytes {
				tooLong(L, "string.gsub", int64(b.Len()))
			}
		}
		return b.String()
	case *lua.LTable:
		v = L.GetTable(r, capture(0))
	case *lua.LFunction:
		L.Push(r)
		n := max(len(caps), 1)
		for i := range n {
			L.Push(capture(i))
		}
		L.Call(n, 1)
		v = L.Get(-1)
		L.Pop(1)
	}
	switch v := v.(type) {
	case *lua.LNilType:
		return whole
	case lua.LBool:
		if !v {
			return whole
		}
	case lua.LString, lua.LNumber:
		return lua.LVAsString(v)
	}
	L.RaiseError("string.gsub: invalid replacement value (a %s)", v.Type())
	return ""
}

// capStringFormat replaces gopher-lua's string.format, which hands the
// whole format to fmt.Sprintf at once: "%s%s%s%s" of a 512 KiB string
// built 2 MiB before anything could look at it. This one formats one
// directive at a time and refuses, as the other builders do, a result
// past LuaMaxStringBytes; what one directive may build is bounded by fmt
// itself (widths and precisions past a million are refused there), so no
// directive allocates more than about a limit's worth before the check.
func capStringFormat(L *lua.LState, str *lua.LTable) {
	str.RawSetString("format", L.NewFunction(luaFormat))
}

func luaFormat(L *lua.LState) int {
	format := L.CheckString(1)
	next := 2
	var b strings.Builder
	add := func(s string) {
		if n := int64(b.Len()) + int64(len(s)); n > LuaMaxStringBytes {
			tooLong(L, "string.format", n)
		}
		b.WriteString(s)
	}
	for i := 0; i < len(format); {
		j := strings.IndexByte(format[i:], '%')
		if j < 0 {
			add(format[i:])
			break
		}
		add(format[i : i+j])
		i += j
		end, width, ok := formatDirective(format, i)
		if !ok {
			L.RaiseError("string.format: invalid directive %q (no '*' or argument index, and it must end in a letter)", format[i:end])
		}
		d := format[i:end]
		i = end
		if d == "%%" {
			add("%")
			continue
		}
		if int64(b.Len())+int64(width) > LuaMaxStringBytes {
			tooLong(L, "string.format", int64(b.Len())+int64(width))
		}
		arg := L.CheckAny(next) // Lua's "bad argument #n (value expected)"
		next++
		if s, isStr := arg.(lua.LString); isStr && !strings.Contains(d, ".") && int64(b.Len())+int64(len(s)) > LuaMaxStringBytes {
			tooLong(L, "string.format", int64(b.Len())+int64(len(s)))
		}
		add(fmt.Sprintf(d, arg))
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// formatDirective reads the directive that starts at format[i] (a '%'):
// flags, a width, a precision and one verb letter, or "%%". It reports
// where the directive ends, its width, and false for what Lua has no
// word for: fmt's '*' and "[n]" would let one directive take other
// arguments, or reuse one.
func formatDirective(format string, i int) (end, width int, ok bool) {
	j := i + 1
	if j < len(format) && format[j] == '%' {
		return j + 1, 0, true
	}
	for j < len(format) && strings.IndexByte("-+ #0", format[j]) >= 0 {
		j++
	}
	for ; j < len(format) && '0' <= format[j] && format[j] <= '9'; j++ {
		width = min(width*10+int(format[j]-'0'), LuaMaxStringBytes+1)
	}
	if j < len(format) && format[j] == '.' {
		for j++; j < len(format) && '0' <= format[j] && format[j] <= '9'; j++ {
		}
	}
	if j == len(format) {
		return j, width, false
	}
	c := format[j]
	return j + 1, width, 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
