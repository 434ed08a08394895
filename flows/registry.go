package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrNotFound is returned by a VersionStore for a version or flow name it
// does not hold.
var ErrNotFound = errors.New("flow version not found")

// Version is one registered version of a flow: its IR and the sources it
// was loaded from, which are all the runtime needs to evaluate its
// callables. Flow.Hash identifies it.
type Version struct {
	Flow    *Flow  `json:"flow"`
	Sources []File `json:"sources"`
}

// VersionStore persists registered flow versions. Implementations must be
// safe for concurrent use. The in-memory MemoryStore is the reference; the
// runtime's store implements the same three operations durably. ctx bounds
// the store's work; a store that does no I/O may ignore it.
type VersionStore interface {
	// VersionPut stores v under v.Flow.Hash and makes it the latest
	// version of v.Flow.Name. Putting a hash that is already stored only
	// makes it the latest again.
	VersionPut(ctx context.Context, v *Version) error
	// VersionGet returns the version with the given hash, or ErrNotFound.
	VersionGet(ctx context.Context, hash string) (*Version, error)
	// VersionLatest returns the most recently put version of the named
	// flow, or ErrNotFound.
	VersionLatest(ctx context.Context, name string) (*Version, error)
}

// MemoryStore is a VersionStore in memory.
type MemoryStore struct {
	mu       sync.RWMutex
	byHash   map[string]*Version
	latest   map[string]string   // name -> hash
	versions map[string][]string // name -> hashes, in first-put order
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{byHash: map[string]*Version{}, latest: map[string]string{}, versions: map[string][]string{}}
}

// VersionPut implements VersionStore.
func (s *MemoryStore) VersionPut(_ context.Context, v *Version) error {
	if v == nil || v.Flow == nil || v.Flow.Hash == "" {
		return errors.New("flows: a version needs a flow with a hash")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byHash[v.Flow.Hash]; !ok {
		s.byHash[v.Flow.Hash] = v
		s.versions[v.Flow.Name] = append(s.versions[v.Flow.Name], v.Flow.Hash)
	}
	s.latest[v.Flow.Name] = v.Flow.Hash
	return nil
}

// VersionGet implements VersionStore.
func (s *MemoryStore) VersionGet(_ context.Context, hash string) (*Version, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.byHash[hash]
	if !ok {
		return nil, fmt.Errorf("version %s: %w", hash, ErrNotFound)
	}
	return v, nil
}

// VersionLatest implements VersionStore.
func (s *MemoryStore) VersionLatest(_ context.Context, name string) (*Version, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.latest[name]
	if !ok {
		return nil, fmt.Errorf("flow %s: %w", name, ErrNotFound)
	}
	return s.byHash[h], nil
}

// VersionList returns the hashes of every stored version of the named
// flow, oldest first.
func (s *MemoryStore) VersionList(name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.versions[name])
}

// Registry registers flow versions after checking them. Subflow calls
// resolve against the files registered together first and the latest
// registered version of each other flow second, so a registration that
// would close a call cycle with registered flows is refused with the chain.
// Registrations are serialized where it matters, so two of them cannot each
// pass the cycle check and together make a cycle; running the scripts is
// not, so a slow script delays no one else's registration (Register).
type Registry struct {
	store   VersionStore
	tools   Catalog
	scripts Scripts
	mu      sync.Mutex
	// stored counts registrations that stored versions: a check made
	// while it stayed the same saw every registered flow.
	stored atomic.Uint64
	// checks keeps clean checks by the files' hash (KeepChecks); nil:
	// every registration runs its scripts.
	checks        *Cache
	checksSkipped atomic.Uint64
}

// KeepChecks keeps the registry's clean checks in c, so that a
// registration of files checked before, whose every lookup answers as it
// did, skips its scripts and checks (see checkMemo). Call it before the
// registry is used.
func (r *Registry) KeepChecks(c *Cache) { r.checks = c }

// ChecksSkipped counts the checks answered from KeepChecks' cache.
func (r *Registry) ChecksSkipped() uint64 { return r.checksSkipped.Load() }

// NewRegistry returns a registry over store, resolving tools in tools
// (nil: no tool resolves).
func NewRegistry(store VersionStore, tools Catalog) *Registry {
	return &Registry{store: store, tools: tools, scripts: Local{}}
}

// NewRegistryWith is NewRegistry with explicit loader limits.
func NewRegistryWith(store VersionStore, tools Catalog, loader Loader) *Registry {
	return &Registry{store: store, tools: tools, scripts: Local{Loader: loader}}
}

// NewRegistryScripts is NewRegistry with the scripts run by s (a sandbox).
func NewRegistryScripts(store VersionStore, tools Catalog, s Scripts) *Registry {
	return &Registry{store: store, tools: tools, scripts: s}
}

// Check loads files and runs every static check against the registered
// flows, without registering anything. The error is a store failure, not a
// problem with the flows.
func (r *Registry) Check(ctx context.Context, files []File) (*Module, Diagnostics, error) {
	return r.analyze(ctx, AnalyzeRequest{Files: files, Tools: r.tools, Lookup: r.lookup(ctx), Full: true})
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
func (r *Registry) Register(ctx context.Context, files []File) ([]*Version, Diagnostics, error) {
	return r.RegisterCommit(ctx, files, func(ctx context.Context, vs []*Version) error {
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
// register each name there, and stores them all or none). commit's error
// is returned as it is.
func (r *Registry) RegisterCommit(ctx context.Context, files []File, commit func(context.Context, []*Version) error) ([]*Version, Diagnostics, error) {
	req := AnalyzeRequest{Files: files, Tools: r.tools, Lookup: r.lookup(ctx), Full: true}
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
	err = commit(ctx, vs)
	r.stored.Add(1) // on an error too: some versions may be stored
	if err != nil {
		return nil, nil, err
	}
	return vs, ds, nil
}

// Latest returns the latest registered version of the named flow, or
// ErrNotFound.
func (r *Registry) Latest(ctx context.Context, name string) (*Version, error) {
	return r.store.VersionLatest(ctx, name)
}

// Get returns the registered version with the given hash, or ErrNotFound.
func (r *Registry) Get(ctx context.Context, hash string) (*Version, error) {
	return r.store.VersionGet(ctx, hash)
}

// lookup resolves a called flow to its latest registered version, nil if
// there is none, reading the store under ctx.
func (r *Registry) lookup(ctx context.Context) func(name string) (*Flow, error) {
	return func(name string) (*Flow, error) {
		v, err := r.store.VersionLatest(ctx, name)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return v.Flow, nil
	}
}
