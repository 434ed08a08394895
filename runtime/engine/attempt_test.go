package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// attemptTools records the attempt number of every call the engine makes
// and passes the call on to the real host.
type attemptTools struct {
	Tools
	mu   sync.Mutex
	seen map[string][]int // by node
}

func (a *attemptTools) wrap(t Tools) { a.Tools = t }

func (a *attemptTools) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	a.mu.Lock()
	a.seen[req.Node] = append(a.seen[req.Node], req.Attempt)
	a.mu.Unlock()
	return a.Tools.Call(ctx, req)
}

// Every try of one logical call carries its own attempt number: the six
// tries of retries = 5 arrive as attempts 1 to 6, not all as 1.
func TestCallAttemptCountsEveryTry(t *testing.T) {
	t.Parallel()
	rec := &attemptTools{seen: map[string][]int{}}
	b := setup(t, Config{Tools: rec}, `
flow(name = "flaky", nodes = [
    task("f", tool = "testkit.fail", args = lambda ctx: {"times": 5}, retries = 5),
])
`)
	run := b.waitTerminal(t, b.start(t, "flaky", `{}`, ""))
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("flaky ended %s %+v", run.Phase, run.Error)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.seen["f"]; !slices.Equal(got, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("the tool saw attempts %v, want 1 to 6", got)
	}
}
