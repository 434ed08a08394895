package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The engine's shape is part of its design (docs/design.md §1, §8.9):
// these tests fail when a change grows it back into one object.

// maxEngineMethods bounds *Engine's methods: its public API and little
// else; new work goes to the part that owns it.
const (
	maxEngineMethods = 35
	maxFuncLines     = 100
)

func TestEngineKeepsItsShape(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	var methods []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fs, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fs.Position(fd.End()).Line - fs.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it into named steps", fs.Position(fd.Pos()), fd.Name.Name, n, maxFuncLines)
			}
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Engine" {
						methods = append(methods, fd.Name.Name)
					}
				}
			}
		}
	}
	if len(methods) > maxEngineMethods {
		t.Errorf("*Engine has %d methods, more than %d: %v", len(methods), maxEngineMethods, methods)
	}
}

// TestServicesDoNotImportTheEngine: each service names what it needs from
// the engine as an interface, so the compiler keeps it to that.
func TestServicesDoNotImportTheEngine(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./internal/...").Output()
	if err != nil {
		t.Fatalf("go list ./internal/...: %v", err)
	}
	const engine = "github.com/weirhq/weir/runtime/engine"
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 7 {
		t.Fatalf("go list found %d packages under internal/, want the service and its six services:\n%s", len(lines), out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		for _, dep := range f[1:] {
			if dep == engine {
				t.Errorf("%s imports %s", f[0], engine)
			}
		}
	}
}
