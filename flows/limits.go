package flows

import (
	"errors"
	"fmt"
	"strings"

	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/weirhq/weir/internal/escape"
)

// Script limits. The interpreter counts steps, but a few builtins do work
// proportional to the size or nesting of a value in one step, and nesting
// recurses in Go: json.decode of "[" * 50000000 overflows the Go stack,
// which no recover() can catch, and str() of a 200,000-deep list is
// quadratic. Those builtins are guarded here; what no guard can see (memory
// a single repetition allocates, time in a quadratic builtin left
// unguarded) is bounded by the process a script runs in (runtime/sandbox).

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

// checkDoc refuses a doc longer than MaxDocBytes, at the doc argument.
func (ls *loadState) checkDoc(pos Pos, what, doc string) {
	if len(doc) > MaxDocBytes {
		ls.addf(pos, CodeDocTooLarge, nil, "%s: its doc is %d bytes, more than the %d bytes a doc may be (MaxDocBytes); put the rest in a file next to the flow", what, len(doc), MaxDocBytes)
	}
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

// checkNesting walks v to MaxValueDepth, charging the thread one step per
// value visited (a builtin that formats or encodes v visits each once). A
// value on its own path (a list that contains itself) is not followed
// again: the builtins print it as [...] or refuse it themselves.
func checkNesting(thread *starlark.Thread, fn string, v starlark.Value) error {
	var visited uint64
	onPath := map[starlark.Value]bool{}
	var walk func(v starlark.Value, depth int) error
	walk = func(v starlark.Value, depth int) error {
		visited++
		if depth > MaxValueDepth {
			return &LimitError{Limit: LimitDepth, Detail: fmt.Sprintf("%s: the value is nested more than %d deep (MaxValueDepth)", fn, MaxValueDepth)}
		}
		var elems func(yield func(starlark.Value) bool)
		switch x := v.(type) {
		case *starlark.List:
			elems = func(yield func(starlark.Value) bool) {
				for i := range x.Len() {
					if !yield(x.Index(i)) {
						return
					}
				}
			}
		case starlark.Tuple:
			elems = func(yield func(starlark.Value) bool) {
				for _, e := range x {
					if !yield(e) {
						return
					}
				}
			}
		case *starlark.Dict:
			elems = func(yield func(starlark.Value) bool) {
				for _, kv := range x.Items() {
					if !yield(kv[0]) || !yield(kv[1]) {
						return
					}
				}
			}
		case *starlark.Set:
			elems = func(yield func(starlark.Value) bool) {
				it := x.Iterate()
				defer it.Done()
				var e starlark.Value
				for it.Next(&e) {
					if !yield(e) {
						return
					}
				}
			}
		default:
			return nil
		}
		if _, isTuple := v.(starlark.Tuple); !isTuple {
			if onPath[v] {
				return nil
			}
			onPath[v] = true
			defer delete(onPath, v)
		}
		var err error
		elems(func(e starlark.Value) bool {
			err = walk(e, depth+1)
			return err == nil
		})
		return err
	}
	err := walk(v, 0)
	thread.Steps += visited
	if err != nil {
		return err
	}
	if limit, _ := thread.Local(localSteps).(uint64); limit > 0 && thread.ExecutionSteps() >= limit {
		return &LimitError{Limit: LimitSteps, Detail: fmt.Sprintf("%s: formatting the value took the rest of the %d steps", fn, limit)}
	}
	return nil
}

// checkJSONNesting scans JSON text for brackets nested deeper than
// MaxValueDepth without decoding it (the decoder recurses per bracket).
func checkJSONNesting(s string) error {
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
			if depth > MaxValueDepth {
				return &LimitError{Limit: LimitDepth, Detail: fmt.Sprintf("json.decode: the JSON is nested more than %d deep (MaxValueDepth)", MaxValueDepth)}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// guardValues wraps a builtin so that its positional arguments are
// checked by checkNesting first.
func guardValues(name string, inner starlark.Value) *starlark.Builtin {
	b := inner.(*starlark.Builtin)
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		for _, a := range args {
			if err := checkNesting(thread, name, a); err != nil {
				return nil, err
			}
		}
		return starlark.Call(thread, b, args, kwargs)
	})
}

// guardedJSON is Starlark's json module with every function guarded: the
// encoders by checkNesting, decode by checkJSONNesting.
var guardedJSON = func() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "json", Members: starlark.StringDict{}}
	for name, fn := range starjson.Module.Members {
		m.Members[name] = guardValues("json."+name, fn)
	}
	decode := starjson.Module.Members["decode"].(*starlark.Builtin)
	m.Members["decode"] = starlark.NewBuiltin("json.decode", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			if s, ok := starlark.AsString(args[0]); ok {
				if err := checkJSONNesting(s); err != nil {
					return nil, err
				}
			}
		}
		return starlark.Call(thread, decode, args, kwargs)
	})
	m.Freeze()
	return m
}()
