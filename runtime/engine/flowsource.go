package engine

import (
	"context"
	"errors"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// FlowSource is a flow's latest registered version with the source files
// it was registered from, for reading.
type FlowSource struct {
	RegisteredFlow
	// Seq counts the name's versions: the latest has the highest.
	Seq          uint64
	RegisteredAt time.Time
	Files        []SourceFile
}

// FlowSource returns the latest registered version of a flow and its
// source files. Every user may read registered flows (docs/design.md §11).
func (e *Engine) FlowSource(ctx context.Context, name string) (*FlowSource, error) {
	fe, err := e.latestFlow(ctx, name)
	if err != nil {
		return nil, err
	}
	var v *store.FlowVersion
	var src *store.Source
	err = e.st.View(ctx, func(tx store.Tx) error {
		var err error
		if v, err = tx.FlowVersionGet(name, fe.flow.Hash); err != nil {
			return err
		}
		src, err = tx.SourceGet(fe.flow.SourceHash)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Error{Code: CodeFlowUnreadable, Class: ClassRun, Message: "flow " + name + ": its sources are missing from the store"}
	}
	if err != nil {
		return nil, e.readFailed(err)
	}
	out := &FlowSource{
		RegisteredFlow: RegisteredFlow{Name: name, Hash: fe.flow.Hash, Doc: fe.flow.Doc, Nodes: len(fe.flow.Nodes)},
		Seq:            v.Seq, RegisteredAt: v.RegisteredAt,
	}
	for _, f := range src.Files {
		out.Files = append(out.Files, SourceFile{Path: f.Path, Src: string(f.Src)})
	}
	return out, nil
}
