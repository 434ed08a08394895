package script

import (
	"errors"
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script/front"
	"go.starlark.net/starlark"
)

// ErrNoCallable is returned by Evaluator.Call for a reference the sources
// do not declare (sources that are not the flow's, or a hand-made ref).
var ErrNoCallable = front.ErrNoCallable

// callable is a value a script passed to a builtin, with the position of
// the argument that passed it.
type callable struct {
	value starlark.Value
	pos   flows.Pos
}

// Evaluator evaluates the callables of flows loaded from one set of
// sources. Build it once per SourceHash (it re-runs the scripts) and share
// it: it is immutable, and Call is safe for concurrent use by many
// goroutines, each call running on its own Starlark thread with its own
// step allowance.
type Evaluator struct {
	ls         *loadState
	sourceHash string
	callables  map[flows.CallableRef]callable
	maxSteps   uint64
}

// NewEvaluator re-loads sources (a flow's stored Version.Sources) with the
// default limits; see Loader.NewEvaluator.
func NewEvaluator(sources []flows.File) (*Evaluator, error) { return Loader{}.NewEvaluator(sources) }

// NewEvaluator re-runs the scripts of sources in the sandbox and keeps
// every value passed to a builtin by its CallableRef. Only a script that no
// longer runs is an error (checks were made at registration).
func (l Loader) NewEvaluator(sources []flows.File) (*Evaluator, error) {
	ls := l.run(sources, true)
	if len(ls.diags) > 0 {
		return nil, fmt.Errorf("flow sources do not load: %w", ls.diags.Err())
	}
	for _, c := range ls.callables {
		// Module globals are frozen already; a lambda written inline in a
		// builtin call is reachable only from here.
		c.value.Freeze()
	}
	for _, fs := range ls.files {
		fs.prog = nil // keep positions, not code
	}
	return &Evaluator{
		ls:         ls,
		sourceHash: flows.HashSources(ls.mod.Files),
		callables:  ls.callables,
		maxSteps:   l.maxSteps(),
	}, nil
}

// SourceHash is the content hash of the evaluator's sources; it equals
// Flow.SourceHash when built from the flow's Version.Sources.
func (ev *Evaluator) SourceHash() string { return ev.sourceHash }

// Flow returns the IR of a flow as re-derived from the sources, or nil.
func (ev *Evaluator) Flow(name string) *flows.Flow { return ev.ls.mod.Flow(name) }

// Has reports whether the sources declare ref.
func (ev *Evaluator) Has(ref flows.CallableRef) bool {
	_, ok := ev.callables[ref]
	return ok
}

// Accepts reports whether the callable behind ref takes n positional
// arguments, ctx included (a declaration's callables get none): a function with that many parameters or with
// *args. The runtime passes an optional argument (reduce's items) only to
// a callable that takes it.
func (ev *Evaluator) Accepts(ref flows.CallableRef, n int) bool {
	cl, ok := ev.callables[ref]
	if !ok {
		return false
	}
	if lf, ok := cl.value.(front.Function); ok {
		params, varargs := lf.Arity()
		return varargs || params >= n
	}
	fn, ok := cl.value.(*starlark.Function)
	if !ok {
		return false
	}
	if fn.HasVarargs() {
		return true
	}
	positional := fn.NumParams() - fn.NumKwonlyParams()
	if fn.HasKwargs() {
		positional--
	}
	return positional >= n
}

// Call evaluates the value behind ref. A callable is called with a frozen,
// read-only ctx built from c, followed by extra converted to Starlark; a
// constant is returned as it is. Calling conventions, by ref.Param:
//
//	args     args(ctx) -> dict; a fanout's args(ctx, item) -> dict
//	cond     cond(ctx) -> truth value, returned as bool
//	items    items(ctx) -> list
//	reduce   reduce(ctx, results) -> any; results: published child results, in item order;
//	         reduce(ctx, results, items) also gets items[i], the item results[i] came from:
//	         the runtime passes both, and items is dropped for a function that does
//	         not take it (Accepts), so the decision is made where the function is
//	mature   mature(ctx, item, result) -> truth value, returned as bool
//	output   output(ctx) -> any
//	match    match(ctx) -> string: the key of the event a wait waits for
//
// A declaration's callables (ref.Decl set) get no ctx, only extra:
//
//	input    a schedule's input(tick) or a trigger's input(ev) -> dict
//	filter   a trigger's filter(ev) -> truth value, returned as bool
//
// Values cross as JSON-compatible Go values: nil, bool, string, int64,
// float64, []any and map[string]any (a float64 holding a whole number
// becomes a Starlark int, since JSON has one number type). Errors are
// *CallError.
func (ev *Evaluator) Call(ref flows.CallableRef, c flows.Context, extra ...any) (any, error) {
	cl, ok := ev.callables[ref]
	if !ok {
		return nil, fmt.Errorf("%s: %w", ref, ErrNoCallable)
	}
	v := cl.value
	if fn, isFn := v.(starlark.Callable); isFn {
		if ref.Param == "reduce" && len(extra) > 1 && !ev.Accepts(ref, 1+len(extra)) {
			extra = extra[:1] // reduce(ctx, results): no items
		}
		thread := &starlark.Thread{Name: ref.String(), Print: func(*starlark.Thread, string) {}}
		thread.SetMaxExecutionSteps(ev.maxSteps)
		front.SetStepLimit(thread, ev.maxSteps)
		front.SetCallRef(thread, ref)
		args := make(starlark.Tuple, 0, 1+len(extra))
		if ref.Decl == "" {
			args = append(args, front.NewCtx(ref, &c))
		}
		for _, x := range extra {
			sv, err := front.ToStarlark(x)
			if err != nil {
				return nil, &flows.CallError{Ref: ref, Pos: cl.pos, Msg: fmt.Sprintf("argument %d: %v", len(args)+1, err)}
			}
			args = append(args, sv)
		}
		res, err := starlark.Call(thread, fn, args, nil)
		if err != nil {
			return nil, ev.callError(ref, cl, thread, err)
		}
		v = res
	}
	out, err := shapeResult(ref.Param, v)
	if err != nil {
		return nil, &flows.CallError{Ref: ref, Pos: cl.pos, Msg: err.Error()}
	}
	return out, nil
}

func (ev *Evaluator) callError(ref flows.CallableRef, cl callable, thread *starlark.Thread, err error) error {
	ce := &flows.CallError{Ref: ref, Pos: cl.pos, Msg: err.Error()}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		ce.Pos = ev.ls.framePos(ee.CallStack, cl.pos)
		ce.Msg = ee.Msg
		ce.Backtrace = ee.Backtrace()
	}
	var se *front.ScriptError
	if errors.As(err, &se) { // a callable of another language
		ce.Pos, ce.Msg, ce.Backtrace = se.Pos, se.Msg, ""
		ce.Limit = se.Limit
		return ce
	}
	if thread.ExecutionSteps() >= ev.maxSteps {
		ce.Limit = flows.LimitSteps
		ce.Msg = fmt.Sprintf("step limit exceeded: the callable ran more than %d steps (an endless loop?)", ev.maxSteps)
	} else if l := flows.LimitOf(err); l != "" {
		ce.Limit = l
	}
	return ce
}

// shapeResult converts a callable's result to the Go value the runtime
// expects for the parameter.
func shapeResult(param string, v starlark.Value) (any, error) {
	switch param {
	case "cond", "mature", "filter":
		return bool(v.Truth()), nil
	case "args", "input":
		if _, ok := v.(*starlark.Dict); !ok {
			return nil, fmt.Errorf("%s must return a dict (the input), got %s", param, v.Type())
		}
	case "match":
		if _, ok := v.(starlark.String); !ok {
			return nil, fmt.Errorf("match must return the key the event must carry, a string; got %s", v.Type())
		}
	case "items":
		switch v.(type) {
		case *starlark.List, starlark.Tuple:
		default:
			return nil, fmt.Errorf("items must return a list, got %s", v.Type())
		}
	}
	out, err := front.FromStarlark(v)
	if err != nil {
		return nil, fmt.Errorf("%s returned a value with no JSON form: %v", param, err)
	}
	return out, nil
}
