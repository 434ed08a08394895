package engine

import (
	"context"

	"github.com/weirhq/weir/flows"
)

// Check runs registration's checks on files against the registered flows
// and the installed tools, and stores nothing: the flows it answers are
// the versions a registration would store.
func (e *Engine) Check(ctx context.Context, files []SourceFile) (*RegisterResult, error) {
	in := make([]flows.File, len(files))
	for i, f := range files {
		in[i] = flows.File{Path: f.Path, Src: []byte(f.Src)}
	}
	mod, ds, err := e.registry.Check(ctx, in)
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	res := &RegisterResult{Diagnostics: ds, Flows: []RegisteredFlow{}}
	if len(ds.Errors()) == 0 {
		for _, f := range mod.Flows {
			res.Flows = append(res.Flows, RegisteredFlow{Name: f.Name, Hash: f.Hash, Doc: f.Doc, Nodes: len(f.Nodes)})
		}
	}
	return res, nil
}
