package flows

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weirhq/weir/internal/escape"
)

// Docs. Every user may read every registered flow (docs/design.md §11),
// and listings (GET /v1/flows, weir flow ls, the console, MCP tools/list)
// show every flow's doc: a doc is bounded at registration, and a listing
// carries only its summary line, cut again when read (versions stored
// before the bound may be longer).
const (
	// MaxDocBytes bounds a flow's doc and a node's doc.
	MaxDocBytes = 64 << 10
	// MaxDocSummaryBytes bounds DocSummary.
	MaxDocSummaryBytes = 200
)

// DocSummary is what a listing shows of a doc: its first non-blank line,
// trimmed, at most MaxDocSummaryBytes. The whole doc is on the flow's own
// read.
func DocSummary(doc string) string {
	// Only the summary's worth of the doc is looked at, however long the
	// doc: a listing of many flows costs its own size.
	head := doc[:min(len(doc), 4*MaxDocSummaryBytes)]
	for line := range strings.Lines(head) {
		if line = strings.TrimSpace(line); line != "" {
			return escape.Cut(line, MaxDocSummaryBytes)
		}
	}
	return escape.Cut(strings.TrimSpace(head), MaxDocSummaryBytes)
}

// MaxValueDepth bounds the nesting of a value that json.decode, json.encode,
// str, repr and print accept, and of values crossing between Go and
// Starlark (a callable's ctx and result).
const MaxValueDepth = 256

// MaxValueNodes bounds how many values (each scalar, list and dict
// counted) one value crossing from Starlark to JSON may expand to.
const MaxValueNodes = 1 << 20

// ErrScriptLimit is matched (errors.Is) by every error of an evaluation that
// exceeded one of a script's limits: a *LimitError, or a *CallError whose
// Limit is set.
var ErrScriptLimit = errors.New("script limit exceeded")

// Limit names which limit a script exceeded. The names cross processes and
// reach users in E_SCRIPT_LIMIT messages; they never change meaning.
type Limit string

// The limits of a script.
const (
	// LimitMemory: the sandbox's memory cap.
	LimitMemory Limit = "memory"
	// LimitTime: the sandbox's wall deadline or CPU time.
	LimitTime Limit = "time"
	// LimitSteps: the step limit (Loader.MaxSteps): Starlark steps, or
	// Lua instructions and what the Lua builtins charge.
	LimitSteps Limit = "steps"
	// LimitDepth: MaxValueDepth, or the stack of the process evaluating.
	LimitDepth Limit = "depth"
	// LimitSize: the bytes a request or answer may carry to or from the
	// sandbox, or what one Lua builtin may build (LuaMaxStringBytes) or
	// return (LuaMaxResults).
	LimitSize Limit = "size"
)

// LimitError is an evaluation stopped by one of a script's limits.
type LimitError struct {
	Limit  Limit
	Detail string
}

// Error formats the failure as the limit and what exceeded it.
func (e *LimitError) Error() string {
	return fmt.Sprintf("script limit (%s): %s", e.Limit, e.Detail)
}

// Is makes every LimitError match ErrScriptLimit, and ErrStepLimit for the
// step limit.
func (e *LimitError) Is(target error) bool {
	return target == ErrScriptLimit || (target == ErrStepLimit && e.Limit == LimitSteps)
}

// LimitOf returns the limit err exceeded, or "" if err is not a script
// limit.
func LimitOf(err error) Limit {
	var le *LimitError
	if errors.As(err, &le) {
		return le.Limit
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Limit
	}
	return ""
}

// ErrStepLimit is wrapped by a CallError when a callable ran out of steps.
var ErrStepLimit = errors.New("step limit exceeded")

// Context is what a callable sees as its read-only ctx argument. Values are
// JSON-compatible Go values (see Evaluator.Call).
type Context struct {
	// RunID is the run's id (ctx.run_id).
	RunID string
	// Attempt is the run's attempt number, from 1 (ctx.attempt).
	Attempt int
	// Input is the run's input (ctx.input).
	Input any
	// Results holds the result of every node that has completed, by node
	// id (ctx.results); a fanout's entry is its reduced result.
	Results map[string]any
}

// CallError is a callable's failure at run time: a Starlark error, a script
// limit, or a result of the wrong shape. Pos is the innermost position in
// the flow's sources.
type CallError struct {
	Ref       CallableRef
	Pos       Pos
	Msg       string
	Backtrace string
	// Limit is the script limit the call exceeded, if that is why it
	// failed.
	Limit Limit
}

// Error formats the failure as pos: ref: message.
func (e *CallError) Error() string { return fmt.Sprintf("%s: %s: %s", e.Pos, e.Ref, e.Msg) }

// Is matches ErrScriptLimit when the call exceeded a limit, and
// ErrStepLimit when that limit was the step limit.
func (e *CallError) Is(target error) bool {
	return (target == ErrScriptLimit && e.Limit != "") || (target == ErrStepLimit && e.Limit == LimitSteps)
}
