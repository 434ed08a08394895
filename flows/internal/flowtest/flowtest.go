// Package flowtest holds the test helpers the flows packages share: flow
// files read from disk or written inline, the test tool catalog and golden
// files rewritten by -update. Tests of the loader, the registry and the
// renderers all use them, so each lives here once.
package flowtest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/flows"
)

// Update is the -update flag: golden files are rewritten instead of
// compared.
var Update = flag.Bool("update", false, "rewrite golden files")

// Src is a flow file with the given path and text.
func Src(path, text string) flows.File { return flows.File{Path: path, Src: []byte(text)} }

// ReadFiles reads flow files from disk, naming each by its slash path.
func ReadFiles(t testing.TB, paths ...string) []flows.File {
	t.Helper()
	var files []flows.File
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, flows.File{Path: filepath.ToSlash(p), Src: src})
	}
	return files
}

// Catalog loads the tool catalog of the flows tests from path (the
// loader's testdata/catalog.json).
func Catalog(t testing.TB, path string) flows.MapCatalog {
	t.Helper()
	c, err := flows.LoadCatalogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Golden compares got with the golden file at path, or rewrites the file
// under -update.
func Golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// LuaLeaf is a Lua flow "leaf" of one task, for the Lua tests' flows to
// call.
const LuaLeaf = `flow{"leaf", nodes = {task{"a", tool = "t"}}}` + "\n"

// LuaFile is one Lua flow file, f.lua, with the given text.
func LuaFile(src string) []flows.File { return []flows.File{Src("f.lua", src)} }

// JSONRoundTrip encodes v as JSON and decodes the encoding into a new T,
// as a flow, version or module crossing a process or the store is: it
// returns the decoded value and the encoding, and fails the test if
// either step does.
func JSONRoundTrip[T any](t testing.TB, v any) (T, []byte) {
	t.Helper()
	var back T
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	return back, data
}
