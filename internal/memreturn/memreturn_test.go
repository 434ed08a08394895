package memreturn

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestExcessIsWhatLiesAboveTwiceTheLiveHeapAndTheSlack(t *testing.T) {
	for _, c := range []struct {
		s    Stats
		want uint64
	}{
		{Stats{Live: 40 << 20, Kept: 80 << 20}, 0},                  // the runtime's own goal
		{Stats{Live: 40 << 20, Kept: 80<<20 + Slack}, 0},            // at the line
		{Stats{Live: 40 << 20, Kept: 80<<20 + Slack + 1}, 1},        // just above it
		{Stats{Live: 40 << 20, Kept: 145 << 20}, 145<<20 - 112<<20}, // a burst's leftovers
		{Stats{}, 0},
	} {
		if got := c.s.Excess(); got != c.want {
			t.Errorf("%+v: excess %d, want %d", c.s, got, c.want)
		}
	}
}

func TestRunReturnsOnlyWhenTheExcessIsThereAndStopsWithItsContext(t *testing.T) {
	stats := make(chan Stats)
	freed := make(chan struct{}, 1)
	r := &Returner{read: func() Stats { return <-stats }, free: func() { freed <- struct{}{} }}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, ticks) }()

	ticks <- time.Time{}
	stats <- Stats{Live: 40 << 20, Kept: 60 << 20}
	ticks <- time.Time{} // the first check is over once Run takes the next tick
	select {
	case <-freed:
		t.Fatal("returned memory the runtime's own goal allows")
	default:
	}
	stats <- Stats{Live: 40 << 20, Kept: 200 << 20}
	<-freed

	cancel()
	<-done
}

// The real figures: a burst's garbage counts as kept, and Check returns it.
func TestCheckReturnsARealBurstsGarbage(t *testing.T) {
	runtime.GC()
	before := Read()
	if before.Live == 0 || before.Kept < before.Live {
		t.Fatalf("implausible runtime figures %+v", before)
	}
	// No collection sees the burst live: its 256 MiB are garbage kept.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 64 {
		sink = make([]byte, 4<<20)
	}
	sink = nil
	s := Read()
	if s.Excess() == 0 {
		t.Fatalf("256 MiB of garbage is no excess: %+v (before %+v)", s, before)
	}
	if !New().Check() {
		t.Fatal("Check returned nothing")
	}
	if after := Read(); after.Excess() != 0 {
		t.Fatalf("excess %d left after Check: %+v", after.Excess(), after)
	}
}

var sink []byte
