package schedules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/tick"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// engine is the service's engine over a real memstore: the lease, the due
// listing and the save are the store's (Stored); Fire dedups on the
// request id as a start does, so firing a tick twice starts one run.
type engine struct {
	Stored
	mu       sync.Mutex
	runs     map[string]string // request id → run id
	started  []string          // request ids, in the order runs were started
	running  map[string]bool
	refuse   error
	saveFail int // the next saves that fail (a crash before the save)
}

func newEngine(st store.Store, clk clock.Clock, holder string) *engine {
	return &engine{Stored: Stored{Store: st, HolderName: holder, Clock: clk}, runs: map[string]string{}, running: map[string]bool{}}
}

func (e *engine) Running(_ context.Context, _, runID string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[runID], nil
}

func (e *engine) Fire(_ context.Context, s *store.Schedule, _ time.Time, rid string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refuse != nil {
		return "", e.refuse
	}
	if id, ok := e.runs[rid]; ok {
		return id, nil
	}
	id := fmt.Sprintf("run-%d", len(e.runs)+1)
	e.runs[rid] = id
	e.started = append(e.started, rid)
	e.running[id] = true
	return id, nil
}

func (e *engine) Save(ctx context.Context, next *store.Schedule, fence uint64) (bool, error) {
	if e.saveFail > 0 {
		e.saveFail--
		return false, errors.New("killed before the save")
	}
	return e.Stored.Save(ctx, next, fence)
}

func (e *engine) Interval() time.Duration { return time.Second }
func (e *engine) Grace() time.Duration    { return 10 * time.Second }
func (e *engine) Error(string, ...any)    {}

func put(t *testing.T, st store.Store, s *store.Schedule) {
	t.Helper()
	if err := st.Update(context.Background(), func(tx store.Tx) error { return tx.SchedulePut(s) }); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, st store.Store, owner, name string) *store.Schedule {
	t.Helper()
	var s *store.Schedule
	if err := st.View(context.Background(), func(tx store.Tx) error {
		var err error
		s, err = tx.ScheduleGet(owner, name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func setup(t *testing.T, sched *store.Schedule) (*Service, *engine, *clock.Fake, store.Store) {
	t.Helper()
	st := memstore.New()
	clk := clock.NewFake(t0)
	eng := newEngine(st, clk, "daemon-a")
	put(t, st, sched)
	return New(eng, clk), eng, clk, st
}

func minutely() *store.Schedule {
	return &store.Schedule{Owner: "alice", Name: "digest", Flow: "digest", Every: time.Minute, CatchUp: "none", Overlap: OverlapAllow, Next: t0}
}

func TestEachTickFiresOnce(t *testing.T) {
	t.Parallel()
	svc, eng, clk, st := setup(t, minutely())
	ctx := context.Background()
	if r := svc.RunOnce(ctx); !r.Held || len(r.Fired) != 1 {
		t.Fatalf("first pass: %+v", r)
	}
	if r := svc.RunOnce(ctx); len(r.Fired) != 0 || r.Due != 0 {
		t.Fatalf("the same instant again fired %+v", r)
	}
	clk.Advance(time.Minute)
	svc.RunOnce(ctx)
	want := []string{"schedule:digest:2026-12-01T09:00:00Z", "schedule:digest:2026-12-01T09:01:00Z"}
	if strings.Join(eng.started, " ") != strings.Join(want, " ") {
		t.Fatalf("started %v, want %v", eng.started, want)
	}
	if s := get(t, st, "alice", "digest"); !s.Next.Equal(t0.Add(2*time.Minute)) || len(s.Firings) != 2 || s.Revision != 2 {
		t.Fatalf("stored %+v", s)
	}
}

// TestKilledBeforeTheSaveFiresNothingTwice: a pass that fired and died
// before it stored the next tick fires the same tick again, which starts
// no second run.
func TestKilledBeforeTheSaveFiresNothingTwice(t *testing.T) {
	t.Parallel()
	svc, eng, _, st := setup(t, minutely())
	eng.saveFail = 1
	ctx := context.Background()
	if r := svc.RunOnce(ctx); r.Failed != 1 || len(r.Fired) != 1 {
		t.Fatalf("the pass that dies: %+v", r)
	}
	if s := get(t, st, "alice", "digest"); !s.Next.Equal(t0) {
		t.Fatalf("next moved without a save: %v", s.Next)
	}
	r := svc.RunOnce(ctx)
	if len(r.Fired) != 1 || len(eng.started) != 1 || r.Fired[0].RunID != "run-1" {
		t.Fatalf("after the restart: %+v, started %v", r, eng.started)
	}
}

// TestOneHolderAcrossDaemons: two daemons' services on one store: the
// one holding the lease fires, the other does nothing until the lease
// expires, then takes over with a new fence.
func TestOneHolderAcrossDaemons(t *testing.T) {
	t.Parallel()
	sc := minutely()
	sc.Every = time.Second
	svc, eng, clk, st := setup(t, sc)
	other := newEngine(st, clk, "daemon-b")
	other.runs = eng.runs // one store's dedup: one set of runs
	svcB := New(other, clk)
	ctx := context.Background()
	if r := svc.RunOnce(ctx); !r.Held || len(r.Fired) != 1 {
		t.Fatalf("a: %+v", r)
	}
	clk.Advance(time.Second)
	if r := svcB.RunOnce(ctx); r.Held || len(r.Fired) != 0 {
		t.Fatalf("b fired while a held the lease: %+v", r)
	}
	// a stops renewing; past the lease, b takes over, and the ticks of
	// the handover (within grace) are on time: each fires.
	clk.Advance(svc.leaseTTL())
	if r := svcB.RunOnce(ctx); !r.Held || len(r.Fired) != int(svc.leaseTTL()/time.Second)+1 {
		t.Fatalf("b after a's lease: %+v", r)
	}
	// a's save under its old fence is refused.
	s := get(t, st, "alice", "digest")
	if saved, err := eng.Stored.Save(ctx, s, 1); saved || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's save after losing the lease: %v %v, want ErrFenced", saved, err)
	}
}

func TestOverlapPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		overlap   string
		fired     int
		next      time.Time
		skippedBy string
	}{
		{OverlapSkip, 0, t0.Add(2 * time.Minute), SkippedOverlap},
		{OverlapQueue, 0, t0.Add(time.Minute), ""},
		{OverlapAllow, 1, t0.Add(2 * time.Minute), ""},
	} {
		sc := minutely()
		sc.Overlap = c.overlap
		svc, eng, clk, st := setup(t, sc)
		ctx := context.Background()
		svc.RunOnce(ctx) // fires 09:00; its run goes on running
		clk.Advance(time.Minute)
		r := svc.RunOnce(ctx)
		s := get(t, st, "alice", "digest")
		if len(r.Fired) != c.fired || !s.Next.Equal(c.next) {
			t.Errorf("%s: fired %d next %v, want %d and %v", c.overlap, len(r.Fired), s.Next, c.fired, c.next)
		}
		if c.skippedBy != "" && !strings.HasPrefix(s.Firings[len(s.Firings)-1].Skipped, c.skippedBy) {
			t.Errorf("%s: last firing %+v, want skipped for %s", c.overlap, s.Firings[len(s.Firings)-1], c.skippedBy)
		}
		if c.overlap == OverlapQueue {
			// The run ends: the queued tick fires at the next pass.
			eng.mu.Lock()
			eng.running["run-1"] = false
			eng.mu.Unlock()
			if r := svc.RunOnce(ctx); len(r.Fired) != 1 || !r.Fired[0].Tick.Equal(t0.Add(time.Minute)) {
				t.Errorf("queue: after the run ended %+v", r)
			}
		}
	}
}

// TestRefusedTickIsTriedAgain: a tick admission refuses stays the next
// one, and fires once admission takes it.
func TestRefusedTickIsTriedAgain(t *testing.T) {
	t.Parallel()
	svc, eng, clk, st := setup(t, minutely())
	eng.refuse = errors.New("E_OWNER_QUOTA")
	ctx := context.Background()
	if r := svc.RunOnce(ctx); r.Refused != 1 || len(r.Fired) != 0 {
		t.Fatalf("refused pass: %+v", r)
	}
	if s := get(t, st, "alice", "digest"); !s.Next.Equal(t0) {
		t.Fatalf("next moved past a refused tick: %v", s.Next)
	}
	eng.refuse = nil
	clk.Advance(5 * time.Second)
	if r := svc.RunOnce(ctx); len(r.Fired) != 1 || !r.Fired[0].Tick.Equal(t0) {
		t.Fatalf("admitted later: %+v", r)
	}
}

// TestRegisteredAgainMeanwhileKeepsTheOwnersWrite: a schedule written
// while a pass fired keeps what its owner wrote.
func TestRegisteredAgainMeanwhileKeepsTheOwnersWrite(t *testing.T) {
	t.Parallel()
	_, eng, _, st := setup(t, minutely())
	ctx := context.Background()
	fence, _, _ := eng.TakeLease(ctx, time.Minute)
	read := get(t, st, "alice", "digest")
	replaced := *read
	replaced.Flow, replaced.Revision = "digest2", read.Revision+1
	put(t, st, &replaced)
	next := *read
	next.Next = t0.Add(time.Minute)
	if saved, err := eng.Save(ctx, &next, fence); saved || err != nil {
		t.Fatalf("save over a newer revision: %v %v", saved, err)
	}
	if s := get(t, st, "alice", "digest"); s.Flow != "digest2" || !s.Next.Equal(t0) {
		t.Fatalf("the owner's write was lost: %+v", s)
	}
}

func TestPlanSkipsMissedTicksByPolicy(t *testing.T) {
	t.Parallel()
	spec, err := tick.Parse("", time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	sc := minutely()
	sc.CatchUp = "latest"
	d := Plan(sc, spec, t0.Add(time.Hour+30*time.Second), 10*time.Second, false)
	if len(d.Fire) != 1 || !d.Fire[0].Equal(t0.Add(time.Hour)) || d.Skipped[SkippedMissed] != 60 {
		t.Fatalf("latest after an hour away: %+v", d)
	}
}
