package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
)

// Registry registers flow versions after checking them. Subflow calls
// resolve against the files registered together first and the latest
// registered version of each other flow second, so a registration that
// would close a call cycle with registered flows is refused with the chain.
// Registrations are serialized where it matters, so two of them cannot each
// pass the cycle check and together make a cycle; running the scripts is
// not, so a slow script delays no one else's registration (Register).
type Registry struct {
	store   flows.VersionStore
	tools   flows.Catalog
	scripts flows.Scripts
	mu      sync.Mutex
	// stored counts registrations that stored versions: a check made
	// while it stayed the same saw every registered flow.
	stored atomic.Uint64
	// checks keeps clean checks by the files' hash (KeepChecks); nil:
	// every registration runs its scripts.
	checks        *script.Cache
	checksSkipped atomic.Uint64
}

// KeepChecks keeps the registry's clean checks in c, so that a
// registration of files checked before, whose every lookup answers as it
// did, skips its scripts and checks (see checkMemo). Call it before the
// registry is used.
func (r *Registry) KeepChecks(c *script.Cache) { r.checks = c }

// ChecksSkipped counts the checks answered from KeepChecks' cache.
func (r *Registry) ChecksSkipped() uint64 { return r.checksSkipped.Load() }

// NewRegistry returns a registry over store, resolving tools in tools
// (nil: no tool resolves).
func NewRegistry(store flows.VersionStore, tools flows.Catalog) *Registry {
	return &Registry{store: store, tools: tools, scripts: script.Local{}}
}

// NewRegistryWith is NewRegistry with explicit loader limits.
func NewRegistryWith(store flows.VersionStore, tools flows.Catalog, loader script.Loader) *Registry {
	return &Registry{store: store, tools: tools, scripts: script.Local{Loader: loader}}
}

// NewRegistryScripts is NewRegistry with the scripts run by s (a sandbox).
func NewRegistryScripts(store flows.VersionStore, tools flows.Catalog, s flows.Scripts) *Registry {
	return &Registry{store: store, tools: tools, scripts: s}
}

// Check loads files and runs every static check against the registered
// flows, without registering anything. The error is a store failure, not a
// problem with the flows.
func (r *Registry) Check(ctx context.Context, files []flows.File) (*flows.Module, flows.Diagnostics, error) {
	return r.analyze(ctx, flows.AnalyzeRequest{Files: files, Tools: r.tools, Lookup: r.lookup(ctx), Full: true})
}

// Register checks files and, when there is no error, stores a version of
// every flow they declare and makes each the latest of its name, and
// answers the warnings. With errors nothing is stored. The error is a
// store failure.
//
// The scripts run and the checks are made outside the registration lock:
// a script that runs to its time limit holds up no other registration.
// Under the lock the versions are stored only if no other registration
// stored anything meanwhile; otherwise the checks are made again, under
// the lock, against what it stored.
func (r *Registry) Register(ctx context.Context, files []flows.File) ([]*flows.Version, flows.Diagnostics, error) {
	return r.RegisterCommit(ctx, files, func(ctx context.Context, _ *flows.Module, vs []*flows.Version) error {
		for _, v := range vs {
			if err := r.store.VersionPut(ctx, v); err != nil {
				return fmt.Errorf("storing flow %s: %w", v.Flow.Name, err)
			}
		}
		return nil
	})
}

// RegisterCommit is Register with the versions stored by commit, all of
// them in one call, under the registration lock (a runtime checks who may
// register each name there, and stores them all or none); commit is given
// the checked module too, for what it declares beside flows (schedules,
// triggers). commit's error is returned as it is.
func (r *Registry) RegisterCommit(ctx context.Context, files []flows.File, commit func(context.Context, *flows.Module, []*flows.Version) error) ([]*flows.Version, flows.Diagnostics, error) {
	req := flows.AnalyzeRequest{Files: files, Tools: r.tools, Lookup: r.lookup(ctx), Full: true}
	seen := r.stored.Load()
	m, ds, err := r.analyze(ctx, req)
	if err != nil || len(ds.Errors()) > 0 {
		return nil, ds, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stored.Load() != seen {
		if m, ds, err = r.analyze(ctx, req); err != nil || len(ds.Errors()) > 0 {
			return nil, ds, err
		}
	}
	vs := m.Versions()
	err = commit(ctx, m, vs)
	r.stored.Add(1) // on an error too: some versions may be stored
	if err != nil {
		return nil, nil, err
	}
	return vs, ds, nil
}

// Latest returns the latest registered version of the named flow, or
// ErrNotFound.
func (r *Registry) Latest(ctx context.Context, name string) (*flows.Version, error) {
	return r.store.VersionLatest(ctx, name)
}

// Get returns the registered version with the given hash, or ErrNotFound.
func (r *Registry) Get(ctx context.Context, hash string) (*flows.Version, error) {
	return r.store.VersionGet(ctx, hash)
}

// lookup resolves a called flow to its latest registered version, nil if
// there is none, reading the store under ctx.
func (r *Registry) lookup(ctx context.Context) func(name string) (*flows.Flow, error) {
	return func(name string) (*flows.Flow, error) {
		v, err := r.store.VersionLatest(ctx, name)
		if errors.Is(err, flows.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return v.Flow, nil
	}
}
