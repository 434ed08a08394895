package sampler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
)

type fakeEngine struct {
	mu  sync.Mutex
	at  []time.Time
	got chan struct{}
}

func (f *fakeEngine) Sample(ctx context.Context, at time.Time) {
	if _, ok := ctx.Deadline(); !ok {
		panic("a sample without a deadline")
	}
	f.mu.Lock()
	f.at = append(f.at, at)
	f.mu.Unlock()
	f.got <- struct{}{}
}

func TestSamplesAtStartThenEveryInterval(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	eng := &fakeEngine{got: make(chan struct{}, 4)}
	s := New(eng, clk, 10*time.Second)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	<-eng.got // the first sample, at start
	clk.Advance(9 * time.Second)
	clk.Advance(time.Second)
	<-eng.got
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(eng.at) != 2 || !eng.at[0].Equal(t0) || !eng.at[1].Equal(t0.Add(10*time.Second)) {
		t.Fatalf("samples at %v, want at the start and one interval later", eng.at)
	}
}
