package script

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/weirhq/weir/flows"
	"golang.org/x/sync/singleflight"
)

// DefaultCacheBytes is the bound of a Cache built with no bound of its own:
// room for the evaluators and IR of a few thousand ordinary flows, or of
// one flow of about 100,000 nodes.
const DefaultCacheBytes int64 = 256 << 20

// The cache cannot measure the heap an entry keeps alive, so it charges
// each entry an estimate from the size of what it was built from. The
// factors were measured on generated flows of 50 to 20,000 nodes: decoded
// IR takes about 1.6 times its JSON encoding, and an evaluator (the scripts'
// globals, every callable and the IR re-derived from the sources) about 13
// times its source bytes. Both are rounded up so the bound errs on the side
// of less memory.
const (
	// IRCostFactor multiplies the length of a version's stored IR.
	IRCostFactor = 2
	// SourceCostFactor multiplies the bytes of an evaluator's sources
	// (paths and contents).
	SourceCostFactor = 16
	// entryOverhead is charged on top of every entry, so that many tiny
	// entries still count.
	entryOverhead = 512
)

// ErrCacheKey is returned for an empty version or source hash.
var ErrCacheKey = errors.New("flows: cache: empty hash")

// Cache holds what the runtime needs to run flow versions, loaded from a
// store on demand: decoded IR by version hash (Flow.Hash) and evaluators by
// source hash (Flow.SourceHash), so every version declared by the same
// sources shares one evaluator. A Registry given the cache also keeps
// its checks there, by the files' hash (Registry.KeepChecks). Versions are immutable, so an entry never
// goes stale; the cache only has to bound memory.
//
// Entries are kept in least-recently-used order and charged an estimate of
// their heap (IRCostFactor, SourceCostFactor); when the total exceeds the
// bound the least recently used go. An entry larger than the whole bound
// is returned but not kept. Concurrent misses of one key run its load once
// and share the result. Errors are not cached.
//
// A Cache is safe for concurrent use.
type Cache struct {
	loader Loader
	group  singleflight.Group

	mu        sync.Mutex
	maxBytes  int64
	bytes     int64
	order     *list.List // of *cacheEntry, most recently used first
	entries   map[string]*list.Element
	hits      uint64
	misses    uint64
	evictions uint64
}

type cacheEntry struct {
	key   string
	value any
	bytes int64
}

// CacheStats is a snapshot of a Cache's state and counters.
type CacheStats struct {
	// Entries and Bytes are what the cache holds now; Bytes is the sum of
	// the entries' estimates.
	Entries int
	Bytes   int64
	// MaxBytes is the bound in force.
	MaxBytes int64
	// Hits and Misses count lookups; a miss that joined another caller's
	// load counts as a miss.
	Hits, Misses uint64
	// Evictions counts entries dropped to respect the bound, including
	// entries too large to keep at all.
	Evictions uint64
}

// NewCache returns an empty cache bounded to maxBytes (DefaultCacheBytes
// when maxBytes <= 0) whose evaluators are built by loader.
func NewCache(maxBytes int64, loader Loader) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{loader: loader, maxBytes: maxBytes, order: list.New(), entries: map[string]*list.Element{}}
}

// SetMaxBytes changes the bound (DefaultCacheBytes when maxBytes <= 0) and
// evicts down to it at once.
func (c *Cache) SetMaxBytes(maxBytes int64) {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxBytes = maxBytes
	c.evictLocked()
}

// Stats returns the cache's state and counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{
		Entries: len(c.entries), Bytes: c.bytes, MaxBytes: c.maxBytes,
		Hits: c.hits, Misses: c.misses, Evictions: c.evictions,
	}
}

// Flow returns the decoded IR of the version with the given hash. On a miss
// it calls load for the stored IR (the JSON a Flow marshals to) and decodes
// it once for every caller. IR that does not decode, or that is the IR of
// another version, is an error.
func (c *Cache) Flow(ctx context.Context, hash string, load func(context.Context) ([]byte, error)) (*flows.Flow, error) {
	if hash == "" {
		return nil, ErrCacheKey
	}
	v, err := c.get(ctx, "ir:"+hash, func(ctx context.Context) (any, int64, error) {
		ir, err := load(ctx)
		if err != nil {
			return nil, 0, err
		}
		var f flows.Flow
		if err := json.Unmarshal(ir, &f); err != nil {
			return nil, 0, fmt.Errorf("version %s: IR: %w", hash, err)
		}
		if f.Hash != hash {
			return nil, 0, fmt.Errorf("version %s: the stored IR is version %s's", hash, f.Hash)
		}
		return &f, IRCostFactor*int64(len(ir)) + entryOverhead, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*flows.Flow), nil
}

// Evaluator returns the evaluator of the sources with the given hash. On a
// miss it calls load for the stored sources and re-runs them once for every
// caller (Loader.NewEvaluator). Sources that no longer load, or that hash
// to something else, are an error.
func (c *Cache) Evaluator(ctx context.Context, sourceHash string, load func(context.Context) ([]flows.File, error)) (*Evaluator, error) {
	if sourceHash == "" {
		return nil, ErrCacheKey
	}
	v, err := c.get(ctx, "src:"+sourceHash, func(ctx context.Context) (any, int64, error) {
		files, err := load(ctx)
		if err != nil {
			return nil, 0, err
		}
		if got := flows.HashSources(files); got != sourceHash {
			return nil, 0, fmt.Errorf("sources %s: the stored files hash to %s", sourceHash, got)
		}
		ev, err := c.loader.NewEvaluator(files)
		if err != nil {
			return nil, 0, fmt.Errorf("sources %s: %w", sourceHash, err)
		}
		var n int64
		for _, f := range files {
			n += int64(len(f.Path) + len(f.Src))
		}
		return ev, SourceCostFactor*n + entryOverhead, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Evaluator), nil
}

// get returns the value under key, building it with build on a miss. The
// build runs once per key however many callers miss together, and it is
// not cancelled when the caller that started it gives up: the others may
// still want it, and the next caller will find it cached. A caller whose
// ctx ends stops waiting with ctx's error.
func (c *Cache) get(ctx context.Context, key string, build func(context.Context) (any, int64, error)) (any, error) {
	if v, ok := c.lookup(key, true); ok {
		return v, nil
	}
	detached := context.WithoutCancel(ctx)
	ch := c.group.DoChan(key, func() (v any, err error) {
		// A build that finished between the lookup above and joining
		// the group has left its value in the cache.
		if v, ok := c.lookup(key, false); ok {
			return v, nil
		}
		defer func() {
			// Loading runs flow scripts; a fault there must fail this
			// load, not the process.
			if r := recover(); r != nil {
				v, err = nil, fmt.Errorf("flows: cache: loading %s panicked: %v", key, r)
			}
		}()
		v, n, err := build(detached)
		if err != nil {
			return nil, err
		}
		return c.add(key, v, n), nil
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lookup finds key and marks it most recently used; count says whether the
// lookup is a caller's (counted as a hit or a miss) or the build's recheck.
func (c *Cache) lookup(key string, count bool) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		if count {
			c.misses++
		}
		return nil, false
	}
	if count {
		c.hits++
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).value, true
}

// add keeps v under key as the most recently used entry, then evicts down
// to the bound. It returns the value callers should use: the one already
// cached if another build won.
func (c *Cache) add(key string, v any, n int64) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheEntry).value
	}
	if n > c.maxBytes {
		c.evictions++
		return v
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, value: v, bytes: n})
	c.bytes += n
	c.evictLocked()
	return v
}

// Memo returns what Remember kept under key, counting a hit or a miss. A
// caller keeps its own entries this way under keys of its own namespace
// (the registry's checks, "check:..."), charged against the same bound.
func (c *Cache) Memo(key string) (any, bool) { return c.lookup(key, true) }

// Remember keeps v under key in place of whatever was there, charged n
// bytes plus the overhead of every entry, then evicts down to the bound.
func (c *Cache) Remember(key string, v any, n int64) { c.replace(key, v, n+entryOverhead) }

// replace keeps v under key as the most recently used entry in place of
// whatever was there, then evicts down to the bound.
func (c *Cache) replace(key string, v any, n int64) {
	c.mu.Lock()
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
		delete(c.entries, key)
		c.bytes -= el.Value.(*cacheEntry).bytes
	}
	c.mu.Unlock()
	c.add(key, v, n)
}

func (c *Cache) evictLocked() {
	for c.bytes > c.maxBytes {
		el := c.order.Back()
		if el == nil {
			return
		}
		e := c.order.Remove(el).(*cacheEntry)
		delete(c.entries, e.key)
		c.bytes -= e.bytes
		c.evictions++
	}
}
