package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

const cohortSrc = `
flow(name = "child_echo", nodes = [
    task("c", tool = "testkit.echo", args = lambda ctx: {"got": ctx.input["v"]}),
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
	p := b.progress(t, id)
	if len(p.Cohorts) != 1 {
		t.Fatalf("progress %+v: want one cohort", p)
	}
	return p.Cohorts[0]
}

// progress is the progress of alice's run id as it is now.
func (b *bundle) progress(t testing.TB, id string) *Progress {
	t.Helper()
	run, err := b.eng.Get(context.Background(), "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.eng.Progress(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cohortIs reports whether the run's cohort exists and satisfies cond.
func (b *bundle) cohortIs(t *testing.T, id string, cond func(CohortView) bool) bool {
	t.Helper()
	p := b.progress(t, id)
	return len(p.Cohorts) == 1 && cond(p.Cohorts[0])
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
	testutil.Eventually(t, waitTimeout, func() error {
		data, _ := os.ReadFile(filepath.Join(b.dataDir, "plugin-state", "testkit", "cancelled.jsonl"))
		if n := strings.Count(string(data), "\n"); n != 4 {
			return fmt.Errorf("%d stopped calls saw their cancel, want 4", n)
		}
		return nil
	})
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
