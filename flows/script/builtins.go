package script

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script/front"
	"go.starlark.net/starlark"
)

// The builtins declare; they never run anything. Each node builtin returns
// a node value that flow() copies into its graph; problems with argument
// values are recorded as diagnostics and the script goes on, so that one
// load reports every problem in a file. Wrong argument types stop the script
// (E_SCRIPT), as any Starlark type error does.

// maxNameLen bounds flow names and node ids: they appear in keys, events
// and diagnostics.
const maxNameLen = 128

// validName reports whether s can name a flow or a node: a letter or
// underscore, then letters, digits, '_', '-' or '.'.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// nodeValue is what task(), subflow(), fanout(), wait(), branch() and
// agent() return: a node not yet part of a flow.
type nodeValue struct {
	node   flows.Node                // callable refs are set by flow()
	values [numParams]starlark.Value // the callables and constants given, by parameter
	site   *front.Site
	// claimed is set once a flow took node for its own; another flow
	// using the same value gets a copy.
	claimed bool
	// onExhausted is the node's own on_exhausted; each flow that uses the
	// node fills in its default where it is empty.
	onExhausted string
	// onBudget is an agent's own on_budget, filled in likewise.
	onBudget string
}

// Parameters that take a callable or a constant, evaluated at run time.
const (
	paramArgs = iota
	paramCond
	paramItems
	paramReduce
	paramMature
	paramSystem
	paramPrompt
	paramMatch
	numParams
)

// paramNames is shared with the other languages' front ends, which
// collect the callables by these names; its type checks the count.
var paramNames [numParams]string = front.CallableParams

var (
	_ starlark.Value    = (*nodeValue)(nil)
	_ starlark.HasAttrs = (*nodeValue)(nil)
)

func (nv *nodeValue) String() string        { return fmt.Sprintf("%s(%q)", nv.node.Kind, nv.node.ID) }
func (nv *nodeValue) Type() string          { return "node" }
func (nv *nodeValue) Freeze()               {}
func (nv *nodeValue) Truth() starlark.Bool  { return true }
func (nv *nodeValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: node") }

// Attr exposes the node's id and kind, so that helpers can wire nodes by
// reading ids from the values they were given.
func (nv *nodeValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "id":
		return starlark.String(nv.node.ID), nil
	case "kind":
		return starlark.String(string(nv.node.Kind)), nil
	}
	return nil, nil
}

func (nv *nodeValue) AttrNames() []string { return []string{"id", "kind"} }

// optString unpacks a string or None (absent).
type optString struct {
	s   string
	set bool
}

func (o *optString) Unpack(v starlark.Value) error {
	return unpackOrNone(v, "string", &o.set, func(s starlark.String) error {
		o.s = string(s)
		return nil
	})
}

// optInt unpacks an int or None (absent).
type optInt struct {
	n   int
	set bool
}

func (o *optInt) Unpack(v starlark.Value) error {
	return unpackOrNone(v, "int", &o.set, func(i starlark.Int) error {
		n, ok := i.Int64()
		if !ok || n != int64(int(n)) || n > 1<<31 || n < -(1<<31) {
			return fmt.Errorf("%s is out of range", i)
		}
		o.n = int(n)
		return nil
	})
}

// unpackOrNone is the Unpack of every optional parameter: None leaves it
// absent, a value of type S is handed to take and, once take accepts it,
// marks it set; anything else is refused naming want.
func unpackOrNone[S starlark.Value](v starlark.Value, want string, set *bool, take func(S) error) error {
	if _, ok := v.(starlark.NoneType); ok {
		return nil
	}
	s, ok := v.(S)
	if !ok {
		return fmt.Errorf("got %s, want %s or None", v.Type(), want)
	}
	if err := take(s); err != nil {
		return err
	}
	*set = true
	return nil
}

// number unpacks a float, taking an int where a float is wanted as
// Python does: quorum = 1 is quorum = 1.0.
type number float64

func (n *number) Unpack(v starlark.Value) error {
	f, ok := starlark.AsFloat(v)
	if !ok {
		return fmt.Errorf("got %s, want a number", v.Type())
	}
	*n = number(f)
	return nil
}

// unpackArgs is starlark.UnpackArgs with a hint for a misspelt keyword:
// the parameter it most likely meant.
func unpackArgs(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, pairs ...any) error {
	err := starlark.UnpackArgs(b.Name(), args, kwargs, pairs...)
	if err == nil {
		return nil
	}
	m := unexpectedKeyword.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if b.Name() == "branch" && m[1] == "next" {
		return fmt.Errorf("%v: a branch has no next; it follows then when cond is truthy, otherwise when not", err)
	}
	var names []string
	for i := 0; i < len(pairs); i += 2 {
		names = append(names, strings.TrimSuffix(pairs[i].(string), "?"))
	}
	if s := suggestKeyword(m[1], names); s != "" {
		return fmt.Errorf("%v (did you mean %s?)", err, s)
	}
	return err
}

// suggestKeyword is Suggest, falling back to the parameter that shares a
// long prefix with the keyword: "retry" for retries.
func suggestKeyword(kw string, params []string) string {
	if s := flows.Suggest(kw, params); s != "" {
		return s
	}
	best, bestLen := "", 0
	for _, p := range params {
		n := 0
		for n < len(kw) && n < len(p) && kw[n] == p[n] {
			n++
		}
		if n >= 4 && len(kw)-n <= 2 && n > bestLen {
			best, bestLen = p, n
		}
	}
	return best
}

var unexpectedKeyword = regexp.MustCompile(`unexpected keyword argument "?(\w+)"?$`)

// valueSpec says how a builtin parameter that takes a callable is called
// at run time, and which constant may stand in for the callable.
type valueSpec struct {
	param    int
	call     string // how the runtime calls it, for messages
	arity    int    // positional arguments passed
	constant string // "dict", "list", "bool", "string", "any", or "" (callable only)
	// optional is how many more positional arguments the runtime passes
	// to a function that takes them (reduce's items).
	optional int
}

var (
	specArgs       = valueSpec{paramArgs, "args(ctx)", 1, "dict", 0}
	specFanoutArgs = valueSpec{paramArgs, "args(ctx, item)", 2, "dict", 0}
	specCond       = valueSpec{paramCond, "cond(ctx)", 1, "bool", 0}
	specItems      = valueSpec{paramItems, "items(ctx)", 1, "list", 0}
	specReduce     = valueSpec{paramReduce, "reduce(ctx, results) or reduce(ctx, results, items)", 2, "", 1}
	specMature     = valueSpec{paramMature, "mature(ctx, item, result)", 3, "", 0}
	specOutput     = valueSpec{-1, "output(ctx)", 1, "any", 0}
	specSystem     = valueSpec{paramSystem, "system(ctx)", 1, "string", 0}
	specPrompt     = valueSpec{paramPrompt, "prompt(ctx)", 1, "string", 0}
	specMatch      = valueSpec{paramMatch, "match(ctx)", 1, "string", 0}
)

// nodeBuilder collects one node's fields and its diagnostics.
type nodeBuilder struct {
	ls   *loadState
	site *front.Site
	nv   *nodeValue
}

func loadStateOf(thread *starlark.Thread, b *starlark.Builtin) (*loadState, error) {
	ls, _ := thread.Local(localLoad).(*loadState)
	if ls == nil {
		return nil, fmt.Errorf("%s: flows are declared while the script loads, not from a callable at run time", b.Name())
	}
	return ls, nil
}

func onlyIDPositional(b *starlark.Builtin, args starlark.Tuple, what string) error {
	if len(args) > 1 {
		return fmt.Errorf("%s: takes the %s as its only positional argument; write the others as name = value", b.Name(), what)
	}
	return nil
}

// unpackBuiltin is how every declaring builtin begins: it refuses a call
// from a callable at run time and positional arguments past the first
// (what names it), and unpacks the arguments into pairs with
// starlark.UnpackArgs.
func unpackBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, what string, pairs ...any) (*loadState, error) {
	ls, err := loadStateOf(thread, b)
	if err != nil {
		return nil, err
	}
	if err := onlyIDPositional(b, args, what); err != nil {
		return nil, err
	}
	if err := unpackArgs(b, args, kwargs, pairs...); err != nil {
		return nil, err
	}
	return ls, nil
}

// nodeParams are the parameters that several node builtins take. Each
// builtin names those it takes in its own pairs, in its own order (the
// order decides which missing argument is named first); one it does not
// take stays zero, which record leaves unset.
type nodeParams struct {
	id, doc               string
	next, errw, timeout   optString
	retries, maxVisits    int
	cost, budget          int64
	atMostOnce, protected bool
}

// startNode unpacks a node builtin's arguments and starts its node.
func startNode(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, kind flows.NodeKind, p *nodeParams, pairs ...any) (*nodeBuilder, error) {
	ls, err := unpackBuiltin(thread, b, args, kwargs, "node id", pairs...)
	if err != nil {
		return nil, err
	}
	return ls.newNode(thread, kind, p.id), nil
}

// record checks the shared parameters and sets them on the node, which it
// returns, done.
func (nb *nodeBuilder) record(p *nodeParams) *nodeValue {
	n := nb.n()
	nb.wire("next", p.next, &n.Next)
	nb.wire("error", p.errw, &n.Error)
	nb.duration("timeout", p.timeout, &n.Timeout)
	nb.nonNegative("retries", int64(p.retries))
	nb.nonNegative("max_visits", int64(p.maxVisits))
	nb.nonNegative("cost", p.cost)
	nb.nonNegative("budget", p.budget)
	nb.atMostOnce(p.atMostOnce, p.retries)
	n.Retries, n.MaxVisits, n.Cost, n.Budget = max(p.retries, 0), max(p.maxVisits, 0), max(p.cost, 0), max(p.budget, 0)
	n.AtMostOnce, n.Protected, n.Doc = p.atMostOnce, p.protected, p.doc
	return nb.nv
}

func (ls *loadState) newNode(thread *starlark.Thread, kind flows.NodeKind, id string) *nodeBuilder {
	site := ls.callerSite(thread)
	nb := &nodeBuilder{ls: ls, site: site, nv: &nodeValue{
		node: flows.Node{ID: id, Kind: kind, Pos: site.Start, Site: site},
		site: site,
	}}
	if !validName(id) {
		ls.addf(site.Start, flows.CodeInvalid, nil, "%s id %q: ids start with a letter or '_' and hold letters, digits, '_', '-' or '.' (at most %d)", kind, id, maxNameLen)
	}
	return nb
}

func (nb *nodeBuilder) n() *flows.Node { return &nb.nv.node }

func (nb *nodeBuilder) addf(param string, code flows.Code, format string, args ...any) {
	prefix := fmt.Sprintf("%s %q: ", nb.n().Kind, nb.n().ID)
	nb.ls.addf(nb.site.ArgPos(param), code, nil, prefix+format, args...)
}

func (nb *nodeBuilder) wire(param string, v optString, dst *string) {
	if !v.set {
		return
	}
	if v.s == "" {
		nb.addf(param, flows.CodeInvalid, "%s = \"\" names no node; leave it out (or None) to end the run there", param)
		return
	}
	*dst = v.s
}

func (nb *nodeBuilder) nonNegative(param string, v int64) {
	if v < 0 {
		nb.addf(param, flows.CodeInvalid, "%s = %d, must not be negative", param, v)
	}
}

func (nb *nodeBuilder) duration(param string, v optString, dst *time.Duration) {
	if !v.set {
		return
	}
	d, err := flows.ParseDuration(v.s)
	if err != nil {
		nb.addf(param, flows.CodeInvalid, "%s: %v", param, err)
		return
	}
	if d <= 0 {
		nb.addf(param, flows.CodeInvalid, "%s = %q, must be positive", param, v.s)
		return
	}
	*dst = d
}

func (nb *nodeBuilder) name(param string, v optString, dst *string, what string) {
	if !v.set {
		return
	}
	if v.s == "" {
		nb.addf(param, flows.CodeInvalid, "%s = \"\" names no %s", param, what)
		return
	}
	*dst = v.s
}

// value records a callable or constant parameter, checking that a callable
// accepts the arguments the runtime will pass and that a constant has a
// JSON form of the right shape.
func (nb *nodeBuilder) value(v starlark.Value, spec valueSpec) {
	if v == nil || v == starlark.None {
		return
	}
	param := paramNames[spec.param]
	if msg := checkValue(v, spec); msg != "" {
		nb.addf(param, flows.CodeInvalid, "%s %s", param, msg)
	}
	nb.nv.values[spec.param] = v
}

func checkValue(v starlark.Value, spec valueSpec) string {
	if fn, ok := v.(*starlark.Function); ok {
		return checkArity(fn, spec)
	}
	if fn, ok := v.(front.Function); ok {
		if n, varargs := fn.Arity(); n > spec.arity+spec.optional && !varargs {
			return fmt.Sprintf("is called as %s, but the function takes %s", spec.call, plural(n, "parameter"))
		}
		return ""
	}
	if _, ok := v.(starlark.Callable); ok {
		return "" // a builtin such as len: its arity is its own business
	}
	var shapeOK bool
	switch spec.constant {
	case "":
		return fmt.Sprintf("must be a function called as %s; got a %s", spec.call, v.Type())
	case "dict":
		_, shapeOK = v.(*starlark.Dict)
	case "list":
		switch v.(type) {
		case *starlark.List, starlark.Tuple:
			shapeOK = true
		}
	case "bool":
		_, shapeOK = v.(starlark.Bool)
	case "string":
		_, shapeOK = v.(starlark.String)
	case "any":
		shapeOK = true
	}
	if !shapeOK {
		return fmt.Sprintf("must be a function called as %s, or a constant %s; got a %s", spec.call, spec.constant, v.Type())
	}
	if _, err := front.FromStarlark(v); err != nil {
		return fmt.Sprintf("constant has no JSON form: %v", err)
	}
	return ""
}

// checkArity reports whether fn can be called with spec.arity positional
// arguments; the message says how it will be called.
func checkArity(fn *starlark.Function, spec valueSpec) string {
	np := fn.NumParams()
	kwonly := fn.NumKwonlyParams()
	positional := np - kwonly
	if fn.HasVarargs() {
		positional--
	}
	if fn.HasKwargs() {
		positional--
	}
	required := 0
	for i := range positional {
		if fn.ParamDefault(i) == nil {
			required++
		}
	}
	for i := positional; i < positional+kwonly; i++ {
		if fn.ParamDefault(i) == nil {
			name, _ := fn.Param(i)
			return fmt.Sprintf("is called as %s, but %s requires keyword-only parameter %s", spec.call, fn.Name(), name)
		}
	}
	if required > spec.arity+spec.optional || (positional < spec.arity && !fn.HasVarargs()) {
		what := fn.Name()
		if what == "lambda" {
			what = "the lambda"
		}
		return fmt.Sprintf("is called as %s, but %s takes %s", spec.call, what, plural(positional, "parameter"))
	}
	return ""
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// task(id, tool, args, next, error, retries, at_most_once, max_visits,
// timeout, cost, protected, doc, on_exhausted, on_unknown, unknown_timeout)
func builtinTask(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		p           nodeParams
		tool        string
		argsV       starlark.Value
		onExhausted optString
		unknown     unknownParams
	)
	nb, err := startNode(thread, b, args, kwargs, flows.KindTask, &p,
		"id", &p.id, "tool", &tool, "args?", &argsV, "next?", &p.next, "error?", &p.errw,
		"retries?", &p.retries, "at_most_once?", &p.atMostOnce, "max_visits?", &p.maxVisits,
		"timeout?", &p.timeout, "cost?", &p.cost, "protected?", &p.protected, "doc?", &p.doc,
		"on_exhausted?", &onExhausted, "on_unknown?", &unknown.onUnknown, "unknown_timeout?", &unknown.timeout,
	)
	if err != nil {
		return nil, err
	}
	nb.name("tool", optString{tool, true}, &nb.n().Tool, "tool")
	nb.onUnknown(unknown)
	nb.value(argsV, specArgs)
	if checkOnExhausted(onExhausted, func(format string, args ...any) {
		nb.addf("on_exhausted", flows.CodeInvalid, format, args...)
	}) {
		nb.nv.onExhausted = onExhausted.s
	}
	return nb.record(&p), nil
}

// choice is one value a keyword takes, and what it does (for the error
// that lists them).
type choice struct{ value, does string }

// checkChoice checks the value v of keyword param against its two
// choices, reporting a bad one with addf (each choice with what it does,
// and the one a misspelling most likely meant); it says whether v is set
// and good.
func checkChoice(param string, v optString, addf func(format string, args ...any), a, b choice) bool {
	if !v.set {
		return false
	}
	if v.s == a.value || v.s == b.value {
		return true
	}
	hint := ""
	if s := flows.Suggest(v.s, []string{a.value, b.value}); s != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", s)
	}
	addf("%s = %q, want %q (%s) or %q (%s)%s", param, v.s, a.value, a.does, b.value, b.does, hint)
	return false
}

// checkOnExhausted checks an on_exhausted value ("fail" or "park").
func checkOnExhausted(v optString, addf func(format string, args ...any)) bool {
	return checkChoice("on_exhausted", v, addf,
		choice{flows.OnExhaustedFail, "dead-letter the task and take the error wire"},
		choice{flows.OnExhaustedPark, "dead-letter it and park the run until it is redriven"})
}

// checkOnBudget checks an on_budget value ("fail" or "ask").
func checkOnBudget(v optString, addf func(format string, args ...any)) bool {
	return checkChoice("on_budget", v, addf,
		choice{flows.OnBudgetFail, "take the error wire with E_BUDGET_EXHAUSTED"},
		choice{flows.OnBudgetAsk, "park the run until its owner raises its budget"})
}

// atMostOnce refuses a node that both retries and accepts at-most-once:
// an at-most-once call is never run again, whatever the tool.
func (nb *nodeBuilder) atMostOnce(atMostOnce bool, retries int) {
	if atMostOnce && retries > 0 {
		nb.addf("retries", flows.CodeAtMostOnce, "retries = %d contradicts at_most_once = True: an at-most-once call is never run again", retries)
	}
}

// subflow(id, flow, args, next, error, max_visits, timeout, budget,
// protected, doc)
func builtinSubflow(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		p     nodeParams
		flow  string
		argsV starlark.Value
	)
	nb, err := startNode(thread, b, args, kwargs, flows.KindSubflow, &p,
		"id", &p.id, "flow", &flow, "args?", &argsV, "next?", &p.next, "error?", &p.errw,
		"max_visits?", &p.maxVisits, "timeout?", &p.timeout, "budget?", &p.budget, "protected?", &p.protected, "doc?", &p.doc,
	)
	if err != nil {
		return nil, err
	}
	nb.name("flow", optString{flow, true}, &nb.n().Flow, "flow")
	nb.value(argsV, specArgs)
	return nb.record(&p), nil
}

// fanout(id, items, width, depth, max_items, tool | flow, args, retries,
// at_most_once, quorum, deadline, grace, reduce, mature, next, error,
// max_visits, timeout, cost, budget, protected, doc, on_exhausted,
// on_unknown, unknown_timeout)
func builtinFanout(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		p                            nodeParams
		items, argsV, reduce, mature starlark.Value
		width, depth, maxItems       optInt
		tool, flow, deadline, grace  optString
		quorum                       = number(flows.DefaultQuorum)
		unknown                      unknownParams
		onExhausted                  optString
	)
	nb, err := startNode(thread, b, args, kwargs, flows.KindFanout, &p,
		"id", &p.id, "items", &items, "width?", &width, "depth?", &depth, "max_items?", &maxItems,
		"tool?", &tool, "flow?", &flow, "args?", &argsV, "retries?", &p.retries, "at_most_once?", &p.atMostOnce,
		"quorum?", &quorum, "deadline?", &deadline, "grace?", &grace, "reduce?", &reduce, "mature?", &mature,
		"next?", &p.next, "error?", &p.errw, "max_visits?", &p.maxVisits, "timeout?", &p.timeout,
		"cost?", &p.cost, "budget?", &p.budget, "protected?", &p.protected, "doc?", &p.doc,
		"on_exhausted?", &onExhausted, "on_unknown?", &unknown.onUnknown, "unknown_timeout?", &unknown.timeout,
	)
	if err != nil {
		return nil, err
	}
	n := nb.n()
	nb.onUnknown(unknown)
	if checkOnExhausted(onExhausted, func(format string, args ...any) {
		nb.addf("on_exhausted", flows.CodeInvalid, format, args...)
	}) {
		// The fanout's own: a flow's default is its tasks'.
		n.OnExhausted = onExhausted.s
		if flow.set && n.Parks() {
			nb.addf("on_exhausted", flows.CodeInvalid, "on_exhausted = %q applies to tool calls; a child run handles its own failures", flows.OnExhaustedPark)
		}
	}
	switch {
	case tool.set && flow.set:
		nb.addf("flow", flows.CodeInvalid, "give either tool (one tool call per item) or flow (one child run per item), not both")
	case !tool.set && !flow.set:
		nb.addf("", flows.CodeInvalid, "needs tool (one tool call per item) or flow (one child run per item)")
	}
	nb.name("tool", tool, &n.Tool, "tool")
	nb.name("flow", flow, &n.Flow, "flow")
	nb.bound("width", width, "children in flight at once", &n.Width)
	nb.bound("depth", depth, "generations of delegation below the fanout", &n.Depth)
	nb.bound("max_items", maxItems, "the most items it may fan out over", &n.MaxItems)
	if items == starlark.None {
		nb.addf("items", flows.CodeInvalid, "items must be a function called as items(ctx), or a constant list")
	}
	nb.value(items, specItems)
	if seq, ok := items.(starlark.Sequence); ok && n.MaxItems > 0 && seq.Len() > n.MaxItems {
		nb.addf("items", flows.CodeFanoutBounds, "%d constant items, more than max_items = %d", seq.Len(), n.MaxItems)
	}
	nb.value(argsV, specFanoutArgs)
	nb.value(reduce, specReduce)
	nb.value(mature, specMature)
	if !(quorum > 0 && quorum <= 1) {
		nb.addf("quorum", flows.CodeInvalid, "quorum = %g: the share of children that must mature, more than 0 and at most 1", quorum)
	}
	n.Quorum = float64(quorum)
	nb.duration("deadline", deadline, &n.Deadline)
	n.Grace = flows.DefaultGrace
	nb.duration("grace", grace, &n.Grace)
	if flow.set && p.retries > 0 {
		nb.addf("retries", flows.CodeInvalid, "retries apply to tool calls; a child run handles its own failures")
	}
	if tool.set && p.budget > 0 {
		nb.addf("budget", flows.CodeInvalid, "budget applies to child runs (flow); a tool child reserves its cost")
	}
	if flow.set && n.Asks() {
		nb.addf("on_unknown", flows.CodeInvalid, "on_unknown = %q applies to tool calls; a child run has no call whose outcome can be unknown", flows.OnUnknownAsk)
	}
	return nb.record(&p), nil
}

// bound records one of a fanout's required design-time bounds.
func (nb *nodeBuilder) bound(param string, v optInt, what string, dst *int) {
	switch {
	case !v.set:
		nb.addf("", flows.CodeFanoutBounds, "must declare %s (%s), a positive constant", param, what)
	case v.n <= 0:
		nb.addf(param, flows.CodeFanoutBounds, "%s = %d, must be positive (%s)", param, v.n, what)
	default:
		*dst = v.n
	}
}

// wait(id, timeout, args, event, match, next, error, max_visits, doc)
func builtinWait(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		p            nodeParams
		argsV, match starlark.Value
		event        optString
	)
	nb, err := startNode(thread, b, args, kwargs, flows.KindWait, &p,
		"id", &p.id, "timeout?", &p.timeout, "args?", &argsV, "event?", &event, "match?", &match,
		"next?", &p.next, "error?", &p.errw, "max_visits?", &p.maxVisits, "doc?", &p.doc,
	)
	if err != nil {
		return nil, err
	}
	nb.value(argsV, specArgs)
	nb.waitEvent(event, match)
	return nb.record(&p), nil
}

// waitEvent records what a wait for an event waits for: the event's name
// and, through match, the key it must carry.
func (nb *nodeBuilder) waitEvent(event optString, match starlark.Value) {
	hasMatch := match != nil && match != starlark.None
	switch {
	case !event.set && hasMatch:
		nb.addf("match", flows.CodeInvalid, "match needs event: it computes the key of the event the wait waits for")
		return
	case !event.set:
		return
	case !flows.ValidEventName(event.s):
		nb.addf("event", flows.CodeInvalid, "%s", badEventName(event.s))
		return
	case !hasMatch:
		nb.addf("event", flows.CodeInvalid, "a wait for event %q needs match, called as %s, returning the key the event must carry", event.s, specMatch.call)
		return
	}
	nb.n().Event = event.s
	nb.value(match, specMatch)
}

// branch(id, cond, then, otherwise, error, max_visits, doc)
func builtinBranch(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		p               nodeParams
		cond            starlark.Value
		then, otherwise optString
	)
	nb, err := startNode(thread, b, args, kwargs, flows.KindBranch, &p,
		"id", &p.id, "cond", &cond, "then?", &then, "otherwise?", &otherwise, "error?", &p.errw,
		"max_visits?", &p.maxVisits, "doc?", &p.doc,
	)
	if err != nil {
		return nil, err
	}
	n := nb.n()
	if cond == starlark.None {
		nb.addf("cond", flows.CodeInvalid, "cond must be a function called as cond(ctx)")
	}
	nb.value(cond, specCond)
	nb.wire("then", then, &n.Then)
	nb.wire("otherwise", otherwise, &n.Otherwise)
	return nb.record(&p), nil
}

// flow(name, nodes, doc, max_depth, budget, output, input, on_exhausted,
// on_budget)
func builtinFlow(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		name, doc     string
		nodes         starlark.Value
		maxDepth      = flows.DefaultMaxDepth
		budget        int64
		output, input starlark.Value
		onExhausted   optString
		onBudget      optString
	)
	ls, err := unpackBuiltin(thread, b, args, kwargs, "flow name",
		"name", &name, "nodes", &nodes, "doc?", &doc, "max_depth?", &maxDepth, "budget?", &budget,
		"output?", &output, "input?", &input, "on_exhausted?", &onExhausted, "on_budget?", &onBudget,
	)
	if err != nil {
		return nil, err
	}
	elems, ok := sequenceElems(nodes)
	if !ok {
		return nil, fmt.Errorf("flow: nodes must be a list of nodes, got %s", nodes.Type())
	}
	nvs := make([]*nodeValue, len(elems))
	for i, e := range elems {
		nv, ok := e.(*nodeValue)
		if !ok {
			return nil, fmt.Errorf("flow: nodes[%d] is a %s, want a node made by task, subflow, fanout, wait, branch or agent", i, e.Type())
		}
		nvs[i] = nv
	}

	site := ls.callerSite(thread)
	fs, _ := thread.Local(localFile).(*fileState)
	f := &flows.Flow{Name: name, Doc: doc, MaxDepth: maxDepth, Budget: budget, Pos: site.Start}
	addf := func(param string, code flows.Code, format string, args ...any) {
		ls.addf(site.ArgPos(param), code, nil, fmt.Sprintf("flow %q: ", name)+format, args...)
	}
	if !validName(name) {
		addf("name", flows.CodeInvalid, "names start with a letter or '_' and hold letters, digits, '_', '-' or '.' (at most %d)", maxNameLen)
	}
	if maxDepth < 0 {
		addf("max_depth", flows.CodeInvalid, "max_depth = %d, must not be negative", maxDepth)
	}
	if budget < 0 {
		addf("budget", flows.CodeInvalid, "budget = %d, must not be negative", budget)
	}
	if len(nvs) == 0 {
		addf("nodes", flows.CodeInvalid, "has no nodes")
	}
	ls.checkDoc(site.ArgPos("doc"), fmt.Sprintf("flow %q", name), doc)
	if !checkOnExhausted(onExhausted, func(format string, args ...any) { addf("on_exhausted", flows.CodeInvalid, format, args...) }) {
		onExhausted.s = ""
	}
	if !checkOnBudget(onBudget, func(format string, args ...any) { addf("on_budget", flows.CodeInvalid, format, args...) }) {
		onBudget.s = ""
	}

	f.Nodes = make([]*flows.Node, 0, len(nvs))
	index := make(map[string]*flows.Node, len(nvs))
	for _, nv := range nvs {
		n := &nv.node
		if nv.claimed {
			n = new(flows.Node)
			*n = nv.node
		}
		if prev, dup := index[n.ID]; dup {
			ls.addf(n.Pos, flows.CodeDuplicate, nil, "flow %q: node id %q is already used at %s", name, n.ID, prev.Pos)
			continue
		}
		if !nv.claimed {
			nv.claimed = true
			ls.claimed = append(ls.claimed, nv)
			ls.checkDoc(n.ArgPos("doc"), fmt.Sprintf("flow %q: %s %q", name, n.Kind, n.ID), n.Doc)
		}
		for p, v := range nv.values {
			if v == nil {
				continue
			}
			ref := &flows.CallableRef{Flow: name, Node: n.ID, Param: paramNames[p]}
			switch p {
			case paramArgs:
				n.Args = ref
			case paramCond:
				n.Cond = ref
			case paramItems:
				n.Items = ref
			case paramReduce:
				n.Reduce = ref
			case paramMature:
				n.Mature = ref
			case paramSystem:
				n.System = ref
			case paramPrompt:
				n.Prompt = ref
			case paramMatch:
				n.Match = ref
			}
			if ls.callables != nil {
				ls.callables[*ref] = callable{value: v, pos: n.ArgPos(ref.Param)}
			}
			if _, isFn := v.(starlark.Callable); p == paramArgs && !isFn {
				if c, err := front.FromStarlark(v); err == nil {
					ls.constArgs[n] = c
				}
			}
			if p == paramArgs {
				ls.project(f, ref, v)
			}
		}
		if n.Kind == flows.KindTask {
			// The node's own on_exhausted, or else this flow's default.
			n.OnExhausted = cmp.Or(nv.onExhausted, onExhausted.s)
		}
		if n.Kind == flows.KindAgent {
			// The agent's own on_budget, or else this flow's default.
			n.OnBudget = cmp.Or(nv.onBudget, onBudget.s)
		}
		if budget > 0 && n.Budget > budget {
			ls.addf(n.ArgPos("budget"), flows.CodeInvalid, nil, "flow %q: node %s's budget = %d is more than the flow's budget = %d: its child run could never be admitted",
				name, n.ID, n.Budget, budget)
		}
		index[n.ID] = n
		f.Nodes = append(f.Nodes, n)
	}
	f.Seal()
	if len(f.Nodes) > 0 {
		f.Entry = f.Nodes[0].ID
	}

	if output != nil && output != starlark.None {
		if msg := checkValue(output, specOutput); msg != "" {
			addf("output", flows.CodeInvalid, "output %s", msg)
		}
		f.Output = &flows.CallableRef{Flow: name, Param: "output"}
		if ls.callables != nil {
			ls.callables[*f.Output] = callable{value: output, pos: site.ArgPos("output")}
		}
	}
	if input != nil && input != starlark.None {
		if schema, code, msg := inputSchemaOf(input); msg != "" {
			addf("input", code, "input %s", msg)
		} else {
			f.Input = schema
		}
	}

	if prev, dup := ls.flowPos[name]; dup {
		ls.addf(site.Start, flows.CodeDuplicate, nil, "flow %q is already declared at %s", name, prev)
		return starlark.None, nil
	}
	ls.flowPos[name] = f.Pos
	if fs != nil {
		ls.declFile[name] = fs.file.Path
	}
	ls.mod.AddFlow(f)
	return starlark.None, nil
}

// inputSchemaOf encodes and compiles a flow's input schema (or an
// agent's output schema) and checks its bounds; the message is empty
// when it is valid, else code says which check refused it.
func inputSchemaOf(v starlark.Value) (json.RawMessage, flows.Code, string) {
	if _, ok := v.(*starlark.Dict); !ok {
		return nil, flows.CodeInvalid, fmt.Sprintf("must be a JSON schema written as a dict; got a %s", v.Type())
	}
	g, err := front.FromStarlark(v)
	if err != nil {
		return nil, flows.CodeInvalid, fmt.Sprintf("has no JSON form: %v", err)
	}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, flows.CodeInvalid, fmt.Sprintf("has no JSON form: %v", err)
	}
	if len(b) > flows.MaxSchemaBytes {
		return nil, flows.CodeSchemaLimit, fmt.Sprintf("is %d bytes as JSON, more than the limit of %d (flows.MaxSchemaBytes)", len(b), flows.MaxSchemaBytes)
	}
	if limit, err := flows.CheckUserSchema(b); err != nil {
		if limit {
			return nil, flows.CodeSchemaLimit, fmt.Sprintf("is refused: %v", err)
		}
		return nil, flows.CodeInvalid, fmt.Sprintf("is not a valid JSON schema: %s", err)
	}
	return b, "", ""
}

// sequenceElems returns the elements of a list or tuple, and false for
// any other value.
func sequenceElems(v starlark.Value) ([]starlark.Value, bool) {
	switch x := v.(type) {
	case *starlark.List:
		elems := make([]starlark.Value, x.Len())
		for i := range elems {
			elems[i] = x.Index(i)
		}
		return elems, true
	case starlark.Tuple:
		return x, true
	}
	return nil, false
}
