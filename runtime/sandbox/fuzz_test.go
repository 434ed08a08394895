package sandbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/sandbox"
)

// FuzzSandbox runs arbitrary scripts through a pool of workers under
// small limits, at registration and at run time. Whatever a script does,
// the fuzzing process survives: each answer is diagnostics or results,
// and a limit is named (E_SCRIPT_LIMIT) and costs a worker, never the
// caller. The seeds are the script bombs that took the daemon down.
func FuzzSandbox(f *testing.F) {
	for _, s := range []string{
		okFlow,
		`x = json.decode("[" * 50000000)`,
		`x = [0] * (1 << 29)`,
		`x = "a" * ((1 << 30) - 1)`,
		"x = []\nfor i in range(200000):\n    x = [x]\ny = str(x)",
		"x = []\nfor i in range(300000):\n    x = [x]\ny = \"%s\" % [x]",
		"x = {}\nfor i in range(1000):\n    x = {\"k\": x}\ny = json.encode(x) + repr(x)",
		`flow(name = "b", nodes = [task("a", tool = "t.idem", args = lambda ctx: {"x": [0] * (1 << 29)})])`,
		`flow(name = "b", nodes = [task("a", tool = "t.idem", args = lambda ctx: {"x": json.decode("[" * 50000000)})])`,
		`flow(name = "b", nodes = [task("a", tool = "t.idem", args = lambda ctx: {"x": "{}".format([[[[ctx.input]]]]) * 100000000})])`,
	} {
		f.Add(s)
	}
	p := newPool(f, sandbox.Config{Workers: 1, Memory: 128 << 20, Timeout: 2 * time.Second})
	f.Fuzz(func(t *testing.T, script string) {
		files := []flows.File{file("fuzz.star", script)}
		m, ds, err := p.Analyze(context.Background(), flows.AnalyzeRequest{Files: files, Tools: catalog, Full: true})
		if err != nil {
			t.Fatalf("Analyze: %v", err)
		}
		for _, d := range ds {
			if !slices.Contains(flows.AllCodes, d.Code) {
				t.Fatalf("unknown code in %s", d)
			}
			if d.Code == flows.CodeScriptLimit && !strings.Contains(d.Message, "script limit (") {
				t.Fatalf("a limit that does not say which: %s", d)
			}
		}
		if len(ds) > 0 {
			return
		}
		for _, f := range m.Flows {
			files := m.Sources(f.Name)
			src := flows.Sources{Hash: flows.HashSources(files), Load: func(context.Context) ([]flows.File, error) { return files, nil }}
			for _, n := range f.Nodes {
				if n.Args == nil {
					continue
				}
				res, err := p.Call(context.Background(), src, flows.Context{RunID: "r", Input: map[string]any{}}, []flows.Call{{Ref: *n.Args}})
				if err == nil {
					err = res[0].Err
				}
				if errors.Is(err, flows.ErrScriptLimit) && flows.LimitOf(err) == "" {
					t.Fatalf("a limit that does not say which: %v", err)
				}
			}
		}
	})
}
