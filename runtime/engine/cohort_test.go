package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

const cohortSrc = `
flow(name = "child_echo", nodes = [
    task("c", tool = "testkit.echo", args = lambda ctx: {"got": ctx.input["v"]}),
])

flow(name = "fan_tools", nodes = [
    fanout("fan", items = lambda ctx: list(range(12)), tool = "testkit.sleep",
           args = lambda ctx, item: {"ms": 20}, width = 3, depth = 1, max_items = 12, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"fan": ctx.results["fan"]}),
])

flow(name = "fan_order", nodes = [
    fanout("fan", items = lambda ctx: ["a", "b", "c", "d", "e"], tool = "testkit.echo",
           args = lambda ctx, item: {"item": item}, width = 2, depth = 1, max_items = 5),
])

flow(name = "fan_quorum", nodes = [
    fanout("fan", items = lambda ctx: [10, 10, 10, 10, 60000, 60000, 60000, 60000], tool = "testkit.sleep",
           args = lambda ctx, item: {"ms": item}, width = 8, depth = 1, max_items = 8,
           quorum = 0.5, grace = "300ms"),
])

flow(name = "fan_protected", nodes = [
    fanout("fan", items = lambda ctx: [10, 10, 800, 800], tool = "testkit.sleep",
           args = lambda ctx, item: {"ms": item}, width = 4, depth = 1, max_items = 4,
           quorum = 0.5, grace = "50ms", protected = True),
])

flow(name = "fan_fuse", nodes = [
    fanout("fan", items = lambda ctx: [10, 10, 1500, 1500], tool = "testkit.sleep",
           args = lambda ctx, item: {"ms": item}, width = 4, depth = 1, max_items = 4,
           deadline = "400ms"),
])

flow(name = "fan_flows", nodes = [
    fanout("fan", items = lambda ctx: [1, 2, 3], flow = "child_echo",
           args = lambda ctx, item: {"v": item}, width = 2, depth = 1, max_items = 3,
           mature = lambda ctx, item, result: result["got"] >= 2, quorum = 0.6,
           reduce = lambda ctx, results: [r["got"] for r in results]),
])

flow(name = "fan_too_many", nodes = [
    fanout("fan", items = lambda ctx: list(range(ctx.input["n"])), tool = "testkit.echo",
           width = 2, depth = 1, max_items = 4, error = "refused"),
    task("refused", tool = "testkit.echo", args = lambda ctx: {"refused": True}),
])

flow(name = "fan_empty", nodes = [
    fanout("fan", items = lambda ctx: [], tool = "testkit.echo", width = 2, depth = 1, max_items = 4),
])
`

type fanResult struct {
	Results    []json.RawMessage `json:"results"`
	Late       []json.RawMessage `json:"late"`
	Sufficient bool              `json:"sufficient"`
	Cutoff     time.Time         `json:"cutoff"`
}

func (b *bundle) fanResult(t *testing.T, raw json.RawMessage) fanResult {
	t.Helper()
	var r fanResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("fan-out result %s: %v", raw, err)
	}
	return r
}

func (b *bundle) cohort(t *testing.T, id string) CohortView {
	t.Helper()
	run, err := b.eng.Get(context.Background(), "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.eng.Progress(context.Background(), run)
	if err != nil || len(p.Cohorts) != 1 {
		t.Fatalf("progress %+v %v: want one cohort", p, err)
	}
	return p.Cohorts[0]
}

// cohortIs reports whether the run's cohort exists and satisfies cond.
func (b *bundle) cohortIs(t *testing.T, id string, cond func(CohortView) bool) bool {
	t.Helper()
	run, err := b.eng.Get(context.Background(), "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.eng.Progress(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Cohorts) == 1 && cond(p.Cohorts[0])
}

func TestFanoutWidthBoundsChildrenInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, cohortSrc)
	id := b.start(t, "fan_tools", `{}`, "")
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v", run.Phase, run.Error)
	}
	var out struct{ Fan fanResult }
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Fan.Results) != 12 || !out.Fan.Sufficient || out.Fan.Cutoff.IsZero() {
		t.Fatalf("fan-out result %+v: want 12 results, sufficient, a cutoff", out.Fan)
	}
	peak := 0
	for _, r := range out.Fan.Results {
		var v struct{ Peak int }
		_ = json.Unmarshal(r, &v)
		peak = max(peak, v.Peak)
	}
	if peak > 3 || peak < 2 {
		t.Errorf("peak of sleeps in flight %d: want at most the width 3 (and more than 1)", peak)
	}
	c := b.cohort(t, id)
	if c.Published != 12 || c.Admitted != 12 || c.InFlight != 0 || !c.Marker || c.State != "closed" {
		t.Errorf("cohort %+v", c)
	}
	for _, ts := range b.eng.Stats().Types {
		if ts.Type == "testkit.sleep" && ts.Amplification != 1 {
			t.Errorf("amplification %.2f, want 1", ts.Amplification)
		}
	}
}

func TestFanoutResultsInItemOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, cohortSrc)
	run := b.waitTerminal(t, b.start(t, "fan_order", `{}`, ""))
	r := b.fanResult(t, run.Output)
	var got []string
	for _, x := range r.Results {
		var v struct{ Item string }
		_ = json.Unmarshal(x, &v)
		got = append(got, v.Item)
	}
	if strings.Join(got, "") != "abcde" {
		t.Fatalf("results in order %v, want a..e", got)
	}
}

// TestFanoutQuorumFreezesThenStopsAfterGrace: half the children mature
// quickly; the cohort freezes, lets the rest run for the grace period,
// stops them (their plugin calls see the cancel), and closes sufficient.
func TestFanoutQuorumFreezesThenStopsAfterGrace(t *testing.T) {
	t.Parallel()
	fk := clock.NewFake(time.Now())
	b := setup(t, Config{Clock: fk}, cohortSrc)
	begin := time.Now()
	id := b.start(t, "fan_quorum", `{}`, "")
	// Frozen with the quick half mature; the stragglers run on through
	// the grace period, which passes only when the clock is moved.
	b.wait(t, id, "cohort frozen", func(*store.Run) bool {
		return b.cohortIs(t, id, func(c CohortView) bool { return c.State == "frozen" && c.Mature == 4 })
	})
	if c := b.cohort(t, id); c.InFlight != 4 || c.Stopped != 0 {
		t.Fatalf("cohort %+v: the stragglers must run until the grace period ends", c)
	}
	fk.Advance(300 * time.Millisecond)
	run := b.waitTerminal(t, id)
	if took := time.Since(begin); took > 20*time.Second {
		t.Fatalf("took %s: the stragglers held the batch hostage", took)
	}
	r := b.fanResult(t, run.Output)
	if !r.Sufficient || len(r.Results) != 4 {
		t.Fatalf("result %+v: want sufficient with the 4 quick results", r)
	}
	c := b.cohort(t, run.ID)
	if c.Stopped != 4 || c.Mature != 4 || c.Published != 4 {
		t.Errorf("cohort %+v: want 4 mature, 4 stopped", c)
	}
	// The stop reached the plugin: testkit.sleep records cancelled calls.
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(b.dataDir, "plugin-state", "testkit", "cancelled.jsonl"))
		if n := strings.Count(string(data), "\n"); n == 4 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d stopped calls saw their cancel, want 4", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFanoutProtectedChildrenAreNeverKilled: the same freeze with
// protected work lets the stragglers finish and counts them.
func TestFanoutProtectedChildrenAreNeverKilled(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, cohortSrc)
	run := b.waitTerminal(t, b.start(t, "fan_protected", `{}`, ""))
	r := b.fanResult(t, run.Output)
	c := b.cohort(t, run.ID)
	if c.Stopped != 0 || len(r.Results) != 4 || !r.Sufficient {
		t.Fatalf("cohort %+v result %+v: protected children must finish and count", c, r)
	}
	if data, _ := os.ReadFile(filepath.Join(b.dataDir, "plugin-state", "testkit", "cancelled.jsonl")); len(data) != 0 {
		t.Fatalf("a protected call was cancelled: %s", data)
	}
}

// TestFanoutDeadlineFuse: the fuse closes an under-filled cohort anyway,
// leaves a trace, and results after the cutoff stay out as late.
func TestFanoutDeadlineFuse(t *testing.T) {
	t.Parallel()
	fk := clock.NewFake(time.Now())
	b := setup(t, Config{Clock: fk}, cohortSrc)
	id := b.start(t, "fan_fuse", `{}`, "")
	// The quick two are judged before the deadline, which passes only
	// when the clock is moved.
	b.wait(t, id, "quick children judged", func(*store.Run) bool {
		return b.cohortIs(t, id, func(c CohortView) bool { return c.Mature == 2 })
	})
	if c := b.cohort(t, id); c.State != "open" {
		t.Fatalf("cohort %+v: closed before its deadline", c)
	}
	fk.Advance(400 * time.Millisecond)
	run := b.waitTerminal(t, id)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("%s %+v: an insufficient close still takes next", run.Phase, run.Error)
	}
	r := b.fanResult(t, run.Output)
	if r.Sufficient || len(r.Results) != 2 {
		t.Fatalf("result %+v: want insufficient with the 2 quick results", r)
	}
	if evs := b.events(t, run.ID); count(evs, evInsufficient) != 1 {
		t.Errorf("timeline %v: an under-filled close must leave a trace", evs)
	}
	b.wait(t, run.ID, "late results recorded", func(*store.Run) bool { return b.cohort(t, run.ID).Late == 2 })
	again, _ := b.eng.Get(context.Background(), "alice", run.ID)
	if string(again.Output) != string(run.Output) {
		t.Errorf("a late result rewrote the closed batch: %s -> %s", run.Output, again.Output)
	}
}

func TestFanoutSubflowsMatureAndReduce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, cohortSrc)
	run := b.waitTerminal(t, b.start(t, "fan_flows", `{}`, ""))
	var out struct {
		Results    []int
		Sufficient bool
	}
	if err := json.Unmarshal(run.Output, &out); err != nil || !out.Sufficient || len(out.Results) != 3 || out.Results[0] != 1 || out.Results[2] != 3 {
		t.Fatalf("output %s (%v): want reduce's list [1,2,3], sufficient", run.Output, err)
	}
	c := b.cohort(t, run.ID)
	if c.Mature != 2 || c.Published != 3 {
		t.Errorf("cohort %+v: mature() must judge 2 of 3", c)
	}
	kids, _ := b.eng.List(context.Background(), "alice", store.RunListParams{ParentRunID: run.ID})
	if len(kids) != 3 {
		t.Errorf("%d child runs, want 3", len(kids))
	}
}

func TestFanoutBoundsAndEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, cohortSrc)
	run := b.waitTerminal(t, b.start(t, "fan_too_many", `{"n": 5}`, ""))
	if !strings.Contains(string(run.Output), `"refused":true`) {
		t.Fatalf("5 items over max_items 4: %s %s", run.Phase, run.Output)
	}
	run = b.waitTerminal(t, b.start(t, "fan_too_many", `{"n": 4}`, ""))
	if r := b.fanResult(t, run.Output); len(r.Results) != 4 {
		t.Fatalf("4 items: %s", run.Output)
	}
	run = b.waitTerminal(t, b.start(t, "fan_empty", `{}`, ""))
	if r := b.fanResult(t, run.Output); run.Phase != store.PhaseCompleted || len(r.Results) != 0 || !r.Sufficient {
		t.Fatalf("no items: %s %s", run.Phase, run.Output)
	}
}
