package front

import (
	"errors"
	"fmt"

	"github.com/weirhq/weir/flows"
	"go.starlark.net/starlark"
)

// Ctx is the ctx a callable receives, in every language. It converts input and results
// on first use; it lives on one thread for one call, so the cache needs no
// lock.
type Ctx struct {
	ref            flows.CallableRef
	c              *flows.Context
	input, results starlark.Value
}

// NewCtx is the ctx of a call of ref with c.
func NewCtx(ref flows.CallableRef, c *flows.Context) *Ctx { return &Ctx{ref: ref, c: c} }

// Ref is the reference being called.
func (cv *Ctx) Ref() flows.CallableRef { return cv.ref }

// Context is what the runtime passed for the call.
func (cv *Ctx) Context() *flows.Context { return cv.c }

var (
	_ starlark.Value    = (*Ctx)(nil)
	_ starlark.HasAttrs = (*Ctx)(nil)
)

func (cv *Ctx) String() string {
	return fmt.Sprintf("<ctx %s attempt %d>", cv.c.RunID, cv.c.Attempt)
}
func (cv *Ctx) Type() string          { return "ctx" }
func (cv *Ctx) Freeze()               {}
func (cv *Ctx) Truth() starlark.Bool  { return true }
func (cv *Ctx) Hash() (uint32, error) { return 0, errors.New("unhashable type: ctx") }

var ctxAttrs = []string{"attempt", "flow", "input", "node", "results", "run_id"}

func (cv *Ctx) AttrNames() []string { return ctxAttrs }

func (cv *Ctx) Attr(name string) (starlark.Value, error) {
	switch name {
	case "input":
		if cv.input == nil {
			v, err := ToStarlark(cv.c.Input)
			if err != nil {
				return nil, fmt.Errorf("ctx.input: %v", err)
			}
			cv.input = v
		}
		return cv.input, nil
	case "results":
		if cv.results == nil {
			m := cv.c.Results
			if m == nil {
				m = map[string]any{}
			}
			v, err := ToStarlark(m)
			if err != nil {
				return nil, fmt.Errorf("ctx.results: %v", err)
			}
			cv.results = v
		}
		return cv.results, nil
	case "run_id":
		return starlark.String(cv.c.RunID), nil
	case "attempt":
		return starlark.MakeInt(cv.c.Attempt), nil
	case "flow":
		return starlark.String(cv.ref.Flow), nil
	case "node":
		return starlark.String(cv.ref.Node), nil
	}
	return nil, nil
}
