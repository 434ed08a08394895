package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
