package script

import (
	"encoding/json"
	"slices"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script/front"
)

// maxProjDepth bounds how deep a projection's literal may nest: deeper,
// the callable is simply evaluated as a script.
const maxProjDepth = 32

// projOf compiles a lambda into the projection it is (flows.Proj), or nil
// when it does anything more than project its ctx: it must take exactly
// its ctx and return a dict literal whose values are literals, fields of
// ctx (input and results indexed by literal keys, run_id, attempt), or
// dicts and lists of those. The check is on the syntax alone, so it
// proves what the lambda does: a name other than its parameter (a global,
// a builtin, True) is not a projection, whatever it is bound to.
func projOf(l *syntax.LambdaExpr) *flows.Proj {
	if len(l.Params) != 1 {
		return nil
	}
	ctx, ok := l.Params[0].(*syntax.Ident)
	if !ok {
		return nil // a default, *args or **kwargs
	}
	if _, ok := unparen(l.Body).(*syntax.DictExpr); !ok {
		return nil // args returns a dict; anything else is the script's to refuse
	}
	return projExpr(l.Body, ctx.Name, 0)
}

func unparen(e syntax.Expr) syntax.Expr {
	for {
		p, ok := e.(*syntax.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

// projExpr compiles one expression of a projection, nil if it is not one.
func projExpr(e syntax.Expr, ctx string, depth int) *flows.Proj {
	if depth > maxProjDepth {
		return nil
	}
	switch x := unparen(e).(type) {
	case *syntax.Literal:
		if key := literalKey(x); key != nil {
			return &flows.Proj{Op: flows.ProjLiteral, Value: key}
		}
	case *syntax.DotExpr:
		if id, ok := x.X.(*syntax.Ident); ok && id.Name == ctx {
			switch x.Name.Name {
			case "input":
				return &flows.Proj{Op: flows.ProjInput}
			case "results":
				return &flows.Proj{Op: flows.ProjResults}
			case "run_id":
				return &flows.Proj{Op: flows.ProjRunID}
			case "attempt":
				return &flows.Proj{Op: flows.ProjAttempt}
			}
		}
	case *syntax.IndexExpr:
		of := projExpr(x.X, ctx, depth+1)
		y, neg := unparen(x.Y), false
		if u, ok := y.(*syntax.UnaryExpr); ok && u.Op == syntax.MINUS {
			y, neg = unparen(u.X), true // l[-1]: from the end
		}
		lit, ok := y.(*syntax.Literal)
		if of == nil || !ok || (of.Op != flows.ProjInput && of.Op != flows.ProjResults && of.Op != flows.ProjIndex) {
			return nil
		}
		if neg && lit.Token != syntax.INT {
			return nil
		}
		key := literalKey(lit)
		if neg && key != nil {
			key = append(json.RawMessage("-"), key...)
		}
		if key == nil || (of.Op == flows.ProjResults && lit.Token != syntax.STRING) {
			return nil
		}
		return &flows.Proj{Op: flows.ProjIndex, Of: of, Key: key}
	case *syntax.DictExpr:
		p := &flows.Proj{Op: flows.ProjDict}
		for _, it := range x.List {
			entry := it.(*syntax.DictEntry)
			k, ok := unparen(entry.Key).(*syntax.Literal)
			if !ok || k.Token != syntax.STRING {
				return nil
			}
			key := k.Value.(string)
			if slices.Contains(p.Keys, key) {
				return nil // a duplicate key is the script's error to report
			}
			v := value(entry.Value, ctx, depth)
			if v == nil {
				return nil
			}
			p.Keys, p.Items = append(p.Keys, key), append(p.Items, v)
		}
		return p
	case *syntax.ListExpr:
		p := &flows.Proj{Op: flows.ProjList}
		for _, it := range x.List {
			v := value(it, ctx, depth)
			if v == nil {
				return nil
			}
			p.Items = append(p.Items, v)
		}
		return p
	}
	return nil
}

// value is a projection that stands for a value in a dict or list: not
// ctx.input or ctx.results whole, which is seldom a projection worth
// making and is left to the script.
func value(e syntax.Expr, ctx string, depth int) *flows.Proj {
	v := projExpr(e, ctx, depth+1)
	if v == nil || v.Op == flows.ProjInput || v.Op == flows.ProjResults {
		return nil
	}
	return v
}

// literalKey is a string or 64-bit integer literal's JSON, nil for any
// other literal (bytes, floats, integers past 64 bits: their conversion
// is the script's).
func literalKey(l *syntax.Literal) json.RawMessage {
	switch l.Token {
	case syntax.STRING:
		b, _ := json.Marshal(l.Value.(string))
		return b
	case syntax.INT:
		if i, ok := l.Value.(int64); ok {
			b, _ := json.Marshal(i)
			return b
		}
	}
	return nil
}

// project records on f the projection that ref's value v is, if it is
// one: a constant (its JSON) or a lambda projOf compiled.
func (ls *loadState) project(f *flows.Flow, ref *flows.CallableRef, v starlark.Value) {
	var p *flows.Proj
	switch x := v.(type) {
	case *starlark.Function:
		pos := x.Position()
		if fs, ok := ls.files[pos.Filename()]; ok {
			p = fs.projs[lineCol{Line: pos.Line, Col: pos.Col}]
		}
		if p != nil && (x.NumParams() != 1 || x.HasVarargs() || x.HasKwargs()) {
			p = nil
		}
	case *starlark.Dict:
		g, err := front.FromStarlark(x)
		if err != nil {
			return
		}
		b, err := json.Marshal(g)
		if err != nil {
			return
		}
		p = &flows.Proj{Op: flows.ProjLiteral, Value: b}
	}
	if p == nil {
		return
	}
	if f.Projections == nil {
		f.Projections = map[string]*flows.Proj{}
	}
	f.Projections[ref.String()] = p
}
