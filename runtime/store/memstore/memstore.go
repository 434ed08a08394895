// Package memstore is an in-memory store.Store: the second backend of the
// storage contract, kept for tests and seams only.
//
// It exists for two reasons. Passing storetest with a design unlike
// Badger's proves that the contract in package store says what the engine
// relies on rather than what badgerstore happens to do. And engine unit
// tests that are about scheduling, not storage, run faster and without a
// data directory on it. It is not a product backend: nothing is written to
// disk, so nothing survives the process.
//
// The design is chosen to be obviously correct, not fast. Updates are
// serialised by one mutex; each function writes into its own overlay over
// the committed state, reads see the overlay first (so a function reads its
// own writes, lists included), and the overlay is applied only when the
// function returns nil. A View reads the committed state as it was when the
// View began: a commit that finds Views still reading the current state
// applies its writes to a copy instead, so a snapshot is never changed
// under a reader and a View holds no lock while its function runs.
//
// Records are kept JSON-encoded, as Badger keeps them, so a caller never
// shares memory with the store and every record comes back exactly as it
// would from the durable backend.
package memstore

import (
	"context"
	"maps"
	"sync"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
)

// Store is an in-memory store.Store. The zero value is not usable; call
// New.
type Store struct {
	db   *db
	gate storekit.Gate // Updates and Views in progress, and Close
}

var _ store.Store = (*Store)(nil)

// db is the data a Store works on. It outlives the Store, as a data
// directory outlives a process, so Reopen can hand it to a new Store.
type db struct {
	// update serialises Updates: each function runs alone against the
	// committed state, which is what makes it atomic and isolated.
	update sync.Mutex

	mu   sync.Mutex // guards cur, cur.readers and open
	cur  *state
	open bool // a Store over this data is open
}

// state is one version of the committed data: per table, key to entry.
// A state with readers is never changed again; a commit copies it first.
type state struct {
	tables  [numTables]map[string]*entry
	readers int
}

// entry is one stored record: its encoding, handed out as fresh copies,
// and a decoded copy the store reads when filtering and sorting and never
// gives away.
type entry struct {
	raw []byte
	val any
}

func newState() *state {
	s := &state{}
	for i := range s.tables {
		s.tables[i] = map[string]*entry{}
	}
	return s
}

// clone copies the maps; entries are never changed once stored, so they
// are shared.
func (s *state) clone() *state {
	c := &state{}
	for i, m := range s.tables {
		c.tables[i] = maps.Clone(m)
	}
	return c
}

// New returns an empty, open store.
func New() *Store {
	return &Store{db: &db{cur: newState(), open: true}}
}

// Reopen returns a new Store over the data of s, which must have been
// closed: the in-memory counterpart of opening a data directory again
// after a restart. While s is open it returns store.ErrLocked, as a
// second open of a Badger directory in use does.
func (s *Store) Reopen() (*Store, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	if s.db.open {
		return nil, store.ErrLocked
	}
	s.db.open = true
	return &Store{db: s.db}, nil
}

// Capabilities reports no group commit: Updates are serialised and have
// no sync to share.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{}
}

// Update runs fn alone against the committed state and applies its writes
// if it returns nil. As with every backend, fn must be short, must not
// block and must not call Update on the same store: Updates are
// serialised, so a nested one waits for itself.
//
// ctx is checked before fn runs (after waiting for the Updates ahead);
// once fn has run its result stands whatever ctx says. A panic in fn
// discards its writes and propagates.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.gate.Enter(ctx); err != nil {
		return err
	}
	defer s.gate.Leave()
	s.db.update.Lock()
	defer s.db.update.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	s.db.mu.Lock()
	base := s.db.cur
	s.db.mu.Unlock()
	// Only this Update changes the committed state until it unlocks
	// db.update, and only by commit below, so base can be read without
	// db.mu while fn runs.
	t := &tx{base: base, writes: map[table]map[string]*entry{}}
	defer t.End()
	if err := fn(t); err != nil {
		return err
	}
	s.db.commit(t.writes)
	return nil
}

// commit applies writes (a nil entry deletes) to the committed state,
// copying it first if a View is reading it.
func (d *db) commit(writes map[table]map[string]*entry) {
	if len(writes) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur.readers > 0 {
		d.cur = d.cur.clone()
	}
	for tb, w := range writes {
		m := d.cur.tables[tb]
		for k, e := range w {
			if e == nil {
				delete(m, k)
			} else {
				m[k] = e
			}
		}
	}
}

// View runs fn on the committed state as it is when View begins, on the
// caller's goroutine. Write methods return store.ErrReadOnly.
func (s *Store) View(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.gate.Enter(ctx); err != nil {
		return err
	}
	defer s.gate.Leave()
	s.db.mu.Lock()
	snap := s.db.cur
	snap.readers++
	s.db.mu.Unlock()
	defer func() {
		s.db.mu.Lock()
		snap.readers--
		s.db.mu.Unlock()
	}()
	t := &tx{base: snap, TxGuard: storekit.TxGuard{ReadOnly: true}}
	defer t.End()
	return fn(t)
}

// Close waits for in-flight Updates and Views (later ones get
// store.ErrClosed) and releases the data for Reopen. The data itself is
// kept.
func (s *Store) Close() error {
	if err := s.gate.Close(); err != nil {
		return err
	}
	s.db.mu.Lock()
	s.db.open = false
	s.db.mu.Unlock()
	return nil
}
