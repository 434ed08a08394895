package luafront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script/front"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
	"go.starlark.net/starlark"
)

// Lua is the second flow language. A file whose path ends in ".lua" is
// parsed by gopher-lua and run in a sandbox whose builtins (flow, task,
// subflow, fanout, wait, branch, agent, schedule, on_event) hand their
// table to the Starlark builtins of the same name through a
// front.Declarer: one set of
// parameters, one set of checks and diagnostics, one IR, whichever
// language declared a flow.
//
// A builtin takes one table: the node id (the flow name for flow) as its
// first positional element, every other parameter by name:
//
//	task{"fetch", tool = "http.get", args = function(ctx) return {url = ctx.input.url} end}
//
// Values cross as JSON: nil, booleans, strings, numbers (a whole number is
// an integer and must lie within ±2^53, where a Lua number is exact), and
// tables. A table with keys 1..n is a list, one with string keys an
// object; an empty table is an object unless made by array{} (object{}
// says it explicitly). A callable's run-time result follows the same rule,
// except that an empty table returned by items is the empty list.

// LuaMaxStringBytes bounds the strings .., string.rep, string.format,
// table.concat, string.gsub and json.encode may build, so that a few instructions cannot allocate
// without bound.
const LuaMaxStringBytes = 1 << 20

// luaMaxInt is the largest integer a Lua number (a float64) holds exactly.
const luaMaxInt = 1 << 53

// Language is Lua's front end; the loader gives it the files whose path
// ends in ".lua".
type Language struct{}

var _ front.Language = Language{}

// Name implements front.Language.
func (Language) Name() string { return "Lua" }

// Ext implements front.Language.
func (Language) Ext() string { return ".lua" }

// luaProgram is a parsed Lua file: its path, its compiled chunk and, by
// line, what the syntax tree says about each builtin call written there.
type luaProgram struct {
	path  string
	proto *lua.FunctionProto
	sites map[int]*front.Site
}

var luaParseLine = regexp.MustCompile(`line:(\d+)\(column:\d+\)`)

// Compile implements front.Language.
func (Language) Compile(f flows.File) (front.Program, error) {
	path := f.Path
	chunk, err := parse.Parse(bytes.NewReader(f.Src), path)
	if err != nil {
		se := &front.SyntaxError{Pos: flows.Pos{File: path}, Msg: err.Error()}
		var pe *parse.Error
		if errors.As(err, &pe) {
			se.Pos.Line = pe.Pos.Line
			se.Msg = pe.Message
			if pe.Token != "" {
				se.Msg += " near " + strconv.Quote(pe.Token)
			}
		} else if m := luaParseLine.FindStringSubmatch(err.Error()); m != nil {
			se.Pos.Line, _ = strconv.Atoi(m[1])
		}
		return nil, se
	}
	sites := luaSites(path, chunk) // before compiling: it adjusts the tree
	proto, err := lua.Compile(chunk, path)
	if err != nil {
		return nil, &front.SyntaxError{Pos: flows.Pos{File: path}, Msg: err.Error()}
	}
	return &luaProgram{path: path, proto: proto, sites: sites}, nil
}

// luaSites indexes the builtin calls of a chunk by line: where the call
// is and where each of its named parameters (and each element of a table
// written for one) is. Lua keeps lines, not columns.
func luaSites(file string, chunk []ast.Stmt) map[int]*front.Site {
	sites := map[int]*front.Site{}
	var elems []front.LineCol
	var calls []*ast.FuncCallExpr
	var tables []*ast.TableExpr
	walkAST(reflect.ValueOf(chunk), func(n any) {
		switch n := n.(type) {
		case *ast.FuncCallExpr:
			calls = append(calls, n)
		case *ast.TableExpr:
			tables = append(tables, n)
		case *ast.FunctionExpr:
			padParams(n)
		}
	})
	for _, t := range tables { // after the walk: it rewrote .. into calls
		adjustLastField(t)
	}
	type pending struct {
		site *front.Site
		kws  []front.KwArg
	}
	var ps []pending
	for _, c := range calls {
		id, ok := c.Func.(*ast.IdentExpr)
		if !ok || !luaBuiltinNames[id.Value] || len(c.Args) != 1 {
			continue
		}
		t, ok := c.Args[0].(*ast.TableExpr)
		if !ok {
			continue
		}
		s := &front.Site{Start: flows.Pos{File: file, Line: c.Line()}}
		var kws []front.KwArg
		for _, f := range t.Fields {
			k, ok := f.Key.(*ast.StringExpr)
			if !ok {
				continue
			}
			kw := front.KwArg{Name: k.Value, Line: int32(k.Line())}
			if lt, ok := f.Value.(*ast.TableExpr); ok {
				kw.Lo = int32(len(elems))
				for _, e := range lt.Fields {
					if e.Key == nil {
						elems = append(elems, front.LineCol{Line: int32(e.Value.Line())})
					}
				}
				kw.Hi = int32(len(elems))
			}
			kws = append(kws, kw)
		}
		ps = append(ps, pending{s, kws})
		for _, l := range []int{c.Line(), c.LastLine(), t.Line(), t.LastLine()} {
			if _, taken := sites[l]; !taken {
				sites[l] = s
			}
		}
	}
	for _, p := range ps {
		p.site.KW = p.kws
		p.site.Elems = &elems
	}
	return sites
}

// adjustLastField keeps a call written as a table's last named field to
// one value: gopher-lua's compiler otherwise appends all its results to
// the list part, as if it were a positional element ({"a", args = f()}
// would get f()'s result as element 2).
func adjustLastField(t *ast.TableExpr) {
	if len(t.Fields) == 0 || t.Fields[len(t.Fields)-1].Key == nil {
		return
	}
	switch v := t.Fields[len(t.Fields)-1].Value.(type) {
	case *ast.FuncCallExpr:
		v.AdjustRet = true
	case *ast.Comma3Expr:
		v.AdjustRet = true
	}
}

// luaPadName is the parameter padParams adds. It is no identifier, so no
// script can read or assign it.
const luaPadName = "weir pad"

// padParams gives a function without varargs that declares parameters
// one more, last, that nothing names. gopher-lua compiles p = (f(p)),
// where p is a function's last parameter, by loading f into p's register
// before reading p for the argument (yuin/gopher-lua's compileFuncCallExpr
// reuses that register): the call would get f instead of p. With the pad
// last, no script's parameter is. Arity is the declared count: see
// luaParams.
func padParams(f *ast.FunctionExpr) {
	if f.ParList != nil && !f.ParList.HasVargs && len(f.ParList.Names) > 0 {
		f.ParList.Names = append(f.ParList.Names, luaPadName)
	}
}

// luaParams is the number of parameters a compiled function declares,
// without padParams' pad.
func luaParams(p *lua.FunctionProto) int {
	n := int(p.NumParameters)
	if n > 0 && p.IsVarArg == 0 {
		n--
	}
	return n
}

// walkAST visits every pointer of a syntax tree, by reflection:
// gopher-lua's ast has no walker.
func walkAST(v reflect.Value, visit func(any)) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Kind() == reflect.Pointer {
			visit(v.Interface())
		}
		walkAST(v.Elem(), visit)
	case reflect.Slice:
		for i := range v.Len() {
			e := v.Index(i)
			if c, ok := e.Interface().(*ast.StringConcatOpExpr); ok && e.CanSet() {
				e.Set(reflect.ValueOf(cappedConcat(c)))
			}
			walkAST(e, visit)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f := v.Field(i)
				if c, ok := f.Interface().(*ast.StringConcatOpExpr); ok && f.CanSet() {
					f.Set(reflect.ValueOf(cappedConcat(c)))
				}
				walkAST(f, visit)
			}
		}
	}
}

// luaConcatName is the global that holds the capped concatenation. It is
// no identifier, and scripts have no _G or getfenv, so no script can
// reach or replace it.
const luaConcatName = "weir concat"

// cappedConcat rewrites a .. b as a call of the capped concatenation:
// gopher-lua's own instruction allocates without a bound, so that a few
// doublings would build a gigabyte.
func cappedConcat(c *ast.StringConcatOpExpr) ast.Expr {
	fn := &ast.IdentExpr{Value: luaConcatName}
	fn.SetLine(c.Line())
	fn.SetLastLine(c.LastLine())
	call := &ast.FuncCallExpr{Func: fn, Args: []ast.Expr{c.Lhs, c.Rhs}}
	call.SetLine(c.Line())
	call.SetLastLine(c.LastLine())
	return call
}

func luaConcat(L *lua.LState) int {
	a, b := L.Get(1), L.Get(2)
	if lua.LVCanConvToString(a) && lua.LVCanConvToString(b) {
		as, bs := lua.LVAsString(a), lua.LVAsString(b)
		if n := int64(len(as)) + int64(len(bs)); n > LuaMaxStringBytes {
			tooLong(L, "..", n)
		}
		L.Push(lua.LString(as + bs))
		return 1
	}
	for _, v := range []lua.LValue{a, b} {
		if mm := L.GetMetaField(v, "__concat"); mm != lua.LNil {
			L.Push(mm)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			return 1
		}
	}
	L.RaiseError("cannot perform concat operation between %s and %s", a.Type(), b.Type())
	return 0
}

// stepCounter is the context a sandboxed LState runs under: gopher-lua
// consults Done before every VM instruction, so counting the calls gives
// a deterministic instruction limit.
type stepCounter struct {
	context.Context
	steps, limit uint64
	done         chan struct{}
	// hit is the last script limit other than steps that a builtin
	// raised (raiseLimit).
	hit *flows.LimitError
}

var errLuaSteps = errors.New("step limit exceeded")

func newStepCounter(limit uint64) *stepCounter {
	d := make(chan struct{})
	close(d)
	return &stepCounter{Context: context.Background(), limit: limit, done: d}
}

func (c *stepCounter) Done() <-chan struct{} {
	c.steps++
	if c.steps > c.limit {
		return c.done
	}
	return nil
}

func (c *stepCounter) Err() error {
	if c.steps > c.limit {
		return errLuaSteps
	}
	return nil
}

func (c *stepCounter) exceeded() bool { return c.steps > c.limit }

// limitError is the script limit that ended an execution whose error
// message (without positions) is msg, or nil if none did: the step limit
// when it ran out, or the limit a builtin raised with that very message.
// A script that raises the same text itself with error() hit no limit.
func (c *stepCounter) limitError(msg, what string) *flows.LimitError {
	if c.exceeded() {
		return &flows.LimitError{Limit: flows.LimitSteps, Detail: fmt.Sprintf("step limit exceeded: the %s ran more than %d steps (an endless loop?)", what, c.limit)}
	}
	if c.hit != nil && msg == c.hit.Error() {
		return c.hit
	}
	return nil
}

// raiseLimit stops the script with a script limit (a Lua error the
// script may catch with pcall), reported as E_SCRIPT_LIMIT if it ends
// the execution.
func raiseLimit(L *lua.LState, limit flows.Limit, format string, args ...any) {
	le := &flows.LimitError{Limit: limit, Detail: fmt.Sprintf(format, args...)}
	if sc, ok := L.Context().(*stepCounter); ok {
		sc.hit = le
	}
	L.RaiseError("%s", le.Error())
}

// Lua standard functions a flow script does not get: files, code loading,
// environments (_G included), the collector and randomness. The os, io, debug, package,
// coroutine and channel libraries are never opened.
var luaRemoved = map[string][]string{
	"":       {"_G", "dofile", "load", "loadfile", "loadstring", "require", "module", "collectgarbage", "getfenv", "setfenv", "newproxy", "_printregs"},
	"math":   {"random", "randomseed"},
	"string": {"dump"},
}

// newLuaSandbox is an LState with only base, table, string and math,
// less what luaRemoved names, size caps on the string builders, and an
// instruction limit.
func newLuaSandbox(limit uint64) (*lua.LState, *stepCounter) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 200, RegistrySize: 1024, RegistryMaxSize: 1 << 20})
	for _, open := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(open.fn))
		L.Push(lua.LString(open.name))
		L.Call(1, 0)
	}
	g := L.G.Global
	for lib, names := range luaRemoved {
		t := g
		if lib != "" {
			t = L.GetField(g, lib).(*lua.LTable)
		}
		for _, n := range names {
			t.RawSetString(n, lua.LNil)
		}
	}
	L.SetGlobal("print", L.NewFunction(func(*lua.LState) int { return 0 })) // no output channel
	L.SetGlobal(luaConcatName, L.NewFunction(luaConcat))
	str := L.GetField(g, "string").(*lua.LTable)
	tbl := L.GetField(g, "table").(*lua.LTable)
	capStringRep(L, str)
	capStringFormat(L, str)
	capTableConcat(L, tbl)
	sc := newStepCounter(limit)
	setPatternFuncs(L, str, sc)
	var names []string
	str.ForEach(func(k, _ lua.LValue) { names = append(names, k.String()) })
	for _, n := range names {
		chargeBytes(L, str, n)
	}
	capResults(L, str, "byte", func(L *lua.LState) int {
		n := len(L.CheckString(1))
		i, j := L.OptInt(2, 1), L.OptInt(3, L.OptInt(2, 1))
		if i < 0 {
			i += n + 1
		}
		if j < 0 {
			j += n + 1
		}
		return min(j, n) - max(i, 1) + 1
	})
	capResults(L, g, "unpack", func(L *lua.LState) int {
		t := L.CheckTable(1)
		return L.OptInt(3, t.Len()) - L.OptInt(2, 1) + 1
	})
	chargeBytes(L, tbl, "concat")
	chargeBytes(L, g, "tostring")
	chargeBytes(L, g, luaConcatName)
	L.SetContext(sc)
	return L, sc
}

// LuaMaxResults bounds the values one call of string.byte or unpack may
// return, as Lua 5.1's stack does: gopher-lua grows its stack a few
// slots at a time, so a million results took seconds of copying.
const LuaMaxResults = 8000

// capResults refuses a call of t[name] that count says would return more
// than LuaMaxResults values.
func capResults(L *lua.LState, t *lua.LTable, name string, count func(*lua.LState) int) {
	fn := t.RawGetString(name).(*lua.LFunction)
	t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
		if n := count(L); n > LuaMaxResults {
			raiseLimit(L, flows.LimitSize, "%s: %d results, more than the limit of %d (LuaMaxResults)", name, n, LuaMaxResults)
		}
		return fn.GFunction(L)
	}))
}

// LuaBytesPerStep is what one step of the step limit buys of the strings
// a builtin gives back: .., string.rep, string.upper and the others do
// work in proportion to the bytes they build, one VM instruction each,
// so that without this charge a loop of 100,000 steps could copy a
// hundred gigabytes.
const LuaBytesPerStep = 64

// chargeBytes makes the function t[name] charge a step for each value it
// returns and one for each LuaBytesPerStep bytes of the strings among
// them.
func chargeBytes(L *lua.LState, t *lua.LTable, name string) {
	fn, ok := t.RawGetString(name).(*lua.LFunction)
	if !ok || !fn.IsG {
		return
	}
	t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
		n := fn.GFunction(L)
		cost := uint64(n)
		for i := 1; i <= n; i++ {
			if s, ok := L.Get(-i).(lua.LString); ok {
				cost += uint64(len(s)) / LuaBytesPerStep
			}
		}
		chargeSteps(L, name, cost)
		return n
	}))
}

// chargeSteps counts cost steps against the state's step limit, raising
// the step-limit error when they exceed it.
func chargeSteps(L *lua.LState, fn string, cost uint64) {
	sc, ok := L.Context().(*stepCounter)
	if !ok {
		return
	}
	sc.steps += cost
	if sc.exceeded() {
		L.RaiseError("%s: step limit exceeded", fn)
	}
}

func tooLong(L *lua.LState, fn string, n int64) {
	raiseLimit(L, flows.LimitSize, "%s: the result would be %d bytes, more than the limit of %d (LuaMaxStringBytes)", fn, n, LuaMaxStringBytes)
}

// jsonLowerBound is at least the bytes json.Marshal would write for v,
// stopping once it passes LuaMaxStringBytes: a table holding one 512 KiB
// string 2,000 times is small in Lua and a gigabyte of JSON, so json.encode
// refuses it before building it.
func jsonLowerBound(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 2
	case []any:
		n := int64(1) // "[]" less the comma the last element does not need
		for _, e := range x {
			if n += jsonLowerBound(e) + 1; n > LuaMaxStringBytes {
				break
			}
		}
		return n
	case map[string]any:
		n := int64(1)
		for k, e := range x {
			if n += int64(len(k)) + 4 + jsonLowerBound(e); n > LuaMaxStringBytes {
				break
			}
		}
		return n
	}
	return 1
}

func capStringRep(L *lua.LState, str *lua.LTable) {
	orig := L.GetField(str, "rep").(*lua.LFunction)
	str.RawSetString("rep", L.NewFunction(func(L *lua.LState) int {
		s, n := L.CheckString(1), L.CheckInt64(2)
		if n > 0 && int64(len(s))*n > LuaMaxStringBytes || n > LuaMaxStringBytes {
			tooLong(L, "string.rep", int64(len(s))*n)
		}
		return orig.GFunction(L)
	}))
}

func capTableConcat(L *lua.LState, tbl *lua.LTable) {
	orig := L.GetField(tbl, "concat").(*lua.LFunction)
	tbl.RawSetString("concat", L.NewFunction(func(L *lua.LState) int {
		t := L.CheckTable(1)
		sep := int64(len(L.OptString(2, "")))
		var n int64
		for i := 1; i <= t.Len(); i++ {
			if s, ok := t.RawGetInt(i).(lua.LString); ok {
				n += int64(len(s)) + sep
			} else if v, ok := t.RawGetInt(i).(lua.LNumber); ok {
				n += int64(len(v.String())) + sep
			}
			if n > LuaMaxStringBytes {
				tooLong(L, "table.concat", n)
			}
		}
		return orig.GFunction(L)
	}))
}

var luaBuiltinNames = func() map[string]bool {
	m := map[string]bool{}
	for _, b := range front.Builtins {
		m[b] = true
	}
	return m
}()

// Lua tables made by array{} and object{} carry one of these metatables.
const (
	luaArrayMeta  = "weir.array"
	luaObjectMeta = "weir.object"
	luaNodeMeta   = "weir.node"
)

// luaRun is one execution of a Lua file: at load time (decl set) its
// builtins declare through the Starlark builtins; in an evaluator's fresh
// state they only collect the callables by reference.
type luaRun struct {
	prog *luaProgram
	L    *lua.LState
	decl front.Declarer
	// collected are the Lua functions passed to builtins, by reference
	// (fresh evaluator states only).
	collected map[flows.CallableRef]*lua.LFunction
	done      bool // the file ran to its end: builtins are refused
}

// luaNode is a node table made in a fresh evaluator state.
type luaNode struct {
	id     string
	params *lua.LTable
}

func (r *luaRun) setup() {
	L := r.L
	for name := range luaBuiltinNames {
		L.SetGlobal(name, L.NewFunction(func(L *lua.LState) int { return r.builtin(L, name) }))
	}
	for _, m := range []string{luaArrayMeta, luaObjectMeta} {
		mt := L.NewTypeMetatable(m)
		L.SetField(mt, "__name", lua.LString(m))
		L.SetGlobal(strings.TrimPrefix(m, "weir."), L.NewFunction(func(L *lua.LState) int {
			t := L.OptTable(1, L.NewTable())
			L.SetMetatable(t, mt)
			L.Push(t)
			return 1
		}))
	}
	js := L.NewTable()
	L.SetField(js, "encode", L.NewFunction(func(L *lua.LState) int {
		sv, err := luaToStarlark(nil, L.CheckAny(1), 0)
		if err == nil {
			var g any
			if g, err = front.FromStarlark(sv); err == nil {
				if n := jsonLowerBound(g); n > LuaMaxStringBytes {
					tooLong(L, "json.encode", n)
				}
				var b []byte
				if b, err = json.Marshal(g); err == nil {
					if len(b) > LuaMaxStringBytes { // escapes made it longer than the bound
						tooLong(L, "json.encode", int64(len(b)))
					}
					chargeSteps(L, "json.encode", uint64(len(b))/LuaBytesPerStep)
					L.Push(lua.LString(b))
					return 1
				}
			}
		}
		if errors.Is(err, errLuaDepth) {
			raiseLimit(L, flows.LimitDepth, "json.encode: the value is nested more than %d deep (MaxValueDepth)", flows.MaxValueDepth)
		}
		L.RaiseError("json.encode: %v", err)
		return 0
	}))
	L.SetField(js, "decode", L.NewFunction(func(L *lua.LState) int {
		var g any
		src := L.CheckString(1)
		chargeSteps(L, "json.decode", uint64(len(src))/LuaBytesPerStep)
		if err := front.CheckJSONNesting(src); err != nil {
			raiseLimit(L, flows.LimitDepth, "%s", err.(*flows.LimitError).Detail)
		}
		err := front.UnmarshalNumbers([]byte(src), &g)
		if err == nil {
			var lv lua.LValue
			if lv, err = goToLua(L, g, 0); err == nil {
				L.Push(lv)
				return 1
			}
		}
		L.RaiseError("json.decode: %v", err)
		return 0
	}))
	L.SetGlobal("json", js)
	nm := L.NewTypeMetatable(luaNodeMeta)
	L.SetField(nm, "__index", L.NewFunction(func(L *lua.LState) int {
		ud := L.CheckUserData(1)
		var id, kind string
		switch n := ud.Value.(type) {
		case starlark.HasAttrs: // a node the Starlark builtins made
			id, kind = attrString(n, "id"), attrString(n, "kind")
		case *luaNode:
			id = n.id
		}
		switch L.CheckString(2) {
		case "id":
			L.Push(lua.LString(id))
		case "kind":
			L.Push(lua.LString(kind))
		default:
			L.Push(lua.LNil)
		}
		return 1
	}))
}

// builtin runs one builtin call from Lua.
func (r *luaRun) builtin(L *lua.LState, name string) int {
	if r.done {
		L.RaiseError("%s: flows are declared while the script loads, not from a callable at run time", name)
	}
	t := L.CheckTable(1)
	if r.decl == nil {
		return r.collect(L, name, t)
	}
	var args starlark.Tuple
	var kwargs []starlark.Tuple
	var keys []string
	var bad string
	t.ForEach(func(k, v lua.LValue) {
		switch k := k.(type) {
		case lua.LString:
			keys = append(keys, string(k))
		case lua.LNumber:
			if k != 1 {
				bad = fmt.Sprintf("%s: takes the %s as its only positional element; write the others as name = value", name, luaFirst(name))
			}
		default:
			bad = fmt.Sprintf("%s: table key %s is neither a name nor the first element", name, k.Type())
		}
	})
	if bad != "" {
		L.RaiseError("%s", bad)
	}
	if v := t.RawGetInt(1); v != lua.LNil {
		sv, err := luaToStarlark(r.prog, v, 0)
		if err != nil {
			L.RaiseError("%s: %s: %v", name, luaFirst(name), err)
		}
		args = append(args, sv)
	}
	slices.Sort(keys)
	for _, k := range keys {
		sv, err := luaToStarlark(r.prog, t.RawGetString(k), 0)
		if err != nil {
			L.RaiseError("%s: %s: %v", name, k, err)
		}
		kwargs = append(kwargs, starlark.Tuple{starlark.String(k), sv})
	}
	res, err := r.decl.Declare(name, args, kwargs, r.site(L))
	if err != nil {
		msg := err.Error()
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			msg = ee.Msg
		}
		L.RaiseError("%s", msg)
	}
	if nv, ok := res.(starlark.HasAttrs); ok { // a node
		ud := L.NewUserData()
		ud.Value = nv
		L.SetMetatable(ud, L.GetTypeMetatable(luaNodeMeta))
		L.Push(ud)
		return 1
	}
	return 0
}

func luaFirst(builtin string) string {
	switch builtin {
	case "flow":
		return "flow name"
	case "schedule":
		return "schedule name"
	case "on_event":
		return "event name"
	}
	return "node id"
}

// site is what the syntax tree says about the builtin call being run.
func (r *luaRun) site(L *lua.LState) *front.Site {
	line := 0
	if dbg, ok := L.GetStack(1); ok {
		if _, err := L.GetInfo("l", dbg, lua.LNil); err == nil {
			line = dbg.CurrentLine
		}
	}
	if s, ok := r.prog.sites[line]; ok {
		return s
	}
	return &front.Site{Start: flows.Pos{File: r.prog.path, Line: line}}
}

// collect is a builtin in a fresh evaluator state: it records the
// functions each flow's nodes were given, with no checks (they were made
// at registration).
func (r *luaRun) collect(L *lua.LState, name string, t *lua.LTable) int {
	id, _ := t.RawGetInt(1).(lua.LString)
	if s, ok := t.RawGetString("id").(lua.LString); ok {
		id = s
	}
	switch name {
	case "schedule", "on_event":
		r.collectDecl(name, string(id), t)
		return 0
	case "flow":
	default:
		ud := L.NewUserData()
		ud.Value = &luaNode{id: string(id), params: t}
		L.SetMetatable(ud, L.GetTypeMetatable(luaNodeMeta))
		L.Push(ud)
		return 1
	}
	flow := string(id)
	if s, ok := t.RawGetString("name").(lua.LString); ok {
		flow = string(s)
	}
	if fn, ok := t.RawGetString("output").(*lua.LFunction); ok {
		r.collected[flows.CallableRef{Flow: flow, Param: "output"}] = fn
	}
	nodes, _ := t.RawGetString("nodes").(*lua.LTable)
	if nodes == nil {
		return 0
	}
	for i := 1; i <= nodes.Len(); i++ {
		ud, ok := nodes.RawGetInt(i).(*lua.LUserData)
		if !ok {
			continue
		}
		n, ok := ud.Value.(*luaNode)
		if !ok {
			continue
		}
		for _, p := range front.CallableParams {
			if fn, ok := n.params.RawGetString(p).(*lua.LFunction); ok {
				ref := flows.CallableRef{Flow: flow, Node: n.id, Param: p}
				if _, dup := r.collected[ref]; !dup {
					r.collected[ref] = fn
				}
			}
		}
	}
	return 0
}

// collectDecl records the functions a schedule or on_event declaration
// was given, by the refs the core gave them (its Decl: the schedule's
// name; the trigger's name, or its default).
func (r *luaRun) collectDecl(builtin, first string, t *lua.LTable) {
	str := func(key, def string) string {
		if s, ok := t.RawGetString(key).(lua.LString); ok {
			return string(s)
		}
		return def
	}
	var decl string
	if builtin == "schedule" {
		decl = (&flows.Schedule{Name: str("name", first)}).Decl()
	} else {
		event := str("event", first)
		decl = (&flows.Trigger{Name: str("name", flows.DefaultTriggerName(event, str("flow", "")))}).Decl()
	}
	for _, p := range front.DeclParams {
		if fn, ok := t.RawGetString(p).(*lua.LFunction); ok {
			ref := flows.CallableRef{Decl: decl, Param: p}
			if _, dup := r.collected[ref]; !dup {
				r.collected[ref] = fn
			}
		}
	}
}

// Run implements front.Program: it runs the file at load time.
func (p *luaProgram) Run(d front.Declarer, maxSteps uint64) error {
	L, sc := newLuaSandbox(maxSteps)
	defer L.Close()
	r := &luaRun{prog: p, L: L, decl: d}
	r.setup()
	L.Push(L.NewFunctionFromProto(p.proto))
	err := L.PCall(0, 0, nil)
	if err == nil {
		return nil
	}
	pos, msg := luaErrorPos(err, p.path)
	if le := sc.limitError(msg, "script"); le != nil {
		return &front.ScriptError{Pos: pos, Msg: le.Error(), Limit: le.Limit}
	}
	return &front.ScriptError{Pos: pos, Msg: msg}
}

// attrString is a string attribute of v, or "".
func attrString(v starlark.HasAttrs, name string) string {
	a, _ := v.Attr(name)
	s, _ := starlark.AsString(a)
	return s
}

var luaErrorLine = regexp.MustCompile(`^([^\s:]+):(\d+): `)

// luaErrorPos splits a Lua error into the position gopher-lua prefixed
// and the message, without the stack traceback.
func luaErrorPos(err error, file string) (flows.Pos, string) {
	msg := err.Error()
	var ae *lua.ApiError
	if errors.As(err, &ae) && ae.Object != nil {
		switch o := ae.Object.(type) {
		case lua.LString, lua.LNumber:
			msg = o.String()
		default: // a table's address would make the message vary
			msg = "error(" + o.Type().String() + ")"
		}
	}
	msg, _, _ = strings.Cut(msg, "\nstack traceback:")
	pos := flows.Pos{File: file}
	for {
		m := luaErrorLine.FindStringSubmatch(msg)
		if m == nil {
			break
		}
		if pos.Line == 0 { // the first prefix is the innermost
			pos.File = m[1]
			pos.Line, _ = strconv.Atoi(m[2])
		}
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = "error with an empty message"
	}
	return pos, msg
}

// luaToStarlark converts a Lua value passed to a builtin (or returned by
// a callable) to Starlark, following the JSON mapping above.
func luaToStarlark(prog *luaProgram, v lua.LValue, depth int) (starlark.Value, error) {
	n := 0
	return luaConvert(prog, v, depth, &n)
}

// luaMaxConvertValues bounds the values one conversion visits: a table
// that holds itself twice at each of 30 levels is small in Lua and a
// billion values in JSON.
const luaMaxConvertValues = 1 << 20

// errLuaDepth is a value nested deeper than MaxValueDepth crossing
// between Go and Lua.
var errLuaDepth = fmt.Errorf("value nested more than %d deep", flows.MaxValueDepth)

func luaConvert(prog *luaProgram, v lua.LValue, depth int, count *int) (starlark.Value, error) {
	if depth > flows.MaxValueDepth {
		return nil, errLuaDepth
	}
	if *count++; *count > luaMaxConvertValues {
		return nil, fmt.Errorf("value holds more than %d values", luaMaxConvertValues)
	}
	switch x := v.(type) {
	case *lua.LNilType:
		return starlark.None, nil
	case lua.LBool:
		return starlark.Bool(x), nil
	case lua.LString:
		return starlark.String(x), nil
	case lua.LNumber:
		f := float64(x)
		if f == math.Trunc(f) && !math.IsInf(f, 0) {
			if math.Abs(f) > luaMaxInt {
				return nil, fmt.Errorf("integer %s is beyond 2^53, where Lua numbers are no longer exact", strconv.FormatFloat(f, 'f', 0, 64))
			}
			return starlark.MakeInt64(int64(f)), nil
		}
		return starlark.Float(f), nil
	case *lua.LFunction:
		return &luaFunc{prog: prog, params: luaParams(x.Proto), varargs: x.Proto.IsVarArg != 0, line: x.Proto.LineDefined}, nil
	case *lua.LUserData:
		if nv, ok := x.Value.(starlark.Value); ok { // a node the Starlark builtins made
			return nv, nil
		}
	case *lua.LTable:
		return luaTableToStarlark(prog, x, depth, count)
	}
	return nil, fmt.Errorf("a Lua %s has no JSON form", v.Type())
}

func luaTableToStarlark(prog *luaProgram, t *lua.LTable, depth int, count *int) (starlark.Value, error) {
	meta := ""
	if mt, ok := t.Metatable.(*lua.LTable); ok {
		if name, ok := mt.RawGetString("__name").(lua.LString); ok {
			meta = string(name)
		}
	}
	var strKeys []string
	others, n := 0, 0
	t.ForEach(func(k, _ lua.LValue) {
		switch k := k.(type) {
		case lua.LString:
			strKeys = append(strKeys, string(k))
		case lua.LNumber:
			n++
		default:
			others++
		}
	})
	for i := 1; i <= n && others == 0; i++ { // the numbers must be 1..n
		if t.RawGetInt(i) == lua.LNil {
			others++
		}
	}
	switch {
	case others > 0:
		return nil, fmt.Errorf("a table with keys that are neither 1..n nor strings has no JSON form")
	case n > 0 && len(strKeys) > 0:
		return nil, fmt.Errorf("a table with both list elements and named keys has no JSON form")
	case meta == luaArrayMeta && len(strKeys) > 0:
		return nil, fmt.Errorf("array{} with named keys has no JSON form")
	case meta == luaObjectMeta && n > 0:
		return nil, fmt.Errorf("object{} with list elements has no JSON form")
	}
	if n > 0 || meta == luaArrayMeta {
		elems := make([]starlark.Value, n)
		for i := range n {
			sv, err := luaConvert(prog, t.RawGetInt(i+1), depth+1, count)
			if err != nil {
				return nil, err
			}
			elems[i] = sv
		}
		return starlark.NewList(elems), nil
	}
	slices.Sort(strKeys)
	d := starlark.NewDict(len(strKeys))
	for _, k := range strKeys {
		sv, err := luaConvert(prog, t.RawGetString(k), depth+1, count)
		if err != nil {
			return nil, err
		}
		_ = d.SetKey(starlark.String(k), sv)
	}
	return d, nil
}

// goToLua converts a JSON-compatible Go value (as the runtime passes
// ctx, items and results) to Lua; empty lists and objects keep their
// kind through array{}/object{} metatables.
func goToLua(L *lua.LState, v any, depth int) (lua.LValue, error) {
	if depth > flows.MaxValueDepth {
		return nil, errLuaDepth
	}
	if sv, ok := v.(starlark.Value); ok {
		g, err := front.FromStarlark(sv)
		if err != nil {
			return nil, err
		}
		v = g
	}
	switch x := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(x), nil
	case string:
		return lua.LString(x), nil
	case int:
		return luaInt(int64(x))
	case int64:
		return luaInt(x)
	case float64:
		return lua.LNumber(x), nil
	case []any:
		t := L.CreateTable(len(x), 0)
		for _, e := range x {
			lv, err := goToLua(L, e, depth+1)
			if err != nil {
				return nil, err
			}
			t.Append(lv)
		}
		L.SetMetatable(t, L.GetTypeMetatable(luaArrayMeta))
		return t, nil
	case map[string]any:
		t := L.CreateTable(0, len(x))
		for k, e := range x {
			lv, err := goToLua(L, e, depth+1)
			if err != nil {
				return nil, err
			}
			t.RawSetString(k, lv)
		}
		L.SetMetatable(t, L.GetTypeMetatable(luaObjectMeta))
		return t, nil
	}
	// json.Number and the other Go forms, through their Starlark form.
	sv, err := front.ToStarlark(v)
	if err != nil {
		return nil, err
	}
	g, err := front.FromStarlark(sv)
	if err != nil {
		return nil, err
	}
	return goToLua(L, g, depth+1)
}

func luaInt(n int64) (lua.LValue, error) {
	if n > luaMaxInt || n < -luaMaxInt {
		return nil, fmt.Errorf("integer %d is beyond 2^53, where Lua numbers are no longer exact", n)
	}
	return lua.LNumber(n), nil
}

// luaFunc is a Lua function passed to a builtin, as the Starlark side
// holds it. Calling it (the Evaluator does, by its CallableRef) loads the
// function's file afresh in a new sandbox, so that no call sees what an
// earlier one left in globals or upvalues, and calls the function the
// fresh run passed for the same reference.
type luaFunc struct {
	prog         *luaProgram // the declaring file
	params, line int         // declared parameters, line defined
	varargs      bool
}

var _ front.Function = (*luaFunc)(nil)

func (f *luaFunc) String() string        { return "<lua function>" }
func (f *luaFunc) Type() string          { return "function" }
func (f *luaFunc) Freeze()               {}
func (f *luaFunc) Truth() starlark.Bool  { return true }
func (f *luaFunc) Hash() (uint32, error) { return 0, errors.New("unhashable type: lua function") }
func (f *luaFunc) Name() string          { return "lua function" }

// Arity is the function's declared parameter count and whether it takes
// varargs; a Lua call passes nil for missing arguments and drops extra
// ones.
func (f *luaFunc) Arity() (int, bool) {
	return f.params, f.varargs
}

// CallInternal runs the function for the reference the Evaluator set on
// the thread.
func (f *luaFunc) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	ref := front.CallRef(thread)
	limit := front.StepLimit(thread)
	if limit == 0 {
		limit = front.DefaultMaxSteps
	}
	if f.prog == nil {
		return nil, fmt.Errorf("%s: the Lua function's file is not loaded", ref)
	}
	L, sc := newLuaSandbox(limit)
	defer L.Close()
	r := &luaRun{prog: f.prog, L: L, collected: map[flows.CallableRef]*lua.LFunction{}}
	r.setup()
	L.Push(L.NewFunctionFromProto(f.prog.proto))
	if err := L.PCall(0, 0, nil); err != nil {
		pos, msg := luaErrorPos(err, f.prog.path)
		return nil, &front.ScriptError{Pos: pos, Msg: "the file no longer runs: " + msg}
	}
	r.done = true
	fn, ok := r.collected[ref]
	if !ok {
		return nil, fmt.Errorf("%s: %w", ref, front.ErrNoCallable)
	}
	sc.steps = 0
	L.Push(fn)
	for i, a := range args {
		var lv lua.LValue
		var err error
		if cv, ok := a.(*front.Ctx); ok {
			lv, err = luaCtx(L, cv)
		} else {
			lv, err = goToLua(L, a, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("argument %d: %v", i+1, err)
		}
		L.Push(lv)
	}
	if err := L.PCall(len(args), 1, nil); err != nil {
		pos, msg := luaErrorPos(err, f.prog.path)
		ce := &front.ScriptError{Pos: pos, Msg: msg}
		if le := sc.limitError(msg, "callable"); le != nil {
			ce.Limit = le.Limit
			if le.Limit == flows.LimitSteps {
				ce.Msg = le.Detail // as a Starlark callable's
			}
		}
		return nil, ce
	}
	ret := L.Get(-1)
	switch ref.Param {
	case "cond", "mature", "filter": // Lua's truth: only nil and false are false
		return starlark.Bool(lua.LVAsBool(ret)), nil
	case "items":
		if t, ok := ret.(*lua.LTable); ok && t.Len() == 0 && t.Metatable == lua.LNil {
			empty := true
			t.ForEach(func(lua.LValue, lua.LValue) { empty = false })
			if empty {
				return starlark.NewList(nil), nil
			}
		}
	}
	sv, err := luaToStarlark(f.prog, ret, 0)
	if err != nil {
		return nil, &front.ScriptError{Pos: flows.Pos{File: f.prog.path, Line: f.line}, Msg: fmt.Sprintf("%s returned a value with no JSON form: %v", ref.Param, err)}
	}
	return sv, nil
}

// luaCtx is the ctx table a Lua callable receives.
func luaCtx(L *lua.LState, cv *front.Ctx) (lua.LValue, error) {
	c, ref := cv.Context(), cv.Ref()
	t := L.CreateTable(0, 6)
	t.RawSetString("run_id", lua.LString(c.RunID))
	t.RawSetString("attempt", lua.LNumber(c.Attempt))
	t.RawSetString("flow", lua.LString(ref.Flow))
	t.RawSetString("node", lua.LString(ref.Node))
	in, err := goToLua(L, c.Input, 0)
	if err != nil {
		return nil, fmt.Errorf("ctx.input: %v", err)
	}
	t.RawSetString("input", in)
	results := c.Results
	if results == nil {
		results = map[string]any{}
	}
	rs, err := goToLua(L, results, 0)
	if err != nil {
		return nil, fmt.Errorf("ctx.results: %v", err)
	}
	t.RawSetString("results", rs)
	return t, nil
}
