package front

import (
	"errors"
	"fmt"

	"github.com/weirhq/weir/flows"
	"go.starlark.net/starlark"
)

// DefaultMaxSteps is the step limit of one file's execution at load time
// and of one callable evaluation at run time when the loader sets none.
// Registering a flow of 10,000 nodes takes well under a tenth of it; an
// endless loop reaches it in a fraction of a second.
const DefaultMaxSteps = 10_000_000

// Builtins are the builtins that declare flows, in every language.
// schedule and on_event declare beside the flows, not as nodes.
var Builtins = []string{"flow", "task", "subflow", "fanout", "wait", "branch", "agent", "schedule", "on_event"}

// CallableParams are the node parameters that take a callable or a
// constant evaluated at run time, in the order the core keeps them.
var CallableParams = [...]string{"args", "cond", "items", "reduce", "mature", "system", "prompt", "match"}

// DeclParams are the parameters of schedule and on_event that take a
// callable, called with one argument (the tick or the event) and no ctx.
var DeclParams = []string{"input", "filter"}

// ErrNoCallable is returned for a reference the sources do not declare
// (sources that are not the flow's, or a hand-made ref).
var ErrNoCallable = errors.New("no such callable in these sources")

// Language is the front end of a flow language other than Starlark: the
// core gives it the files whose path ends in Ext.
type Language interface {
	// Name names the language in diagnostics ("Lua").
	Name() string
	// Ext is the ending of the paths of its files (".lua").
	Ext() string
	// Compile parses and compiles one file. It touches nothing else, so
	// that the files of a set compile in parallel. A file that does not
	// parse or compile is a *SyntaxError.
	Compile(f flows.File) (Program, error)
}

// Program is one compiled file.
type Program interface {
	// Run executes the file at load time with a step limit; each call
	// of one of Builtins goes to d. An error that ends the execution is
	// a *ScriptError.
	Run(d Declarer, maxSteps uint64) error
}

// Declarer is what a front end's builtins call at load time: the core's
// builtin of that name, called with Starlark values. site is where the
// call is written. The result is the builtin's (a node for all but flow,
// which returns None); an error is the builtin's refusal, whose message
// the front end raises in its script.
type Declarer interface {
	Declare(builtin string, args starlark.Tuple, kwargs []starlark.Tuple, site *Site) (starlark.Value, error)
}

// Function is a callable of another language as the core holds it: its
// arity is checked at load time against how the runtime will call it.
type Function interface {
	starlark.Callable
	// Arity is the number of parameters the function declares and
	// whether it takes varargs.
	Arity() (params int, varargs bool)
}

// SyntaxError is a file that does not parse or compile.
type SyntaxError struct {
	Pos flows.Pos
	Msg string
}

func (e *SyntaxError) Error() string { return e.Pos.String() + ": " + e.Msg }

// ScriptError is a script's failure, at load time or in a callable: where
// it happened, its message, and the script limit that stopped it, if one
// did.
type ScriptError struct {
	Pos   flows.Pos
	Msg   string
	Limit flows.Limit
}

func (e *ScriptError) Error() string { return e.Pos.String() + ": " + e.Msg }

// Thread-local keys.
const (
	localSteps = "weir.flows.maxsteps"
	localRef   = "weir.flows.ref"
)

// SetStepLimit records the step limit of the thread's execution, for the
// builtins and callables that charge work to it.
func SetStepLimit(thread *starlark.Thread, n uint64) { thread.SetLocal(localSteps, n) }

// StepLimit is the thread's step limit, or 0 if none was set.
func StepLimit(thread *starlark.Thread) uint64 {
	n, _ := thread.Local(localSteps).(uint64)
	return n
}

// SetCallRef records the reference a callable evaluation on thread
// evaluates.
func SetCallRef(thread *starlark.Thread, ref flows.CallableRef) { thread.SetLocal(localRef, ref) }

// CallRef is the reference being evaluated on thread.
func CallRef(thread *starlark.Thread) flows.CallableRef {
	ref, _ := thread.Local(localRef).(flows.CallableRef)
	return ref
}

// CheckJSONNesting scans JSON text for brackets nested deeper than
// MaxValueDepth without decoding it (the decoder recurses per bracket).
func CheckJSONNesting(s string) error {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > flows.MaxValueDepth {
				return &flows.LimitError{Limit: flows.LimitDepth, Detail: fmt.Sprintf("json.decode: the JSON is nested more than %d deep (MaxValueDepth)", flows.MaxValueDepth)}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}
