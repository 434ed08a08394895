package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// Items "" answer at once; any other item blocks kit.block on the gate of
// that name until the test opens it or the call is cancelled.
const unitCohortSrc = `
flow(name = "fan_width", nodes = [
    fanout("fan", items = lambda ctx: ["g"] * 12, tool = "kit.block",
           args = lambda ctx, item: {"gate": item}, width = 3, depth = 1, max_items = 12),
])

flow(name = "fan_quorum", nodes = [
    fanout("fan", items = lambda ctx: ["", "", "", "", "slow", "slow", "slow", "slow"], tool = "kit.block",
           args = lambda ctx, item: {"gate": item}, width = 8, depth = 1, max_items = 8,
           quorum = 0.5, grace = "300ms"),
])

flow(name = "fan_protected", nodes = [
    fanout("fan", items = lambda ctx: ["", "", "slow", "slow"], tool = "kit.block",
           args = lambda ctx, item: {"gate": item}, width = 4, depth = 1, max_items = 4,
           quorum = 0.5, grace = "50ms", protected = True),
])

flow(name = "fan_fuse", nodes = [
    fanout("fan", items = lambda ctx: ["", "", "slow", "slow"], tool = "kit.block",
           args = lambda ctx, item: {"gate": item}, width = 4, depth = 1, max_items = 4,
           deadline = "400ms"),
])
`

// The width bounds the children in flight: exactly width calls wait at
// the gate until it opens, never more.
func TestUnitFanoutWidth(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitCohortSrc)
	id := b.start(t, "fan_width", `{}`, "")
	b.kitIs(t, "a full width of calls", func(k *kit) bool { return k.blocked == 3 })
	if c := b.cohort(t, id); c.InFlight != 3 || c.Admitted != 3 {
		t.Fatalf("cohort %+v: want 3 admitted and in flight", c)
	}
	b.kit.open("g")
	run := b.waitTerminal(t, id)
	r := b.fanResult(t, run.Output)
	if run.Phase != store.PhaseCompleted || len(r.Results) != 12 || !r.Sufficient || r.Cutoff.IsZero() {
		t.Fatalf("%s %+v: want 12 results, sufficient, a cutoff", run.Phase, r)
	}
	b.kit.read(func() {
		if b.kit.peak != 3 {
			t.Errorf("peak of calls in flight %d, want the width 3", b.kit.peak)
		}
	})
	if c := b.cohort(t, id); c.Published != 12 || c.Admitted != 12 || c.InFlight != 0 || !c.Marker || c.State != "closed" {
		t.Errorf("cohort %+v", c)
	}
	for _, ts := range b.eng.Stats().Types {
		if ts.Type == "kit.block" && ts.Amplification != 1 {
			t.Errorf("amplification %.2f, want 1", ts.Amplification)
		}
	}
}

// Half the children mature at once; the cohort freezes, lets the rest run
// for the grace period, stops them when the clock passes it (their calls
// see the cancel) and closes sufficient.
func TestUnitFanoutQuorumStopsAfterGrace(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitCohortSrc)
	id := b.start(t, "fan_quorum", `{}`, "")
	b.wait(t, id, "cohort frozen", func(*store.Run) bool {
		return b.cohortIs(t, id, func(c CohortView) bool { return c.State == "frozen" && c.Mature == 4 })
	})
	b.kitIs(t, "the stragglers at their gate", func(k *kit) bool { return k.blocked == 4 })
	if c := b.cohort(t, id); c.InFlight != 4 || c.Stopped != 0 {
		t.Fatalf("cohort %+v: the stragglers must run until the grace period ends", c)
	}
	b.clock.Advance(300*time.Millisecond + b.tick)
	run := b.waitTerminal(t, id)
	r := b.fanResult(t, run.Output)
	if !r.Sufficient || len(r.Results) != 4 {
		t.Fatalf("result %+v: want sufficient with the 4 quick results", r)
	}
	if c := b.cohort(t, run.ID); c.Stopped != 4 || c.Mature != 4 || c.Published != 4 {
		t.Errorf("cohort %+v: want 4 mature, 4 stopped", c)
	}
	b.kitIs(t, "4 stopped calls cancelled", func(k *kit) bool { return k.cancelled == 4 && k.blocked == 0 })
}

// The same freeze with protected work stops nobody: the stragglers run
// past the grace period, finish and count.
func TestUnitFanoutProtectedChildrenAreNeverKilled(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitCohortSrc)
	id := b.start(t, "fan_protected", `{}`, "")
	b.wait(t, id, "cohort frozen", func(*store.Run) bool {
		return b.cohortIs(t, id, func(c CohortView) bool { return c.State == "frozen" && c.Mature == 2 })
	})
	b.kitIs(t, "the stragglers at their gate", func(k *kit) bool { return k.blocked == 2 })
	// Well past the grace period: an unprotected cohort would stop them.
	b.clock.Advance(time.Second)
	b.clock.Advance(b.tick)
	if c := b.cohort(t, id); c.Stopped != 0 || c.InFlight != 2 {
		t.Fatalf("cohort %+v: protected children were stopped", c)
	}
	b.kit.open("slow")
	run := b.waitTerminal(t, id)
	r := b.fanResult(t, run.Output)
	if c := b.cohort(t, run.ID); c.Stopped != 0 || len(r.Results) != 4 || !r.Sufficient {
		t.Fatalf("cohort %+v result %+v: protected children must finish and count", c, r)
	}
	b.kit.read(func() {
		if b.kit.cancelled != 0 {
			t.Errorf("%d protected calls were cancelled", b.kit.cancelled)
		}
	})
}

// The deadline fuse closes an under-filled cohort when the clock passes
// it, leaves a trace, and results that arrive after the cutoff stay out
// as late.
func TestUnitFanoutDeadlineFuseAndLate(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitCohortSrc)
	id := b.start(t, "fan_fuse", `{}`, "")
	b.wait(t, id, "quick children judged", func(*store.Run) bool {
		return b.cohortIs(t, id, func(c CohortView) bool { return c.Mature == 2 })
	})
	if c := b.cohort(t, id); c.State != "open" {
		t.Fatalf("cohort %+v: closed before its deadline", c)
	}
	b.clock.Advance(400*time.Millisecond + b.tick)
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
	// The stragglers answer after the cutoff.
	b.kit.open("slow")
	b.wait(t, run.ID, "late results recorded", func(*store.Run) bool { return b.cohort(t, run.ID).Late == 2 })
	again, _ := b.eng.Get(context.Background(), "alice", run.ID)
	if string(again.Output) != string(run.Output) {
		t.Errorf("a late result rewrote the closed batch: %s -> %s", run.Output, again.Output)
	}
}

// The running calls of fan-out items show their progress in the run's
// progress, each with its item.
func TestUnitFanoutItemsReportProgress(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitCohortSrc)
	id := b.start(t, "fan_width", `{}`, "")
	b.kitIs(t, "a full width of calls", func(k *kit) bool { return k.blocked == 3 })
	p := b.progress(t, id)
	if len(p.Items) != 3 {
		t.Fatalf("progress %+v: want the 3 running item calls", p)
	}
	for i, tp := range p.Items {
		if tp.Item == nil || *tp.Item != i || tp.Tool != "kit.block" || tp.Node != "fan" || tp.Done != 0 || tp.Total != 1 {
			t.Errorf("item progress %d: %+v", i, tp)
		}
	}
	b.kit.open("g")
	b.waitTerminal(t, id)
}

// A fan-out item whose lease this process let expire (a store too slow
// for the renewer, say) is rescued: its worker's call is cancelled, and
// the item runs again in a new worker and completes the cohort.
func TestUnitExpiredItemLeaseIsRescued(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setupUnit(t, Config{LeaseTimeout: lease}, unitCohortSrc)
	ctx := context.Background()
	id := b.start(t, "fan_width", `{}`, "")
	b.kitIs(t, "a full width of calls", func(k *kit) bool { return k.blocked == 3 })
	// As a renewer that fell behind would leave it: one item's lease,
	// still this engine's, past its deadline.
	var item string
	err := b.mem.Update(ctx, func(tx store.Tx) error {
		leases, err := tx.LeaseList()
		if err != nil {
			return err
		}
		for _, l := range leases {
			tk, err := tx.TaskGet(l.TaskID)
			if err != nil {
				return err
			}
			if tk.Kind == store.TaskItem {
				item = tk.ID
				l.Deadline = b.clock.Now().Add(-time.Second)
				return tx.LeasePut(l)
			}
		}
		return fmt.Errorf("no item lease among %d", len(leases))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The rescuer looks at a tenth of the lease timeout.
	b.clock.Advance(lease/10 + b.tick)
	b.kitIs(t, "the rescued item's call cancelled", func(k *kit) bool { return k.cancelled == 1 })
	testutil.Eventually(t, waitTimeout, func() error {
		if n := b.tools.Calls("kit.block"); n != 4 {
			return fmt.Errorf("%d calls of kit.block, want 4: the rescued item must be called again", n)
		}
		return nil
	})
	b.kit.open("g")
	run := b.waitTerminal(t, id)
	if r := b.fanResult(t, run.Output); run.Phase != store.PhaseCompleted || len(r.Results) != 12 || !r.Sufficient {
		t.Fatalf("%s %+v: want the 12 results, sufficient", run.Phase, r)
	}
	if evs := b.events(t, id); count(evs, evExpired) != 1 {
		t.Errorf("timeline %v: want one expired lease (item %s)", evs, item)
	}
}

// A child's end recorded after its cohort closed is late, and is stamped
// no earlier than the cutoff even when the daemon recording it read an
// earlier time (another daemon's close committed between): the batch and
// the late results never disagree with the times on them.
func TestUnitLateEndIsNeverStampedBeforeTheCutoff(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitCohortSrc)
	ctx := context.Background()
	cutoff := b.clock.Now().Add(time.Second) // a close on a daemon whose clock is ahead
	const parent = "run_parent"
	err := b.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.RunInsert(&store.Run{ID: parent, Owner: "alice", Flow: "fan_fuse", Phase: store.PhaseCompleted, CreatedAt: b.clock.Now()}); err != nil {
			return err
		}
		if err := tx.CohortPut(&store.Cohort{RunID: parent, Node: "fan", Items: 1, Next: 1, InFlight: 1, State: store.CohortClosed, Cutoff: cutoff, Marker: true}); err != nil {
			return err
		}
		return tx.CohortItemPut(&store.CohortItem{RunID: parent, Node: "fan", Index: 0, State: store.ItemAdmitted, Child: "task_x"})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = b.st.Update(ctx, func(tx store.Tx) error {
		_, err := b.eng.journal.childEndedTx(tx, parent, &store.CohortRef{Node: "fan"}, true, []byte(`{"ok":true}`), nil, b.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var it *store.CohortItem
	if err := b.st.View(ctx, func(tx store.Tx) error {
		it, err = tx.CohortItemGet(parent, "fan", 0, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if it.State != store.ItemLate || !it.At.Equal(cutoff) {
		t.Errorf("item %s at %v: want late at the cutoff %v", it.State, it.At, cutoff)
	}
	evs, err := b.eng.Events(ctx, "alice", parent, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != evItemDone || !evs[0].At.Equal(cutoff) {
		t.Errorf("events %+v: want one item_done at the cutoff", evs)
	}
}

// TestUnitQuorumRoundsUp: a cohort needs quorum × items children, rounded
// up, as docs/flows.md says with these very examples; quorum = 1 written
// as an int needs every child.
func TestUnitQuorumRoundsUp(t *testing.T) {
	t.Parallel()
	const src = `
def fan(name, n, quorum):
    flow(name = name, nodes = [
        fanout("fan", items = lambda ctx: ["hold"] * n, tool = "kit.block",
               args = lambda ctx, item: {"gate": item}, width = n, depth = 1, max_items = n, quorum = quorum),
    ])

fan("q75of5", 5, 0.75)
fan("q50of3", 3, 0.5)
fan("q10of1", 1, 0.1)
fan("q1of4", 4, 1)
`
	b := setupUnit(t, Config{}, src)
	for _, tc := range []struct {
		flow string
		need int
	}{{"q75of5", 4}, {"q50of3", 2}, {"q10of1", 1}, {"q1of4", 4}} {
		id := b.start(t, tc.flow, `{}`, "")
		var c CohortView
		b.wait(t, id, "cohort open", func(*store.Run) bool {
			return b.cohortIs(t, id, func(v CohortView) bool { c = v; return v.Items > 0 })
		})
		if c.Need != tc.need {
			t.Errorf("%s: the cohort needs %d of %d children, want %d", tc.flow, c.Need, c.Items, tc.need)
		}
	}
	b.kit.open("hold")
}
