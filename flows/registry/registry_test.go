package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
	"github.com/weirhq/weir/flows/script"
)

type registryBundle struct {
	reg   *Registry
	store *flows.MemoryStore
}

func registrySetup(t *testing.T) *registryBundle {
	t.Helper()
	store := flows.NewMemoryStore()
	return &registryBundle{reg: NewRegistry(store, flowtest.Catalog(t, "../script/testdata/catalog.json")), store: store}
}

func mustRegister(t *testing.T, reg *Registry, files ...flows.File) []*flows.Version {
	t.Helper()
	vs, ds, err := reg.Register(t.Context(), files)
	if err != nil || len(ds) > 0 {
		t.Fatalf("register: %v\n%s", err, ds)
	}
	return vs
}

// The research example registers as written, together with summarize,
// against a catalog where notes.plan and web.search are idempotent and
// mail.send is not.
func TestResearchExampleRegisters(t *testing.T) {
	t.Parallel()
	cat, err := flows.LoadCatalogFile("../../examples/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, idem := range map[string]bool{"notes.plan": true, "web.search": true, "mail.send": false} {
		if info, ok := cat.LookupTool(name); !ok || info.Idempotent != idem {
			t.Fatalf("examples/catalog.json: %s = %+v, %v; want idempotent %v", name, info, ok, idem)
		}
	}
	reg := NewRegistry(flows.NewMemoryStore(), cat)
	vs := mustRegister(t, reg, flowtest.ReadFiles(t, "../../examples/research.star", "../../examples/summarize.star")...)
	if len(vs) != 2 || vs[0].Flow.Name != "research" || vs[1].Flow.Name != "summarize" {
		t.Fatalf("versions %v", vs)
	}
	got, err := reg.Latest(t.Context(), "research")
	if err != nil || got.Flow.Hash != vs[0].Flow.Hash {
		t.Fatalf("latest research = %v, %v", got, err)
	}
	if len(got.Sources) != 1 || got.Sources[0].Path != "../../examples/research.star" {
		t.Errorf("research's sources: %v", got.Sources)
	}

	// Registered on its own later, research resolves summarize in the
	// registry.
	reg2 := NewRegistry(flows.NewMemoryStore(), cat)
	mustRegister(t, reg2, flowtest.ReadFiles(t, "../../examples/summarize.star")...)
	mustRegister(t, reg2, flowtest.ReadFiles(t, "../../examples/research.star")...)

	// Without summarize anywhere, research is refused.
	_, ds, err := NewRegistry(flows.NewMemoryStore(), cat).Register(t.Context(), flowtest.ReadFiles(t, "../../examples/research.star"))
	if err != nil || len(ds) != 1 || ds[0].Code != flows.CodeUnknownFlow {
		t.Errorf("research alone: %v %s", err, ds)
	}
}

func TestRegistryKeepsEveryVersion(t *testing.T) {
	t.Parallel()
	b := registrySetup(t)
	v1 := mustRegister(t, b.reg, flowtest.Src("a.star", `flow(name = "a", nodes = [task("x", tool = "t.idem")])`))[0]
	v2 := mustRegister(t, b.reg, flowtest.Src("a.star", `flow(name = "a", doc = "two", nodes = [task("x", tool = "t.idem")])`))[0]
	if v1.Flow.Hash == v2.Flow.Hash {
		t.Fatal("two sources, one hash")
	}
	if got := b.store.VersionList("a"); len(got) != 2 || got[0] != v1.Flow.Hash || got[1] != v2.Flow.Hash {
		t.Errorf("versions %v", got)
	}
	if latest, _ := b.reg.Latest(t.Context(), "a"); latest.Flow.Hash != v2.Flow.Hash {
		t.Error("latest is not the last registered")
	}
	// A run pinned to v1 still finds it.
	if old, err := b.reg.Get(t.Context(), v1.Flow.Hash); err != nil || old.Flow.Doc != "" {
		t.Errorf("get v1: %v %v", old, err)
	}
	// Registering v1's source again stores nothing new and makes it latest.
	again := mustRegister(t, b.reg, flowtest.Src("a.star", `flow(name = "a", nodes = [task("x", tool = "t.idem")])`))[0]
	if again.Flow.Hash != v1.Flow.Hash || len(b.store.VersionList("a")) != 2 {
		t.Errorf("re-registering: hash %s, %d versions", again.Flow.Hash, len(b.store.VersionList("a")))
	}
	if latest, _ := b.reg.Latest(t.Context(), "a"); latest.Flow.Hash != v1.Flow.Hash {
		t.Error("re-registered version is not latest")
	}
	if _, err := b.reg.Get(t.Context(), "nope"); !errors.Is(err, flows.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	if _, err := b.reg.Latest(t.Context(), "nope"); !errors.Is(err, flows.ErrNotFound) {
		t.Errorf("latest unknown: %v", err)
	}
}

func TestRefusedRegistrationStoresNothing(t *testing.T) {
	t.Parallel()
	b := registrySetup(t)
	_, ds, err := b.reg.Register(t.Context(), []flows.File{
		flowtest.Src("ok.star", `flow(name = "fine", nodes = [task("x", tool = "t.idem")])`),
		flowtest.Src("bad.star", `flow(name = "broken", nodes = [task("x", tool = "t.idem", next = "y")])`),
	})
	if err != nil || !ds.Has(flows.CodeUnknownNode) {
		t.Fatalf("got %v %s", err, ds)
	}
	if _, err := b.reg.Latest(t.Context(), "fine"); !errors.Is(err, flows.ErrNotFound) {
		t.Error("a flow of a refused registration was stored")
	}
}

// TestWarningsRegister: research.star's old mistake (a fan-out's whole
// result passed where its items' results were meant) is a warning: the
// flow is stored and the warning answered; constant args a tool's schema
// refuses are an error: nothing is stored.
func TestWarningsRegister(t *testing.T) {
	t.Parallel()
	b := registrySetup(t)
	vs, ds, err := b.reg.Register(t.Context(), []flows.File{flowtest.Src("research.star", `flow(name = "research", nodes = [
    fanout("search", tool = "web.search", items = ["a"], width = 1, depth = 1, max_items = 1, next = "write"),
    task("write", tool = "t.typed", args = lambda ctx: {"hits": ctx.results["search"]}),
])`)})
	if err != nil || len(vs) != 1 || len(ds) != 1 || ds[0].Code != flows.CodeFanoutResult || ds[0].Severity != flows.SeverityWarning || len(ds.Errors()) != 0 {
		t.Fatalf("register: %d versions, %v\n%s", len(vs), err, ds)
	}
	if _, err := b.reg.Latest(t.Context(), "research"); err != nil {
		t.Errorf("a flow with warnings only was not stored: %v", err)
	}
	_, ds, err = b.reg.Register(t.Context(), []flows.File{flowtest.Src("typed.star",
		`flow(name = "typed", nodes = [task("write", tool = "t.typed", args = {"hits": "all"})])`)})
	if err != nil || !ds.Has(flows.CodeToolInput) || len(ds.Errors()) != 1 {
		t.Fatalf("constant args the schema refuses: %v\n%s", err, ds)
	}
	if _, err := b.reg.Latest(t.Context(), "typed"); !errors.Is(err, flows.ErrNotFound) {
		t.Error("a flow whose constant args its tool refuses was stored")
	}
}

func TestRegistryResolvesAgainstLatestVersion(t *testing.T) {
	t.Parallel()
	b := registrySetup(t)
	mustRegister(t, b.reg, flowtest.Src("leaf.star", `flow(name = "leaf", nodes = [task("x", tool = "t.idem")])`))
	mustRegister(t, b.reg, flowtest.Src("mid.star", `flow(name = "mid", nodes = [subflow("x", flow = "leaf")])`))
	// top allows depth 2: top -> mid -> leaf fits.
	top := flowtest.Src("top.star", `flow(name = "top", max_depth = 2, nodes = [subflow("x", flow = "mid")])`)
	if _, ds, _ := b.reg.Check(t.Context(), []flows.File{top}); len(ds) > 0 {
		t.Fatalf("top: %s", ds)
	}
	// A newer leaf that calls a subflow makes the chain 3 deep.
	mustRegister(t, b.reg, flowtest.Src("deeper.star", `flow(name = "deeper", nodes = [task("x", tool = "t.idem")])`))
	mustRegister(t, b.reg, flowtest.Src("leaf.star", `flow(name = "leaf", nodes = [subflow("x", flow = "deeper")])`))
	_, ds, _ := b.reg.Check(t.Context(), []flows.File{top})
	if len(ds) != 1 || ds[0].Code != flows.CodeDepth || flows.FormatChain(ds[0].Chain) != "top -> mid -> leaf -> deeper" {
		t.Errorf("got %s", ds)
	}
	// The files checked together win over the registered version.
	_, ds, _ = b.reg.Check(t.Context(), []flows.File{top, flowtest.Src("leaf2.star", `flow(name = "leaf", nodes = [task("x", tool = "t.idem")])`)})
	if len(ds) > 0 {
		t.Errorf("with a flat leaf checked together: %s", ds)
	}
}

// Two registrations that would each be fine alone but together close a
// cycle: exactly one of them may pass.
func TestConcurrentRegistrationsCannotCloseACycle(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		b := registrySetup(t)
		mustRegister(t, b.reg,
			flowtest.Src("a.star", `flow(name = "a", nodes = [task("x", tool = "t.idem")])`),
			flowtest.Src("b.star", `flow(name = "b", nodes = [task("x", tool = "t.idem")])`))
		var wg sync.WaitGroup
		results := make([]flows.Diagnostics, 2)
		for i, f := range []flows.File{
			flowtest.Src("a2.star", `flow(name = "a", nodes = [subflow("x", flow = "b")])`),
			flowtest.Src("b2.star", `flow(name = "b", nodes = [subflow("x", flow = "a")])`),
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ds, err := b.reg.Register(t.Context(), []flows.File{f})
				if err != nil {
					t.Error(err)
				}
				results[i] = ds
			}()
		}
		wg.Wait()
		refused := 0
		for _, ds := range results {
			if ds.Has(flows.CodeCycle) {
				refused++
			}
		}
		if refused != 1 {
			t.Fatalf("round %d: %d registrations refused, want exactly 1: %v", round, refused, results)
		}
	}
}

type failingStore struct{ *flows.MemoryStore }

func (failingStore) VersionLatest(context.Context, string) (*flows.Version, error) {
	return nil, errors.New("disk on fire")
}

func TestStoreErrorsAreNotDiagnostics(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(failingStore{flows.NewMemoryStore()}, flowtest.Catalog(t, "../script/testdata/catalog.json"))
	_, ds, err := reg.Register(t.Context(), []flows.File{flowtest.Src("a.star", `flow(name = "a", nodes = [subflow("x", flow = "b")])`)})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || len(ds) > 0 {
		t.Errorf("got %v, %s", err, ds)
	}
}

func TestMemoryStoreRefusesVersionsWithoutHash(t *testing.T) {
	t.Parallel()
	s := flows.NewMemoryStore()
	for _, v := range []*flows.Version{nil, {}, {Flow: &flows.Flow{Name: "x"}}} {
		if err := s.VersionPut(t.Context(), v); err == nil {
			t.Errorf("put %v: no error", v)
		}
	}
}

func ExampleRegistry_Register() {
	reg := NewRegistry(flows.NewMemoryStore(), flows.MapCatalog{
		"web.search": {Name: "web.search", Idempotent: true},
	})
	_, ds, err := reg.Register(context.Background(), []flows.File{{Path: "search.star", Src: []byte(`
flow(name = "search", nodes = [
    task("find", tool = "web.search", args = lambda ctx: {"q": ctx.input["q"]}, retries = 2, next = "again"),
    subflow("again", flow = "search"),
])
`)}})
	fmt.Println(err)
	fmt.Print(ds)
	// Output:
	// <nil>
	// search.star:4:22: E_CYCLE: subflow cycle search -> search
}

// examples/mistakes/newsletter.star shows newcomers a refusal; it must
// keep showing exactly its three mistakes.
func TestMistakesExampleIsRefused(t *testing.T) {
	t.Parallel()
	cat, err := flows.LoadCatalogFile("../../examples/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	_, ds := script.Check(flowtest.ReadFiles(t, "../../examples/mistakes/newsletter.star", "../../examples/summarize.star"), cat)
	var codes []string
	for _, d := range ds {
		codes = append(codes, string(d.Code))
	}
	if got := strings.Join(codes, " "); got != "E_UNBOUNDED_CYCLE E_UNKNOWN_FLOW E_AT_MOST_ONCE" {
		t.Errorf("got %s\n%s", got, ds)
	}
}

// examples/mistakes/newsletter.lua makes the same three mistakes in Lua:
// the same codes, each at the line of its mistake, as file:line.
func TestMistakesLuaExampleIsRefused(t *testing.T) {
	t.Parallel()
	cat, err := flows.LoadCatalogFile("../../examples/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	_, ds := script.Check(flowtest.ReadFiles(t, "../../examples/mistakes/newsletter.lua", "../../examples/summarize.lua"), cat)
	var got []string
	for _, d := range ds {
		line, _, _ := strings.Cut(d.String(), ": ")
		got = append(got, line+" "+string(d.Code))
	}
	want := "../../examples/mistakes/newsletter.lua:7 E_UNBOUNDED_CYCLE ../../examples/mistakes/newsletter.lua:7 E_UNKNOWN_FLOW ../../examples/mistakes/newsletter.lua:15 E_AT_MOST_ONCE"
	if strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s\n%s", strings.Join(got, " "), want, ds)
	}
}

type ctxKey struct{}

// ctxCheckingStore fails any operation whose ctx is not the caller's.
type ctxCheckingStore struct {
	*flows.MemoryStore
	calls atomic.Int32
}

func (s *ctxCheckingStore) check(ctx context.Context) error {
	s.calls.Add(1)
	if ctx.Value(ctxKey{}) != "caller" {
		return errors.New("the store did not get the caller's ctx")
	}
	return nil
}

func (s *ctxCheckingStore) VersionPut(ctx context.Context, v *flows.Version) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.MemoryStore.VersionPut(ctx, v)
}

func (s *ctxCheckingStore) VersionGet(ctx context.Context, hash string) (*flows.Version, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.MemoryStore.VersionGet(ctx, hash)
}

func (s *ctxCheckingStore) VersionLatest(ctx context.Context, name string) (*flows.Version, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.MemoryStore.VersionLatest(ctx, name)
}

// Every store operation of the registry, the callee lookups of the checks
// included, runs under the caller's ctx.
func TestRegistryPassesTheCallersContextToTheStore(t *testing.T) {
	t.Parallel()
	s := &ctxCheckingStore{MemoryStore: flows.NewMemoryStore()}
	reg := NewRegistry(s, flowtest.Catalog(t, "../script/testdata/catalog.json"))
	ctx := context.WithValue(t.Context(), ctxKey{}, "caller")
	leaf := flowtest.Src("leaf.star", `flow(name = "leaf", nodes = [task("x", tool = "t.idem")])`)
	top := flowtest.Src("top.star", `flow(name = "top", nodes = [subflow("x", flow = "leaf")])`)
	for _, files := range [][]flows.File{{leaf}, {top}} {
		if _, ds, err := reg.Register(ctx, files); err != nil || len(ds) > 0 {
			t.Fatalf("%v %s", err, ds)
		}
	}
	if _, ds, err := reg.Check(ctx, []flows.File{top}); err != nil || len(ds) > 0 {
		t.Fatalf("%v %s", err, ds)
	}
	v, err := reg.Latest(ctx, "top")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get(ctx, v.Flow.Hash); err != nil {
		t.Fatal(err)
	}
	// Put twice, lookup of leaf twice (register top, check top), Latest, Get.
	if n := s.calls.Load(); n < 6 {
		t.Errorf("%d store calls, want at least 6", n)
	}
	if _, err := reg.Latest(t.Context(), "top"); err == nil {
		t.Error("a ctx without the value reached the store unchecked")
	}
}

// gatedScripts runs scripts in this process, holding any registration of
// a file named slow.star until its gate opens.
type gatedScripts struct {
	script.Local
	gate chan struct{}
}

func (g gatedScripts) Analyze(ctx context.Context, req flows.AnalyzeRequest) (*flows.Module, flows.Diagnostics, error) {
	for _, f := range req.Files {
		if f.Path == "slow.star" {
			<-g.gate
		}
	}
	return g.Local.Analyze(ctx, req)
}

// A registration whose scripts are still running (up to the sandbox's
// deadline) holds up no one else's: scripts run outside the lock.
func TestSlowScriptsDoNotHoldTheRegistrationLock(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	reg := NewRegistryScripts(flows.NewMemoryStore(), flowtest.Catalog(t, "../script/testdata/catalog.json"), gatedScripts{gate: gate})
	slow := make(chan flows.Diagnostics, 1)
	go func() {
		_, ds, err := reg.Register(t.Context(), []flows.File{flowtest.Src("slow.star", `flow(name = "slow", nodes = [subflow("x", flow = "other")])`)})
		if err != nil {
			t.Error(err)
		}
		slow <- ds
	}()
	// The slow registration is inside its scripts; this one completes.
	if _, ds, err := reg.Register(t.Context(), []flows.File{flowtest.Src("other.star", `flow(name = "other", nodes = [task("x", tool = "t.idem")])`)}); err != nil || len(ds) > 0 {
		t.Fatalf("other: %v %s", err, ds)
	}
	select {
	case ds := <-slow:
		t.Fatalf("the slow registration ended before its scripts did: %s", ds)
	default:
	}
	close(gate)
	if ds := <-slow; len(ds) > 0 {
		t.Fatalf("slow: %s", ds)
	}
}
