package script

import (
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script/front"
	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Script limits. The interpreter counts steps, but a few builtins do work
// proportional to the size or nesting of a value in one step, and nesting
// recurses in Go: json.decode of "[" * 50000000 overflows the Go stack,
// which no recover() can catch, and str() of a 200,000-deep list is
// quadratic. Those builtins are guarded here; what no guard can see (memory
// a single repetition allocates, time in a quadratic builtin left
// unguarded) is bounded by the process a script runs in (runtime/sandbox).

// checkDoc refuses a doc longer than MaxDocBytes, at the doc argument.
func (ls *loadState) checkDoc(pos flows.Pos, what, doc string) {
	if len(doc) > flows.MaxDocBytes {
		ls.addf(pos, flows.CodeDocTooLarge, nil, "%s: its doc is %d bytes, more than the %d bytes a doc may be (MaxDocBytes); put the rest in a file next to the flow", what, len(doc), flows.MaxDocBytes)
	}
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
		if depth > flows.MaxValueDepth {
			return &flows.LimitError{Limit: flows.LimitDepth, Detail: fmt.Sprintf("%s: the value is nested more than %d deep (MaxValueDepth)", fn, flows.MaxValueDepth)}
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
	if limit := front.StepLimit(thread); limit > 0 && thread.ExecutionSteps() >= limit {
		return &flows.LimitError{Limit: flows.LimitSteps, Detail: fmt.Sprintf("%s: formatting the value took the rest of the %d steps", fn, limit)}
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
				if err := front.CheckJSONNesting(s); err != nil {
					return nil, err
				}
			}
		}
		return starlark.Call(thread, decode, args, kwargs)
	})
	m.Freeze()
	return m
}()
