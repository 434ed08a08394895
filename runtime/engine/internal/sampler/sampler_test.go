package sampler

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestDue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		now, last time.Time
		want      bool
	}{
		{t0, time.Time{}, true},
		{t0.Add(9 * time.Second), t0, false},
		{t0.Add(10 * time.Second), t0, true},
	} {
		if got := Due(tt.now, tt.last, 10*time.Second); got != tt.want {
			t.Errorf("Due(%v, %v) = %v, want %v", tt.now, tt.last, got, tt.want)
		}
	}
}

type fakeEngine struct{ at []time.Time }

func (f *fakeEngine) Sample(ctx context.Context, at time.Time) {
	if _, ok := ctx.Deadline(); !ok {
		panic("a sample without a deadline")
	}
	f.at = append(f.at, at)
}
func (f *fakeEngine) Tick() time.Duration { return 100 * time.Millisecond }

func TestRunOnceSamplesFirstThenEveryInterval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	eng := &fakeEngine{}
	s := New(eng, clk, 10*time.Second)
	if !s.RunOnce(ctx) {
		t.Fatal("the first pass took no sample")
	}
	clk.Advance(9 * time.Second)
	if s.RunOnce(ctx) {
		t.Fatal("sampled before the interval passed")
	}
	clk.Advance(time.Second)
	if !s.RunOnce(ctx) {
		t.Fatal("no sample once the interval passed")
	}
	if len(eng.at) != 2 || !eng.at[0].Equal(t0) || !eng.at[1].Equal(t0.Add(10*time.Second)) {
		t.Fatalf("samples at %v", eng.at)
	}
}
