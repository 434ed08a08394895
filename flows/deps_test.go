package flows

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The IR is read by much more than the loader: the engine's graph walk,
// the API, the console, the renderers. Those readers must not compile an
// interpreter, so neither the IR nor the renderers may depend on one;
// flows/script is where the interpreters come in.
func TestReadersCompileNoInterpreter(t *testing.T) {
	t.Parallel()
	interpreters := []string{"go.starlark.net", "github.com/yuin/gopher-lua"}
	for _, pkg := range []string{"github.com/weirhq/weir/flows", "github.com/weirhq/weir/flows/render"} {
		for _, dep := range depsOf(t, pkg) {
			for _, in := range interpreters {
				if dep == in || strings.HasPrefix(dep, in+"/") {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

// The flow languages' shared API (flows/script/front) imports no Lua: a
// front end of another language imports it without compiling Lua's
// interpreter, and it cannot import the core or a front end, which import
// it, without a cycle the compiler refuses.
func TestFrontAPICompilesNoLua(t *testing.T) {
	t.Parallel()
	const pkg = "github.com/weirhq/weir/flows/script/front"
	for _, dep := range depsOf(t, pkg) {
		if strings.HasPrefix(dep, "github.com/yuin/gopher-lua") {
			t.Errorf("%s depends on %s", pkg, dep)
		}
	}
}

// depsOf is what pkg depends on, itself included, as go list says.
func depsOf(t *testing.T, pkg string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, pkg) {
		t.Fatalf("go list -deps %s does not list the package itself:\n%s", pkg, out)
	}
	return deps
}
