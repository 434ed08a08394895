package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/store"
)

// countScripts evaluates in process and counts what reaches it, by node.
type countScripts struct {
	script.Local
	mu    sync.Mutex
	calls map[string]int
}

func (s *countScripts) Call(ctx context.Context, src flows.Sources, c flows.Context, calls []flows.Call) ([]flows.CallResult, error) {
	s.mu.Lock()
	for _, call := range calls {
		s.calls[call.Ref.Node]++
	}
	s.mu.Unlock()
	return s.Local.Call(ctx, src, c, calls)
}

func (s *countScripts) count(node string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[node]
}

const projFlowSrc = `
flow(name = "projected", nodes = [
    task("a", tool = "kit.echo", args = lambda ctx: {"p": ctx.input["p"], "run": ctx.run_id}, next = "b"),
    task("b", tool = "kit.echo", args = lambda ctx: {"from_a": ctx.results["a"]["p"], "n": 2}, next = "c"),
    task("c", tool = "kit.echo", args = lambda ctx: {"len": len(ctx.input["p"])}),
])
`

// A step whose args registration proved a projection never reaches the
// sandbox, and its tool gets what the script would have given; a
// callable that does more still goes there. A projection only the script
// can answer (the key is missing) goes to it too, and the run fails with
// the script's own error, where the script says it.
func TestUnitProjectionsSkipTheSandbox(t *testing.T) {
	t.Parallel()
	scripts := &countScripts{calls: map[string]int{}}
	b := setupUnit(t, Config{Scripts: scripts}, projFlowSrc)
	id := b.start(t, "projected", `{"p": "hello"}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted || string(run.Output) != `{"len":5}` {
		t.Fatalf("run %s %s %+v", run.Phase, run.Output, run.Error)
	}
	if scripts.count("a") != 0 || scripts.count("b") != 0 || scripts.count("c") != 1 {
		t.Fatalf("evaluations that reached the sandbox: %v, want only c's", scripts.calls)
	}
	missing := b.start(t, "projected", `{"q": 1}`, "")
	run = b.waitTerminal(t, missing)
	wantFailed(t, run, "E_CALLABLE")
	if scripts.count("a") != 1 || !strings.Contains(run.Error.Message, `key "p" not in dict`) {
		t.Fatalf("a missing key: %d evaluations of a, error %+v: want the script's", scripts.count("a"), run.Error)
	}
}
