package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// callRecorder records every call the engine makes, by node, and passes
// the call on to the real host.
type callRecorder struct {
	Tools
	mu   sync.Mutex
	seen map[string][]tool.CallRequest
}

func newCallRecorder() *callRecorder { return &callRecorder{seen: map[string][]tool.CallRequest{}} }

func (r *callRecorder) wrap(t Tools) { r.Tools = t }

func (r *callRecorder) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	r.mu.Lock()
	r.seen[req.Node] = append(r.seen[req.Node], req)
	r.mu.Unlock()
	return r.Tools.Call(ctx, req)
}

// recorded is what part reads of each call of node that r recorded, in
// the order they were made.
func recorded[T any](r *callRecorder, node string, part func(tool.CallRequest) T) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, c := range r.seen[node] {
		out = append(out, part(c))
	}
	return out
}

// Every try of one logical call carries its own attempt number: the six
// tries of retries = 5 arrive as attempts 1 to 6, not all as 1.
func TestCallAttemptCountsEveryTry(t *testing.T) {
	t.Parallel()
	rec := newCallRecorder()
	b := setup(t, Config{Tools: rec}, `
flow(name = "flaky", nodes = [
    task("f", tool = "testkit.fail", args = lambda ctx: {"times": 5}, retries = 5),
])
`)
	run := b.waitTerminal(t, b.start(t, "flaky", `{}`, ""))
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("flaky ended %s %+v", run.Phase, run.Error)
	}
	if got := recorded(rec, "f", func(c tool.CallRequest) int { return c.Attempt }); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("the tool saw attempts %v, want 1 to 6", got)
	}
}
