package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// TestBudgetHeldElsewhere: a lease's slice must fit the run's budget
// beside what the run spent and the slices of the leases its tasks hold
// (on any daemon); room that settling leases may give back makes the task
// wait, room that spending already took makes it over budget. The task
// being leased holds its own claim already (a claim committed alone):
// its slice is the cost, not held beside it.
func TestBudgetHeldElsewhere(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, "")
	ctx := context.Background()
	if err := b.st.Update(ctx, func(tx store.Tx) error {
		for i, slice := range []int64{4, 2} {
			id := []string{"t1", "t2"}[i]
			if err := tx.TaskPut(&store.Task{ID: id, RunID: "r", Kind: store.TaskItem, Leased: true}); err != nil {
				return err
			}
			if err := tx.LeasePut(&store.Lease{TaskID: id, RunID: "r", BudgetSlice: slice, Holder: "other"}); err != nil {
				return err
			}
		}
		// A queued task holds nothing.
		return tx.TaskPut(&store.Task{ID: "t3", RunID: "r", Kind: store.TaskItem})
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		budget, spent, cost int64
		escrow              int64
		over                bool
		held                bool
		task                string // the task being leased
	}{
		{budget: 0, spent: 100, cost: 5},                        // unlimited
		{budget: 12, spent: 3, cost: 3},                         // 3 + 6 + 3 fits
		{budget: 12, spent: 3, cost: 4, held: true},             // 3 + 6 + 4 does not, yet
		{budget: 12, spent: 9, cost: 4, over: true},             // 9 + 4 never will
		{budget: 12, spent: 12, cost: 0},                        // a free node always runs
		{budget: 12, spent: 7, cost: 5, held: true},             // 7 + 6 + 5
		{budget: 12, spent: 3, cost: 4, task: "t1"},             // 3 + 2 + 4: t1's own 4 is the cost
		{budget: 12, spent: 3, cost: 8, task: "t2", held: true}, // 3 + 4 + 8
	} {
		run := &store.Run{ID: "r", Budget: tc.budget, Spent: tc.spent}
		var over bool
		err := b.st.View(ctx, func(tx store.Tx) error {
			var err error
			over, err = budgetHeldElsewhereTx(tx, run, tc.task, tc.cost)
			return err
		})
		if over != tc.over || errors.Is(err, errBudgetHeld) != tc.held || (err != nil && !tc.held) {
			t.Errorf("budget %d spent %d cost %d task %q: over %v, err %v; want over %v held %v", tc.budget, tc.spent, tc.cost, tc.task, over, err, tc.over, tc.held)
		}
	}
}

// sharedStore is a store that says it is shared by a fleet.
type sharedStore struct{ store.Store }

func (s sharedStore) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	c.Shared = true
	return c
}

// TestForgetStarted: on a shared store the runs this engine counts as
// queued are read again, and those another daemon started or finished
// leave the count; a run whose record is not committed yet (being
// accepted) and a run still queued stay.
func TestForgetStarted(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, "")
	ctx := context.Background()
	if err := b.st.Update(ctx, func(tx store.Tx) error {
		for id, p := range map[string]store.Phase{"queued": store.PhaseQueued, "running": store.PhaseRunning, "done": store.PhaseCompleted} {
			if err := tx.RunInsert(&store.Run{ID: id, Owner: "alice", Phase: p, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e := b.eng
	e.queued.reset(map[string]string{"queued": "o", "running": "o", "done": "o", "accepting": "o"})
	rollHost{e}.ForgetStarted(ctx)
	if n := e.queued.len(); n != 2 || e.queued.remove("running") || e.queued.remove("done") || !e.queued.remove("queued") || !e.queued.remove("accepting") {
		t.Fatalf("%d left counted, want the queued run and the one being accepted", n)
	}
}

// TestSharedStartLeavesLiveLeases: an engine that starts on a shared
// store beside another engine holding a lease does not take it (the
// holder is alive), where on an unshared store the same start rescues it
// at once; the holder finishes its work.
func TestSharedStartLeavesLiveLeases(t *testing.T) {
	t.Parallel()
	src := `flow(name = "held", nodes = [task("hold", tool = "kit.block", args = lambda ctx: {"gate": ctx.input["gate"]})])`
	b := setupUnit(t, Config{}, src)
	ctx := context.Background()
	id := b.start(t, "held", `{"gate": "g"}`, "")
	b.kitIs(t, "the call held", func(k *kit) bool { return k.blocked == 1 })
	holderOf := func() string {
		var h string
		if err := b.st.View(ctx, func(tx store.Tx) error {
			ls, err := tx.LeaseList()
			if len(ls) == 1 {
				h = ls[0].Holder
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := holderOf()
	other := openEngine(t, Config{Store: sharedStore{b.mem}, Tools: b.tools, Clock: b.clock, Tick: b.tick}, "")
	if h := holderOf(); h != first || h == other.holder {
		t.Fatalf("lease held by %q after a shared start, want still %q", h, first)
	}
	for _, ev := range b.events(t, id) {
		if ev == evExpired {
			t.Fatalf("timeline %v: the live lease was rescued", b.events(t, id))
		}
	}
	b.kit.open("g")
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted || run.Attempt != 1 {
		t.Fatalf("run %s at attempt %d, want completed by its first holder", run.Phase, run.Attempt)
	}
}

// TestSpread: a dispatch pass of a fleet's engine tries every listed task
// once, in their order from a random place, and over passes starts at
// every place.
func TestSpread(t *testing.T) {
	t.Parallel()
	var tasks []*store.Task
	for i := range 5 {
		tasks = append(tasks, &store.Task{ID: fmt.Sprint(i)})
	}
	starts := map[string]bool{}
	for range 500 {
		got := spread(tasks)
		if len(got) != 5 {
			t.Fatalf("%d tasks, want 5", len(got))
		}
		k, _ := strconv.Atoi(got[0].ID)
		for i, tk := range got {
			if want := fmt.Sprint((k + i) % 5); tk.ID != want {
				t.Fatalf("order %v at %d: %s, want %s", got, i, tk.ID, want)
			}
		}
		starts[got[0].ID] = true
	}
	if len(starts) != 5 {
		t.Fatalf("passes started at %v only, want every task", starts)
	}
	for i, tk := range tasks {
		if tk.ID != fmt.Sprint(i) {
			t.Fatal("spread changed the page it was given")
		}
	}
}

// TestRollWarnings: each place a flow names a tool that a live daemon
// other than the registering one lacks, or serves from another plugin
// binary, gets one warning naming those daemons; agreeing daemons and the
// registering daemon itself none.
func TestRollWarnings(t *testing.T) {
	t.Parallel()
	f := &flows.Flow{Name: "f", Nodes: []*flows.Node{
		{ID: "a", Kind: flows.KindTask, Tool: "x.one"},
		{ID: "b", Kind: flows.KindTask, Tool: "y.two"},
		{ID: "c", Kind: flows.KindAgent, ModelTool: "llm.chat", Tools: []string{"x.one"}},
	}}
	pins := map[string]string{"x.one": "aaaa", "y.two": "bbbb", "llm.chat": "cccc"}
	same := &store.Daemon{ID: "h_same", Tools: pins}
	self := &store.Daemon{ID: "h_self"} // serves nothing: it is the registrant, never checked
	lacks := &store.Daemon{ID: "h_lacks", Host: "box", PID: 7, Tools: map[string]string{"x.one": "aaaa", "llm.chat": "cccc"}}
	other := &store.Daemon{ID: "h_other", Tools: map[string]string{"x.one": "ffff", "y.two": "bbbb", "llm.chat": "cccc"}}
	for _, tc := range []struct {
		name string
		live []*store.Daemon
		n    int      // warnings
		want []string // what some warning says, each
	}{
		{"agree", []*store.Daemon{self, same}, 0, nil},
		{"lacks", []*store.Daemon{self, same, lacks}, 1, []string{`"y.two": daemon h_lacks (box pid 7) of the fleet does not serve it`}},
		{"another binary", []*store.Daemon{other}, 2, []string{
			`task "a"`, `"x.one": daemon h_other (plugin ffff) serves it from another plugin binary than this daemon (plugin aaaa)`,
			`agent "c"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := rollWarnings("h_self", pins, tc.live, []*flows.Flow{f})
			var got []string
			for _, d := range ds {
				if d.Code != CodeFleetTools || d.Severity != flows.SeverityWarning {
					t.Fatalf("diagnostic %+v, want a %s warning", d, CodeFleetTools)
				}
				got = append(got, d.Message)
			}
			if len(got) != tc.n {
				t.Fatalf("warnings %q, want %d", got, tc.n)
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Fatalf("warnings %q, none says %q", got, w)
				}
			}
		})
	}
}

// TestSplitRoll: an entry stamped longer ago than the staleness limit is
// departed; one stamped exactly at the limit is still live.
func TestSplitRoll(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	stale := 60 * time.Second
	fresh := &store.Daemon{ID: "fresh", SeenAt: now.Add(-time.Second)}
	edge := &store.Daemon{ID: "edge", SeenAt: now.Add(-stale)}
	gone := &store.Daemon{ID: "gone", SeenAt: now.Add(-stale - time.Nanosecond)}
	live, departed := splitRoll([]*store.Daemon{fresh, edge, gone}, now, stale)
	if len(live) != 2 || live[0] != fresh || live[1] != edge || len(departed) != 1 || departed[0] != gone {
		t.Fatalf("live %v departed %v", live, departed)
	}
}

// claimingStore is a shared store with a Claimer that counts the tasks
// it claims and, once after its first claim, runs then (another daemon
// acting between a claim and the lease's Update).
type claimingStore struct {
	sharedStore
	mu      sync.Mutex
	claimed int
	then    func(tasks []*store.Task) error
}

func (s *claimingStore) TaskClaim(ctx context.Context, p store.TaskClaimParams) ([]*store.Task, error) {
	var out []*store.Task
	err := s.Update(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.TaskClaim(p)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.claimed += len(out)
	then := s.then
	s.then = nil
	s.mu.Unlock()
	if then != nil && len(out) > 0 {
		return out, then(out)
	}
	return out, err
}

// TestSharedClaimCommitsAlone: on a shared store the engine claims each
// task with the store's Claimer, on its own, and the run goes on under
// that claim's lease: one claim per lease taken.
func TestSharedClaimCommitsAlone(t *testing.T) {
	t.Parallel()
	cs := &claimingStore{}
	b := setupUnitOn(t, Config{}, `flow(name = "echo", nodes = [task("a", tool = "kit.echo", next = "b"), task("b", tool = "kit.echo")])`, func(s store.Store) store.Store {
		cs.sharedStore = sharedStore{s}
		return cs
	})
	id := b.start(t, "echo", `{}`, "")
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
		t.Fatalf("run %s, want completed", run.Phase)
	}
	leased := 0
	for _, ev := range b.events(t, id) {
		if ev == evLeased {
			leased++
		}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.claimed == 0 || cs.claimed != leased {
		t.Fatalf("%d tasks claimed alone, %d leases taken; want one claim per lease", cs.claimed, leased)
	}
}

// TestClaimGivenBack: a task whose claim committed alone but whose run
// ended before the lease's Update (another daemon finished it) is not
// worked, and its claim's lease is deleted rather than left to expire.
func TestClaimGivenBack(t *testing.T) {
	t.Parallel()
	cs := &claimingStore{}
	b := setupUnitOn(t, Config{}, `flow(name = "echo", nodes = [task("a", tool = "kit.echo")])`, func(s store.Store) store.Store {
		cs.sharedStore = sharedStore{s}
		return cs
	})
	cs.then = func(tasks []*store.Task) error {
		return cs.Update(context.Background(), func(tx store.Tx) error {
			run, err := tx.RunGet(tasks[0].RunID)
			if err != nil {
				return err
			}
			run.Phase = store.PhaseCancelled
			if err := tx.RunUpdate(run); err != nil {
				return err
			}
			return tx.TaskDelete(tasks[0].ID)
		})
	}
	id := b.start(t, "echo", `{}`, "")
	testutil.Eventually(t, 30*time.Second, func() error {
		cs.mu.Lock()
		claimed := cs.claimed
		cs.mu.Unlock()
		if claimed == 0 {
			return fmt.Errorf("nothing claimed yet")
		}
		var leases []*store.Lease
		if err := b.st.View(context.Background(), func(tx store.Tx) error {
			var err error
			leases, err = tx.LeaseList()
			return err
		}); err != nil {
			return err
		}
		if len(leases) > 0 {
			return fmt.Errorf("leases %+v left", leases)
		}
		return nil
	})
	for _, ev := range b.events(t, id) {
		if ev == evLeased {
			t.Fatalf("timeline %v: the given-back task was leased", b.events(t, id))
		}
	}
}
