package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// SourceFile is one flow file sent for registration.
type SourceFile struct {
	Path string `json:"path"`
	Src  string `json:"src"`
}

// RegisteredFlow describes one registered flow version.
type RegisteredFlow struct {
	Name  string `json:"name"`
	Hash  string `json:"hash"`
	Doc   string `json:"doc,omitempty"`
	Nodes int    `json:"nodes"`
	// Input is the JSON schema the flow declares for a run's input, if
	// any: what a caller (an MCP client, say) must send.
	Input json.RawMessage `json:"input,omitempty"`
}

// RegisterResult answers a registration: the versions stored, or the
// diagnostics that refused them (then nothing was stored).
type RegisterResult struct {
	Flows       []RegisteredFlow  `json:"flows"`
	Diagnostics flows.Diagnostics `json:"diagnostics,omitempty"`
}

// Register checks files together against the registered flows and the
// installed tools, and stores a version of every flow they declare.
func (e *Engine) Register(ctx context.Context, files []SourceFile) (*RegisterResult, error) {
	in := make([]flows.File, len(files))
	for i, f := range files {
		in[i] = flows.File{Path: f.Path, Src: []byte(f.Src)}
	}
	vs, ds, err := e.registry.Register(ctx, in)
	if err != nil {
		return nil, e.storageFailed(err)
	}
	res := &RegisterResult{Diagnostics: ds, Flows: []RegisteredFlow{}}
	for _, v := range vs {
		res.Flows = append(res.Flows, RegisteredFlow{Name: v.Flow.Name, Hash: v.Flow.Hash, Doc: v.Flow.Doc, Nodes: len(v.Flow.Nodes), Input: v.Flow.Input})
	}
	return res, nil
}

// Flows lists the latest version of every registered flow.
func (e *Engine) Flows(ctx context.Context) ([]RegisteredFlow, error) {
	var vs []*store.FlowVersion
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		vs, err = tx.FlowVersionList()
		return err
	}); err != nil {
		return nil, e.readFailed(err)
	}
	out := make([]RegisteredFlow, 0, len(vs))
	vstore := versionStore{st: e.st, cache: e.flowCache}
	for _, v := range vs {
		fv, err := vstore.load(ctx, v)
		if err != nil {
			return nil, err
		}
		out = append(out, RegisteredFlow{Name: v.Name, Hash: v.Hash, Doc: fv.Flow.Doc, Nodes: len(fv.Flow.Nodes), Input: fv.Flow.Input})
	}
	return out, nil
}

// versionStore persists the flow registry's versions in the engine's
// store: the IR by (name, hash) and the sources by their own hash. Decoded
// IR comes from the engine's flow cache (versions never change), which
// registration and the runs share: registration resolves the same callees
// again and again.
type versionStore struct {
	st    store.Store
	cache *flows.Cache
}

func (s versionStore) VersionPut(ctx context.Context, v *flows.Version) error {
	ir, err := json.Marshal(v.Flow)
	if err != nil {
		return err
	}
	files := make([]store.SourceFile, len(v.Sources))
	for i, f := range v.Sources {
		files[i] = store.SourceFile{Path: f.Path, Src: f.Src}
	}
	return s.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.SourcePut(&store.Source{Hash: v.Flow.SourceHash, Files: files}); err != nil {
			return err
		}
		return tx.FlowVersionPut(&store.FlowVersion{Name: v.Flow.Name, Hash: v.Flow.Hash, IR: ir})
	})
}

// VersionGet finds a version by hash alone among the latest versions; the
// engine itself always looks versions up by name and hash.
func (s versionStore) VersionGet(ctx context.Context, hash string) (*flows.Version, error) {
	var found *store.FlowVersion
	err := s.st.View(ctx, func(tx store.Tx) error {
		vs, err := tx.FlowVersionList()
		for _, v := range vs {
			if v.Hash == hash {
				found = v
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("version %s: %w", hash, flows.ErrNotFound)
	}
	return s.load(ctx, found)
}

func (s versionStore) VersionLatest(ctx context.Context, name string) (*flows.Version, error) {
	var v *store.FlowVersion
	err := s.st.View(ctx, func(tx store.Tx) error {
		var err error
		v, err = tx.FlowVersionLatest(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("flow %s: %w", name, flows.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return s.load(ctx, v)
}

func (s versionStore) load(ctx context.Context, v *store.FlowVersion) (*flows.Version, error) {
	f, err := s.cache.Flow(ctx, v.Hash, func(context.Context) ([]byte, error) { return v.IR, nil })
	if err != nil {
		return nil, fmt.Errorf("flow %s: %w", v.Name, err)
	}
	return &flows.Version{Flow: f}, nil
}
