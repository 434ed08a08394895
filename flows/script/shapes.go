package script

import (
	"fmt"

	"github.com/weirhq/weir/flows"
	"go.starlark.net/syntax"
)

// Static checks of the shapes of values where the checker knows them: a
// node's constant args against its tool's declared input schema (an
// error: every call would be refused), and a callable's use of a fanout's
// whole result where its items' results were likely meant (a warning: the
// checker cannot see what the value is used for).

// checkConstArgs checks a node's constant args against its tool's input
// schema, when the tool declares one.
func (ls *loadState) checkConstArgs(n *flows.Node, info flows.ToolInfo) {
	args, ok := ls.constArgs[n]
	if !ok || len(info.InputSchema) == 0 {
		return
	}
	compiled, err := flows.CheckValue(info.InputSchema, n.Tool, args)
	if !compiled {
		return // the tool's own problem, reported when it is called
	}
	if err != nil {
		msg := err.Error()
		if ie, isInput := err.(*flows.InputError); isInput {
			msg = ie.Msg
		}
		ls.addf(n.ArgPos("args"), flows.CodeToolInput, nil, "%s %q: args do not match the input schema of tool %q, so every call would be refused: %s",
			n.Kind, n.ID, n.Tool, msg)
	}
}

// resultRead is a read of ctx.results["NAME"] used whole: not subscripted
// and no method called on it.
type resultRead struct {
	pos  flows.Pos
	name string
}

// wholeResultReads finds the reads X.results["NAME"] of a file that use
// the value whole.
func wholeResultReads(f *syntax.File) []resultRead {
	// Subscripts and attributes of a read use a part of it.
	partial := map[*syntax.IndexExpr]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch e := n.(type) {
		case *syntax.IndexExpr:
			if x, ok := e.X.(*syntax.IndexExpr); ok {
				partial[x] = true
			}
		case *syntax.SliceExpr:
			if x, ok := e.X.(*syntax.IndexExpr); ok {
				partial[x] = true
			}
		case *syntax.DotExpr:
			if x, ok := e.X.(*syntax.IndexExpr); ok {
				partial[x] = true
			}
		}
		return true
	})
	var out []resultRead
	syntax.Walk(f, func(n syntax.Node) bool {
		e, ok := n.(*syntax.IndexExpr)
		if !ok || partial[e] {
			return true
		}
		dot, ok := e.X.(*syntax.DotExpr)
		if !ok || dot.Name.Name != "results" {
			return true
		}
		lit, ok := e.Y.(*syntax.Literal)
		if !ok || lit.Token != syntax.STRING {
			return true
		}
		name, _ := lit.Value.(string)
		start, _ := e.Span()
		out = append(out, resultRead{pos: flows.Pos{File: f.Path, Line: int(start.Line), Col: int(start.Col)}, name: name})
		return true
	})
	return out
}

// checkFanoutReads warns of each whole read of one of f's fanouts' result
// in the files that declare f's nodes.
func (ls *loadState) checkFanoutReads(f *flows.Flow) {
	fanouts := map[string]bool{}
	files := map[string]bool{}
	for _, n := range f.Nodes {
		if n.Kind == flows.KindFanout {
			fanouts[n.ID] = true
		}
		files[n.Pos.File] = true
	}
	if len(fanouts) == 0 {
		return
	}
	for file := range files {
		fs := ls.files[file]
		if fs == nil {
			continue
		}
		for _, r := range fs.wholeReads {
			if fanouts[r.name] {
				ls.warnf(r.pos, flows.CodeFanoutResult,
					"%s is fanout %q's whole result, a dict {results, late, sufficient, cutoff}; the list of its items' results is %s",
					fmt.Sprintf("ctx.results[%q]", r.name), r.name, fmt.Sprintf("ctx.results[%q][\"results\"]", r.name))
			}
		}
	}
}
