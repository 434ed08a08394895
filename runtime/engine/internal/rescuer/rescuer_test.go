package rescuer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		attempt, max int
		want         Action
	}{
		{1, 5, Requeue},
		{4, 5, Requeue},
		{5, 5, DeadLetter},
		{6, 5, DeadLetter},
		{1, 1, DeadLetter},
	} {
		if got := Decide(tt.attempt, tt.max); got != tt.want {
			t.Errorf("Decide(%d, %d) = %v, want %v", tt.attempt, tt.max, got, tt.want)
		}
	}
}

// fakeEngine lists from a real memstore and applies Decide as the engine
// would, recording what it was asked.
type fakeEngine struct {
	st       store.Store
	max      int
	lease    time.Duration
	rescued  []string
	fail     string // a task whose rescue fails
	vanished string // a task renewed since it was listed
}

func (f *fakeEngine) ListExpired(ctx context.Context, now time.Time, limit int) ([]*store.Lease, error) {
	var out []*store.Lease
	err := f.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.LeaseListExpired(now, limit)
		return err
	})
	return out, err
}

func (f *fakeEngine) Rescue(_ context.Context, l *store.Lease, why string) (Action, bool, error) {
	switch l.TaskID {
	case f.fail:
		return 0, false, errors.New("store down")
	case f.vanished:
		return 0, false, nil
	}
	f.rescued = append(f.rescued, l.TaskID+": "+why)
	return Decide(l.Attempt, f.max), true, nil
}

func (f *fakeEngine) LeaseTimeout() time.Duration { return f.lease }
func (f *fakeEngine) Tick() time.Duration         { return 100 * time.Millisecond }
func (f *fakeEngine) Error(string, ...any)        {}

func TestRunOnceTakesBackOnlyExpiredLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	st := memstore.New()
	put := func(task string, attempt int, deadline time.Time) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.LeasePut(&store.Lease{TaskID: task, RunID: "r_" + task, Holder: "h_dead", Attempt: attempt, Deadline: deadline})
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("live", 1, t0.Add(time.Minute))
	put("first", 1, t0.Add(-time.Second))
	put("last", 5, t0.Add(-time.Second))
	put("broken", 2, t0.Add(-time.Second))
	put("renewed", 2, t0.Add(-time.Second))
	eng := &fakeEngine{st: st, max: 5, lease: 30 * time.Second, fail: "broken", vanished: "renewed"}
	r := New(eng, clk)
	got := r.RunOnce(ctx)
	want := Result{Expired: 4, Requeued: 1, DeadLettered: 1, Skipped: 1, Failed: 1}
	if got != want {
		t.Fatalf("pass = %+v, want %+v", got, want)
	}
	for _, s := range eng.rescued {
		if s == "live: lease expired" {
			t.Fatalf("a live lease was rescued: %v", eng.rescued)
		}
	}
	// Nothing is due before the clock passes the live lease's deadline.
	clk.Advance(2 * time.Minute)
	if got := r.RunOnce(ctx); got.Expired != 5 {
		t.Fatalf("after the deadline: %+v, want 5 expired (the store still has them all)", got)
	}
}

func TestIntervalFollowsTheLeaseTimeout(t *testing.T) {
	t.Parallel()
	eng := &fakeEngine{lease: 30 * time.Second}
	r := New(eng, clock.NewFake(time.Now()))
	if got := r.interval(); got != 3*time.Second {
		t.Fatalf("interval %v, want a tenth of the lease timeout", got)
	}
	eng.lease = 500 * time.Millisecond
	if got := r.interval(); got != 100*time.Millisecond {
		t.Fatalf("interval %v, want never below the tick", got)
	}
}
