package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"

	"github.com/weirhq/weir/internal/testutil"
)

// cacheBundle is a cache over versions "stored" in maps, counting every
// load by key, as the runtime's store would serve them.
type cacheBundle struct {
	cache    *Cache
	versions map[string]*flows.Version // by flow name
	ir       map[string][]byte         // by version hash
	sources  map[string][]flows.File   // by source hash
	mu       sync.Mutex
	loads    map[string]int // by version or source hash
}

func setupCache(t *testing.T, maxBytes int64, files ...flows.File) *cacheBundle {
	t.Helper()
	m, ds := Check(files, flowtest.BenchCatalog)
	if len(ds) > 0 {
		t.Fatalf("%s", ds)
	}
	b := &cacheBundle{
		cache:    NewCache(maxBytes, Loader{}),
		versions: map[string]*flows.Version{}, ir: map[string][]byte{}, sources: map[string][]flows.File{},
		loads: map[string]int{},
	}
	for _, v := range m.Versions() {
		ir, err := json.Marshal(v.Flow)
		if err != nil {
			t.Fatal(err)
		}
		b.versions[v.Flow.Name] = v
		b.ir[v.Flow.Hash] = ir
		b.sources[v.Flow.SourceHash] = v.Sources
	}
	return b
}

func (b *cacheBundle) count(key string) {
	b.mu.Lock()
	b.loads[key]++
	b.mu.Unlock()
}

func (b *cacheBundle) loadCount(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loads[key]
}

func (b *cacheBundle) flow(ctx context.Context, hash string) (*flows.Flow, error) {
	return b.cache.Flow(ctx, hash, func(context.Context) ([]byte, error) {
		b.count(hash)
		return b.ir[hash], nil
	})
}

func (b *cacheBundle) evaluator(ctx context.Context, sourceHash string) (*Evaluator, error) {
	return b.cache.Evaluator(ctx, sourceHash, func(context.Context) ([]flows.File, error) {
		b.count(sourceHash)
		return b.sources[sourceHash], nil
	})
}

// mustRun loads a version's IR and evaluator through the cache and calls
// its first node's args, as the runtime does for a step.
func (b *cacheBundle) mustRun(t *testing.T, name string) (*flows.Flow, *Evaluator) {
	t.Helper()
	v := b.versions[name]
	f, err := b.flow(t.Context(), v.Flow.Hash)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := b.evaluator(t.Context(), f.SourceHash)
	if err != nil {
		t.Fatal(err)
	}
	n := f.Node(f.Entry)
	got, err := ev.Call(*n.Args, flows.Context{RunID: "r1", Attempt: 1, Input: map[string]any{"topic": "rivers"}})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := got.(map[string]any); m["topic"] != "rivers" {
		t.Fatalf("%s: args returned %v", name, got)
	}
	return f, ev
}

func TestCacheDecodesIROnceAndSharesEvaluatorsBySourceHash(t *testing.T) {
	t.Parallel()
	// Two flows declared by one file: two versions, one source hash.
	b := setupCache(t, 0, flowtest.Src("two.star", flowtest.GenFlow("a", 20, nil)+flowtest.GenFlow("b", 20, nil)))
	fa, eva := b.mustRun(t, "a")
	fb, evb := b.mustRun(t, "b")
	if fa.SourceHash != fb.SourceHash || eva != evb {
		t.Fatalf("flows of one file got different evaluators (%s, %s)", fa.SourceHash, fb.SourceHash)
	}
	for range 3 {
		if f, ev := b.mustRun(t, "a"); f != fa || ev != eva {
			t.Fatal("a cached version was loaded again")
		}
	}
	if n := b.loadCount(fa.Hash); n != 1 {
		t.Errorf("IR of a loaded %d times, want 1", n)
	}
	if n := b.loadCount(fa.SourceHash); n != 1 {
		t.Errorf("sources loaded %d times, want 1", n)
	}
	st := b.cache.Stats()
	if st.Entries != 3 || st.Misses != 3 || st.Hits != 7 || st.MaxBytes != DefaultCacheBytes {
		t.Errorf("stats %+v, want 3 entries (2 IR, 1 evaluator), 3 misses, 7 hits, the default bound", st)
	}
}

func TestCacheEvictsLeastRecentlyUsedAndReloads(t *testing.T) {
	t.Parallel()
	var files []flows.File
	for i := range 4 {
		files = append(files, flowtest.Src(fmt.Sprintf("f%d.star", i), flowtest.GenFlow(fmt.Sprintf("f%d", i), 30, nil)))
	}
	b := setupCache(t, 0, files...)
	// Measure one flow's charge, then bound the cache to three flows'.
	b.mustRun(t, "f0")
	one := b.cache.Stats().Bytes
	if one <= 0 {
		t.Fatalf("an entry was charged %d bytes", one)
	}
	b.cache.SetMaxBytes(3*one + one/2)
	b.mustRun(t, "f1")
	b.mustRun(t, "f2")
	b.mustRun(t, "f0") // f0 is now the most recently used, f1 the least
	b.mustRun(t, "f3") // evicts f1's two entries
	st := b.cache.Stats()
	if st.Evictions != 2 || st.Entries != 6 || st.Bytes > st.MaxBytes {
		t.Fatalf("stats %+v: want f1's two entries evicted and the bound kept", st)
	}
	f1 := b.versions["f1"].Flow
	f0 := b.versions["f0"].Flow
	b.mustRun(t, "f0")
	if b.loadCount(f0.Hash) != 1 || b.loadCount(f0.SourceHash) != 1 {
		t.Error("f0, recently used, was evicted")
	}
	b.mustRun(t, "f1") // reloads, evaluates correctly (mustRun checks)
	if b.loadCount(f1.Hash) != 2 || b.loadCount(f1.SourceHash) != 2 {
		t.Errorf("evicted f1 loaded %d/%d times, want 2/2", b.loadCount(f1.Hash), b.loadCount(f1.SourceHash))
	}
	if st := b.cache.Stats(); st.Bytes > st.MaxBytes {
		t.Errorf("stats %+v: over the bound", st)
	}

	// Lowering the bound evicts at once.
	b.cache.SetMaxBytes(one)
	if st := b.cache.Stats(); st.Bytes > one || st.Entries == 0 {
		t.Errorf("after lowering the bound to %d: %+v", one, st)
	}
}

func TestCacheKeepsNoEntryLargerThanTheBound(t *testing.T) {
	t.Parallel()
	b := setupCache(t, 1024, flowtest.Src("big.star", flowtest.GenFlow("big", 200, nil)))
	for range 2 {
		b.mustRun(t, "big")
	}
	st := b.cache.Stats()
	if st.Entries != 0 || st.Bytes != 0 || st.Evictions != 4 {
		t.Errorf("stats %+v: want nothing kept and 4 refusals", st)
	}
	if n := b.loadCount(b.versions["big"].Flow.SourceHash); n != 2 {
		t.Errorf("sources loaded %d times, want 2 (nothing kept)", n)
	}
}

func TestCacheConcurrentMissesLoadOnce(t *testing.T) {
	t.Parallel()
	b := setupCache(t, 0, flowtest.Src("a.star", flowtest.GenFlow("a", 50, nil)))
	hash := b.versions["a"].Flow.SourceHash
	const callers = 16
	release := make(chan struct{})
	var loads atomic.Int32
	load := func(context.Context) ([]flows.File, error) {
		loads.Add(1)
		<-release
		return b.sources[hash], nil
	}
	evs := make([]*Evaluator, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { evs[i], errs[i] = b.cache.Evaluator(t.Context(), hash, load) })
	}
	// Every caller has missed before the load may finish: without the
	// single flight each would load.
	misses(t, b.cache, callers)
	close(release)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d concurrent misses ran %d loads, want 1", callers, n)
	}
	for i := range callers {
		if errs[i] != nil || evs[i] != evs[0] || evs[0] == nil {
			t.Fatalf("caller %d: %v, evaluator %p, first %p", i, errs[i], evs[i], evs[0])
		}
	}
}

func TestCacheCallerGivingUpDoesNotFailTheLoad(t *testing.T) {
	t.Parallel()
	b := setupCache(t, 0, flowtest.Src("a.star", flowtest.GenFlow("a", 10, nil)))
	v := b.versions["a"]
	release := make(chan struct{})
	var loadCtx context.Context
	load := func(ctx context.Context) ([]byte, error) {
		loadCtx = ctx
		<-release
		return b.ir[v.Flow.Hash], nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.cache.Flow(ctx, v.Flow.Hash, load)
		done <- err
	}()
	misses(t, b.cache, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller whose ctx ended got %v", err)
	}
	close(release)
	// The load finishes for the next caller, which joins it or finds it.
	f, err := b.cache.Flow(t.Context(), v.Flow.Hash, load)
	if err != nil || f.Name != "a" {
		t.Fatalf("got %v, %v", f, err)
	}
	if loadCtx.Err() != nil {
		t.Errorf("the load ran under the cancelled caller's ctx")
	}
}

func TestCacheRefusesBadInputAndCachesNoError(t *testing.T) {
	t.Parallel()
	b := setupCache(t, 0, flowtest.Src("a.star", flowtest.GenFlow("a", 10, nil)), flowtest.Src("b.star", flowtest.GenFlow("b", 10, nil)))
	a, other := b.versions["a"].Flow, b.versions["b"].Flow
	ctx := t.Context()
	irOf := func(ir []byte, err error) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { return ir, err }
	}
	filesOf := func(fs []flows.File, err error) func(context.Context) ([]flows.File, error) {
		return func(context.Context) ([]flows.File, error) { return fs, err }
	}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"empty version hash", func() error { _, err := b.cache.Flow(ctx, "", irOf(b.ir[a.Hash], nil)); return err }, "empty hash"},
		{"empty source hash", func() error { _, err := b.cache.Evaluator(ctx, "", filesOf(nil, nil)); return err }, "empty hash"},
		{"store failure", func() error { _, err := b.cache.Flow(ctx, a.Hash, irOf(nil, errors.New("disk on fire"))); return err }, "disk on fire"},
		{"IR that does not decode", func() error { _, err := b.cache.Flow(ctx, a.Hash, irOf([]byte("{"), nil)); return err }, "IR"},
		{"another version's IR", func() error { _, err := b.cache.Flow(ctx, a.Hash, irOf(b.ir[other.Hash], nil)); return err }, "version " + other.Hash},
		{"sources of another hash", func() error {
			_, err := b.cache.Evaluator(ctx, a.SourceHash, filesOf(b.sources[other.SourceHash], nil))
			return err
		}, "hash to " + other.SourceHash},
		{"sources that no longer load", func() error {
			bad := []flows.File{flowtest.Src("x.star", "fail(\"gone\")")}
			_, err := b.cache.Evaluator(ctx, flows.HashSources(bad), filesOf(bad, nil))
			return err
		}, "E_SCRIPT"},
		{"a load that panics", func() error {
			_, err := b.cache.Flow(ctx, a.Hash, func(context.Context) ([]byte, error) { panic("boom") })
			return err
		}, "panicked: boom"},
	}
	for _, tt := range tests {
		if err := tt.call(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	if st := b.cache.Stats(); st.Entries != 0 {
		t.Fatalf("failed loads left entries: %+v", st)
	}
	// After all those failures the right data still loads.
	b.mustRun(t, "a")
}

// misses waits until the cache has counted n misses.
func misses(t *testing.T, c *Cache, n uint64) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if got := c.Stats().Misses; got != n {
			return fmt.Errorf("%d misses, want %d", got, n)
		}
		return nil
	})
}
