package engine

import (
	"context"
	"errors"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// MaxFlowVersions bounds the versions FlowVersions lists: a name's newest.
const MaxFlowVersions = 1000

// FlowSource is a flow's registered version with the source files it was
// registered from, for reading.
type FlowSource struct {
	RegisteredFlow
	// Seq counts the name's versions: the latest has the highest.
	Seq          uint64
	RegisteredAt time.Time
	Owner        string
	Files        []SourceFile
}

// FlowVersion is one registered version of a flow name, without its
// graph or sources.
type FlowVersion struct {
	Seq          uint64
	Hash         string
	RegisteredAt time.Time
	Owner        string // "" for a version from before flows had owners
}

// FlowSource returns a flow version and its source files: the one with
// hash, or the latest with hash "".
func (e *Engine) FlowSource(ctx context.Context, name, hash string) (*FlowSource, error) {
	fe, err := e.book.pick(ctx, name, hash)
	if err != nil {
		return nil, err
	}
	return e.book.source(ctx, name, fe)
}

// FlowGraph returns a flow version for drawing: the one with hash, or the
// latest with hash "".
func (e *Engine) FlowGraph(ctx context.Context, name, hash string) (*flows.Flow, error) {
	fe, err := e.book.pick(ctx, name, hash)
	if err != nil {
		return nil, err
	}
	return fe.flow, nil
}

// FlowVersions lists a flow name's versions, newest first, at most
// MaxFlowVersions. Every user may read registered flows.
func (e *Engine) FlowVersions(ctx context.Context, name string) ([]FlowVersion, error) {
	var vs []*store.FlowVersion
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		vs, err = tx.FlowVersionHistory(name, MaxFlowVersions)
		return err
	}); err != nil {
		return nil, e.admission.readFailed(err)
	}
	if len(vs) == 0 {
		return nil, protocolErr(CodeUnknownFlow, "no flow named %q is registered", name)
	}
	out := make([]FlowVersion, 0, len(vs))
	for _, v := range vs {
		out = append(out, FlowVersion{Seq: v.Seq, Hash: v.Hash, RegisteredAt: v.RegisteredAt, Owner: v.Owner})
	}
	return out, nil
}

// pick loads the version hash of the flow name, or its latest with hash
// "".
func (b *flowBook) pick(ctx context.Context, name, hash string) (*flowEntry, error) {
	if hash == "" {
		return b.latest(ctx, name)
	}
	return b.at(ctx, name, hash)
}

// at loads the version hash of the flow name: E_UNKNOWN_FLOW when the
// name has no such version.
func (b *flowBook) at(ctx context.Context, name, hash string) (*flowEntry, error) {
	err := b.st.View(ctx, func(tx store.Tx) error {
		_, err := tx.FlowVersionGet(name, hash)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocolErr(CodeUnknownFlow, "flow %q has no version %q", name, hash)
	}
	if err != nil {
		return nil, b.admission.readFailed(err)
	}
	fe, err := b.version(ctx, name, hash)
	if err != nil {
		return nil, &Error{Code: CodeFlowUnreadable, Message: err.Error(), Class: ClassRun}
	}
	return fe, nil
}

func (b *flowBook) source(ctx context.Context, name string, fe *flowEntry) (*FlowSource, error) {
	var v *store.FlowVersion
	var src *store.Source
	err := b.st.View(ctx, func(tx store.Tx) error {
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
		return nil, b.admission.readFailed(err)
	}
	out := &FlowSource{
		RegisteredFlow: RegisteredFlow{Name: name, Hash: fe.flow.Hash, Doc: fe.flow.Doc, Nodes: len(fe.flow.Nodes), Input: fe.flow.Input},
		Seq:            v.Seq, RegisteredAt: v.RegisteredAt, Owner: v.Owner,
	}
	for _, f := range src.Files {
		out.Files = append(out.Files, SourceFile{Path: f.Path, Src: string(f.Src)})
	}
	return out, nil
}
