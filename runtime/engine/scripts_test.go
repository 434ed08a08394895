package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
)

const limitSrc = `
def spin(ctx):
    n = 0
    for i in range(1000000):
        for j in range(1000000):
            n += 1
    return {}

def quadratic(ctx):
    x = []
    for i in range(300000):
        x = [x]
    return {"s": "%s" % [x]}

flow(name = "spin", nodes = [
    task("a", tool = "kit.echo", args = spin, error = "handled"),
    task("handled", tool = "kit.echo", args = lambda ctx: {"handled": True}),
])

flow(name = "slow", nodes = [
    task("a", tool = "kit.echo", args = quadratic, error = "handled"),
    task("handled", tool = "kit.echo", args = lambda ctx: {"handled": True}),
])

flow(name = "fan", nodes = [
    fanout("f", tool = "kit.echo", items = lambda ctx: [1, 2, 3], args = lambda ctx, item: {"n": item * 10}, width = 3, depth = 1, max_items = 3),
])

flow(name = "echo", nodes = [task("e", tool = "kit.echo", args = lambda ctx: {"n": ctx.input["n"]})])
`

// A callable that exceeds a script limit fails its run with E_SCRIPT_LIMIT
// naming the limit, not the node's error wire: the script cannot run, and
// handling it would only run it again. The engine goes on with other runs.
func TestUnitScriptLimitFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, limitSrc)
	run := b.waitTerminal(t, b.start(t, "spin", `{}`, ""))
	if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeScriptLimit || !strings.Contains(run.Error.Message, "script limit (steps)") {
		t.Fatalf("phase %s error %+v, want failed with E_SCRIPT_LIMIT (steps)", run.Phase, run.Error)
	}
	if run := b.waitTerminal(t, b.start(t, "echo", `{"n": 1}`, "")); run.Phase != store.PhaseCompleted {
		t.Fatalf("the next run: %s %+v", run.Phase, run.Error)
	}
}

// A Lua callable past a limit fails its run the same way, naming the
// limit: the step limit, and a string cap of the Lua sandbox.
func TestUnitLuaScriptLimitFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, "")
	res, err := b.eng.Register(context.Background(), []SourceFile{{Path: "limits.lua", Src: `
flow{"spin", nodes = {
  task{"a", tool = "kit.echo", args = function(ctx) while true do end end, error = "handled"},
  task{"handled", tool = "kit.echo", args = function(ctx) return {handled = true} end},
}}
flow{"big", nodes = {
  task{"a", tool = "kit.echo", args = function(ctx) return {s = string.rep("ab", 1048576)} end, error = "handled"},
  task{"handled", tool = "kit.echo", args = function(ctx) return {handled = true} end},
}}
`}})
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("registering: %v %s", err, res.Diagnostics)
	}
	for flow, limit := range map[string]string{"spin": "script limit (steps)", "big": "script limit (size)"} {
		run := b.waitTerminal(t, b.start(t, flow, `{}`, ""))
		if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeScriptLimit || !strings.Contains(run.Error.Message, limit) {
			t.Errorf("%s: phase %s error %+v, want failed with E_SCRIPT_LIMIT (%s)", flow, run.Phase, run.Error, limit)
		}
	}
}

// With a sandbox, a callable past its deadline costs its worker and fails
// its run; the pool's next worker serves the next run, and a fan-out's
// args for all its children take one round trip. (The workers are this
// test binary; the memory cap and registration in a worker are tested
// against the weir binary, in runtime/sandbox and cmd/weir.)
func TestUnitSandboxedCallables(t *testing.T) {
	t.Parallel()
	pool, err := sandbox.New(sandbox.Config{Workers: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	// Registration runs in process: under -race on a loaded machine it
	// could take longer than the short deadline the time bomb needs.
	b := setupUnit(t, Config{Scripts: callsIn{pool}}, limitSrc)

	run := b.waitTerminal(t, b.start(t, "slow", `{}`, ""))
	if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != CodeScriptLimit || !strings.Contains(run.Error.Message, "script limit (time)") {
		t.Fatalf("phase %s error %+v, want failed with E_SCRIPT_LIMIT (time)", run.Phase, run.Error)
	}
	if k := pool.Stats().Killed[flows.LimitTime]; k != 1 {
		t.Errorf("workers killed for time: %d", k)
	}

	before := pool.Stats().Requests
	run = b.waitTerminal(t, b.start(t, "fan", `{}`, ""))
	if run.Phase != store.PhaseCompleted || !strings.Contains(string(run.Output), `"n":30`) {
		t.Fatalf("fan: %s %+v %s", run.Phase, run.Error, run.Output)
	}
	// items, then the three children's args together.
	if n := pool.Stats().Requests - before; n != 2 {
		t.Errorf("the fan-out took %d round trips, want 2", n)
	}
}

// callsIn evaluates callables in a sandbox pool and registers in process.
type callsIn struct{ *sandbox.Pool }

func (callsIn) Analyze(ctx context.Context, req flows.AnalyzeRequest) (*flows.Module, flows.Diagnostics, error) {
	return script.Local{}.Analyze(ctx, req)
}
