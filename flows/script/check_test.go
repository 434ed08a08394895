package script_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows/registry"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

// The language's checks are tested by data: every file under
// testdata/check holds flows, and every line that causes a diagnostic says
// so in a comment:
//
//	task("a", next = "x"),  # want: E_UNKNOWN_NODE col=15 chain="a -> b" msg="substring"
//
// code and column are required, chain is compared exactly (absent: no
// chain), msg is a substring of the message. A line may hold several wants.
// A case is one .star file, or a directory whose .star files are checked
// together; a directory's registered/ files are registered first, one file
// at a time in name order, and must register cleanly. Each case also has a
// golden file with the printed diagnostics (go test -update rewrites them).

var wantRE = regexp.MustCompile(`want: ([EW]_[A-Z_]+) col=(\d+)(?: chain="([^"]*)")?(?: msg="((?:[^"\\]|\\.)*)")?`)

type want struct {
	pos   flows.Pos
	code  flows.Code
	chain []string
	msg   string
}

func parseWants(t *testing.T, files []flows.File) []want {
	t.Helper()
	var wants []want
	for _, f := range files {
		for i, line := range strings.Split(string(f.Src), "\n") {
			for _, m := range wantRE.FindAllStringSubmatch(line, -1) {
				col, _ := strconv.Atoi(m[2])
				w := want{pos: flows.Pos{File: f.Path, Line: i + 1, Col: col}, code: flows.Code(m[1])}
				if m[3] != "" {
					w.chain = strings.Split(m[3], " -> ")
				}
				if m[4] != "" {
					msg, err := strconv.Unquote(`"` + m[4] + `"`)
					if err != nil {
						t.Fatalf("%s:%d: bad msg in want: %v", f.Path, i+1, err)
					}
					w.msg = msg
				}
				wants = append(wants, w)
			}
		}
	}
	return wants
}

type checkCase struct {
	name       string
	files      []flows.File
	registered [][]flows.File // registered first, one registration each
}

func checkCases(t *testing.T) []checkCase {
	t.Helper()
	entries, err := os.ReadDir("testdata/check")
	if err != nil {
		t.Fatal(err)
	}
	var cases []checkCase
	for _, e := range entries {
		p := filepath.Join("testdata/check", e.Name())
		switch {
		case !e.IsDir() && strings.HasSuffix(e.Name(), ".star"):
			cases = append(cases, checkCase{name: strings.TrimSuffix(e.Name(), ".star"), files: flowtest.ReadFiles(t, p)})
		case e.IsDir():
			c := checkCase{name: e.Name()}
			paths, _ := filepath.Glob(filepath.Join(p, "*.star"))
			c.files = flowtest.ReadFiles(t, paths...)
			reg, _ := filepath.Glob(filepath.Join(p, "registered", "*.star"))
			slices.Sort(reg)
			for _, r := range reg {
				c.registered = append(c.registered, flowtest.ReadFiles(t, r))
			}
			cases = append(cases, c)
		}
	}
	return cases
}

func TestCheckData(t *testing.T) {
	t.Parallel()
	cat := flowtest.Catalog(t, "testdata/catalog.json")
	for _, c := range checkCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := registry.NewRegistry(flows.NewMemoryStore(), cat)
			for _, files := range c.registered {
				if _, ds, err := reg.Register(t.Context(), files); err != nil || len(ds) > 0 {
					t.Fatalf("registering %s: %v\n%s", files[0].Path, err, ds)
				}
			}
			_, ds, err := reg.Check(t.Context(), c.files)
			if err != nil {
				t.Fatal(err)
			}
			assertWants(t, ds, parseWants(t, c.files))

			golden := filepath.Join("testdata/check", c.name+".golden")
			flowtest.Golden(t, golden, []byte(ds.String()))
		})
	}
}

func assertWants(t *testing.T, ds flows.Diagnostics, wants []want) {
	t.Helper()
	matched := make([]bool, len(ds))
	for _, w := range wants {
		found := false
		for i, d := range ds {
			if matched[i] || d.Pos != w.pos || d.Code != w.code {
				continue
			}
			if !strings.Contains(d.Message, w.msg) || !slices.Equal(d.Chain, w.chain) {
				continue
			}
			matched[i], found = true, true
			break
		}
		if !found {
			t.Errorf("%s: missing %s (chain %q, msg containing %q)", w.pos, w.code, w.chain, w.msg)
		}
	}
	for i, d := range ds {
		if !matched[i] {
			t.Errorf("unexpected: %s (chain %q)", d, d.Chain)
		}
	}
}

// TestEveryCodeHasACase keeps the data-driven tests complete: a new code
// needs a case that produces it, with its position.
func TestEveryCodeHasACase(t *testing.T) {
	t.Parallel()
	seen := map[flows.Code]bool{}
	for _, c := range checkCases(t) {
		for _, w := range parseWants(t, c.files) {
			seen[w.code] = true
		}
	}
	for _, code := range flows.AllCodes {
		if !seen[code] {
			t.Errorf("no testdata/check case wants %s", code)
		}
	}
	for code := range seen {
		if !slices.Contains(flows.AllCodes, code) {
			t.Errorf("testdata wants %s, which is not in AllCodes", code)
		}
	}
}
