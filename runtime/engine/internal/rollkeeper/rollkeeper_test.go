package rollkeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestStampDue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		since time.Duration
		want  bool
	}{{0, false}, {9 * time.Second, false}, {10 * time.Second, true}, {time.Hour, true}} {
		if got := StampDue(t0.Add(tt.since), t0, 30*time.Second); got != tt.want {
			t.Errorf("StampDue after %v = %v, want %v", tt.since, got, tt.want)
		}
	}
}

type fakeEngine struct {
	clk     *clock.Fake
	stamped time.Time
	fail    error
	queued  int
	errors  []string
}

func (f *fakeEngine) ForgetStarted(context.Context) int { n := f.queued; f.queued = 0; return n }
func (f *fakeEngine) StampedAt() time.Time              { return f.stamped }
func (f *fakeEngine) StampRoll(context.Context) error {
	if f.fail != nil {
		return f.fail
	}
	f.stamped = f.clk.Now()
	return nil
}
func (f *fakeEngine) LeaseTimeout() time.Duration { return 30 * time.Second }
func (f *fakeEngine) Tick() time.Duration         { return 100 * time.Millisecond }
func (f *fakeEngine) Error(msg string, _ ...any)  { f.errors = append(f.errors, msg) }

func TestRunOnceRenewsAtAThirdOfTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	eng := &fakeEngine{clk: clk, stamped: t0, queued: 3}
	k := New(eng, clk)
	if got := k.RunOnce(ctx); got != (Result{Forgotten: 3}) {
		t.Fatalf("fresh entry: %+v, want only the forgotten runs", got)
	}
	clk.Advance(10 * time.Second)
	if got := k.RunOnce(ctx); !got.Stamped || !eng.stamped.Equal(clk.Now()) {
		t.Fatalf("due entry: %+v stamped %v", got, eng.stamped)
	}
	clk.Advance(10 * time.Second)
	eng.fail = errors.New("store down")
	if got := k.RunOnce(ctx); got.Stamped {
		t.Fatalf("a failed write counted as renewed: %+v", got)
	}
}

// TestStoppingIsNoError: a pass cut short by the service's stop (its
// context cancelled mid-write) is not reported as a failure; a store
// failure is.
func TestStoppingIsNoError(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	eng := &fakeEngine{clk: clk, stamped: t0}
	k := New(eng, clk)
	clk.Advance(10 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	eng.fail = context.Canceled
	if got := k.RunOnce(ctx); got.Stamped || len(eng.errors) != 0 {
		t.Fatalf("stopped pass: %+v, errors %v", got, eng.errors)
	}
	eng.fail = errors.New("store down")
	if k.RunOnce(context.Background()); len(eng.errors) != 1 {
		t.Fatalf("a store failure logged %v, want one error", eng.errors)
	}
}
