package script

import (
	"testing"

	"github.com/weirhq/weir/flows/internal/flowtest"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
)

// Loading compiles files on several goroutines; none may outlive the load.
func TestMain(m *testing.M) { testutil.Main(m) }

func TestManyFilesCompileInParallel(t *testing.T) {
	t.Parallel()
	files := flowtest.GenFlowSet(40, 20)
	files[17].Src = []byte("x = (\n")                   // a syntax error in the middle
	files[29].Src = []byte(`load("nowhere.star", "x")`) // and a bad load
	_, ds := Check(files, flowtest.BenchCatalog)
	if len(ds) != 2 || ds[0].Code != flows.CodeSyntax || ds[0].File != "f0017.star" || ds[1].Code != flows.CodeLoad || ds[1].File != "f0029.star" {
		t.Fatalf("got %s", ds)
	}
}

// mustLoad loads files and fails the test on any diagnostic: the prologue
// of every test that reads what a clean load made.
func mustLoad(t *testing.T, files []flows.File) *flows.Module {
	t.Helper()
	m, ds := Load(files)
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	return m
}
