package registry

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
)

// countingScripts counts the checks that reach the scripts.
type countingScripts struct {
	script.Local
	analyzed atomic.Int64
}

func (s *countingScripts) Analyze(ctx context.Context, req flows.AnalyzeRequest) (*flows.Module, flows.Diagnostics, error) {
	s.analyzed.Add(1)
	return s.Local.Analyze(ctx, req)
}

// A registration of files checked before runs no script while every
// question its check asked (tools, the catalog's names, called flows)
// answers as it did; a changed callee, a changed tool or a change of the
// files runs the check again, and a check with errors is never kept.
func TestRegistryKeepsChecksOfUnchangedFiles(t *testing.T) {
	t.Parallel()
	cat := flows.MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}, "t.other": {Name: "t.other", Idempotent: true}}
	scripts := &countingScripts{}
	reg := NewRegistryScripts(flows.NewMemoryStore(), cat, scripts)
	reg.KeepChecks(script.NewCache(0, script.Loader{}))
	register := func(f flows.File) ([]*flows.Version, flows.Diagnostics) {
		t.Helper()
		vs, ds, err := reg.Register(t.Context(), []flows.File{f})
		if err != nil {
			t.Fatal(err)
		}
		return vs, ds
	}
	// ran says whether the last registration ran the scripts.
	last := int64(0)
	ran := func() bool {
		n := scripts.analyzed.Load()
		defer func() { last = n }()
		return n != last
	}
	leaf := func(tool string) flows.File {
		return flows.File{Path: "leaf.star", Src: []byte(`flow(name = "leaf", nodes = [task("t", tool = "` + tool + `")])` + "\n")}
	}
	caller := flows.File{Path: "caller.star", Src: []byte(`flow(name = "caller", max_depth = 1, nodes = [task("t", tool = "t.idem", next = "s"), subflow("s", flow = "leaf")])` + "\n")}
	register(leaf("t.idem"))
	first, _ := register(caller)
	ran()

	again, ds := register(caller)
	if ran() || len(ds) > 0 || len(again) != 1 || again[0].Flow.Hash != first[0].Flow.Hash || reg.ChecksSkipped() != 1 {
		t.Fatalf("unchanged: ran %d checks, versions %v, skipped %d", last, again, reg.ChecksSkipped())
	}
	if v, err := reg.Latest(t.Context(), "caller"); err != nil || v.Flow.Hash != first[0].Flow.Hash {
		t.Fatalf("latest caller: %v %v", v, err)
	}

	// A new version of the callee: the call is checked against it.
	register(leaf("t.other"))
	ran()
	if register(caller); !ran() {
		t.Fatal("a changed callee did not run the check")
	}

	// The tool changes: checked again, and the check now refuses it.
	cat["t.idem"] = flows.ToolInfo{Name: "t.idem"} // no longer idempotent
	register(caller)
	if !ran() {
		t.Fatal("a changed tool did not run the check")
	}
	delete(cat, "t.idem")
	if _, ds := register(caller); !ran() || len(ds.Errors()) != 1 || ds[0].Code != flows.CodeUnknownTool {
		t.Fatalf("a removed tool: %s", ds)
	}
	// The refused check was not kept: the same files run again.
	if register(caller); !ran() {
		t.Fatal("a check with errors was kept")
	}

	// Changed files are other files.
	cat["t.idem"] = flows.ToolInfo{Name: "t.idem", Idempotent: true}
	register(caller)
	ran()
	edited := caller
	edited.Src = append([]byte("# edited\n"), caller.Src...)
	if register(edited); !ran() {
		t.Fatal("an edited file did not run the check")
	}
}

// The same files in another order are another check: the module's flows
// come in the order the files were given.
func TestRegistryKeptChecksFollowTheFilesOrder(t *testing.T) {
	t.Parallel()
	scripts := &countingScripts{}
	reg := NewRegistryScripts(flows.NewMemoryStore(), flows.MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}}, scripts)
	reg.KeepChecks(script.NewCache(0, script.Loader{}))
	a := flows.File{Path: "a.star", Src: []byte(`flow(name = "a", nodes = [task("t", tool = "t.idem")])` + "\n")}
	b := flows.File{Path: "b.star", Src: []byte(`flow(name = "b", nodes = [task("t", tool = "t.idem")])` + "\n")}
	for _, files := range [][]flows.File{{a, b}, {b, a}} {
		vs, ds, err := reg.Register(t.Context(), files)
		if err != nil || len(ds) > 0 || len(vs) != 2 || vs[0].Flow.Name != strings.TrimSuffix(files[0].Path, ".star") {
			t.Fatalf("%s then %s: %v %v %v", files[0].Path, files[1].Path, vs, ds, err)
		}
	}
	if n := scripts.analyzed.Load(); n != 2 || reg.ChecksSkipped() != 0 {
		t.Fatalf("%d checks, %d skipped, want 2 and 0", n, reg.ChecksSkipped())
	}
}

// Without KeepChecks every registration runs its check.
func TestRegistryWithoutKeptChecksRunsEveryCheck(t *testing.T) {
	t.Parallel()
	scripts := &countingScripts{}
	reg := NewRegistryScripts(flows.NewMemoryStore(), flows.MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}}, scripts)
	f := flows.File{Path: "a.star", Src: []byte(`flow(name = "a", nodes = [task("t", tool = "t.idem")])` + "\n")}
	for range 3 {
		if _, ds, err := reg.Register(t.Context(), []flows.File{f}); err != nil || len(ds) > 0 {
			t.Fatal(err, ds)
		}
	}
	if n := scripts.analyzed.Load(); n != 3 {
		t.Fatalf("%d checks for 3 registrations", n)
	}
}
