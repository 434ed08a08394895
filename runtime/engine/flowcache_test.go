package engine

import (
	"testing"

	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/store"
)

const cacheSrc = `
flow(name = "one", nodes = [
    task("a", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"]}, next = "b"),
    task("b", tool = "testkit.echo", args = lambda ctx: {"twice": ctx.results["a"]["n"] * 2}),
])
flow(name = "two", nodes = [
    task("a", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"] + 1}),
])
`

// runEcho runs flow with input n and returns its output.
func (b *bundle) runEcho(t *testing.T, flow, input string) string {
	t.Helper()
	run := b.waitTerminal(t, b.start(t, flow, input, ""))
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s: phase %s error %+v", flow, run.Phase, run.Error)
	}
	return string(run.Output)
}

// Flows declared by one file share one evaluator; each version's IR is
// decoded once.
func TestFlowCacheSharesEvaluatorsOfOneSource(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, cacheSrc)
	if got := b.eng.cfg.Load().FlowCacheBytes; got != script.DefaultCacheBytes {
		t.Errorf("default bound %d, want %d", got, script.DefaultCacheBytes)
	}
	for range 2 {
		if out := b.runEcho(t, "one", `{"n": 4}`); out != `{"twice":8}` {
			t.Errorf("one: output %s", out)
		}
		if out := b.runEcho(t, "two", `{"n": 4}`); out != `{"n":5}` {
			t.Errorf("two: output %s", out)
		}
	}
	// The registration's check is kept there too (Registry.KeepChecks).
	st := b.eng.flowCache.Stats()
	if st.Entries != 4 || st.Misses != 4 || st.Evictions != 0 {
		t.Errorf("cache %+v: want two IR entries, one shared evaluator and the registration's check, each loaded once", st)
	}
}

// With a bound too small to keep anything, every use loads the version
// again from the store, and runs still complete correctly; Reload changes
// the bound.
func TestFlowCacheBoundEvictsAndReloads(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{FlowCacheBytes: 1}, cacheSrc)
	if out := b.runEcho(t, "one", `{"n": 21}`); out != `{"twice":42}` {
		t.Errorf("one: output %s", out)
	}
	st := b.eng.flowCache.Stats()
	if st.Entries != 0 || st.Bytes != 0 || st.Evictions < 4 || st.MaxBytes != 1 {
		t.Errorf("cache %+v: want nothing kept under a 1-byte bound, every load refused", st)
	}
	b.eng.Reload(Config{FlowCacheBytes: 64 << 20})
	if out := b.runEcho(t, "one", `{"n": 1}`); out != `{"twice":2}` {
		t.Errorf("one after reload: output %s", out)
	}
	if st := b.eng.flowCache.Stats(); st.MaxBytes != 64<<20 || st.Entries != 2 || st.Bytes > st.MaxBytes {
		t.Errorf("cache after Reload %+v: want the new bound and one version's IR and evaluator", st)
	}
}
