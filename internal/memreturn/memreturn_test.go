package memreturn

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestExcessIsWhatLiesAboveTheLineAndTheSlack(t *testing.T) {
	for _, c := range []struct {
		s     Stats
		quiet bool
		want  uint64
	}{
		{Stats{Live: 40 << 20, Kept: 80 << 20}, false, 0},                  // busy: the runtime's own goal
		{Stats{Live: 40 << 20, Kept: 80<<20 + Slack}, false, 0},            // at the line
		{Stats{Live: 40 << 20, Kept: 80<<20 + Slack + 1}, false, 1},        // just above it
		{Stats{Live: 40 << 20, Kept: 145 << 20}, false, 145<<20 - 112<<20}, // a burst's leftovers
		{Stats{Live: 40 << 20, Kept: 72 << 20}, true, 0},                   // quiet: at the line
		{Stats{Live: 40 << 20, Kept: 80 << 20}, true, 8 << 20},             // quiet: no room to grow needed
		{Stats{}, true, 0},
	} {
		if got := c.s.Excess(c.quiet); got != c.want {
			t.Errorf("%+v quiet %v: excess %d, want %d", c.s, c.quiet, got, c.want)
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

	noneFreed := func(why string) {
		ticks <- time.Time{} // the check is over once Run takes the next tick
		select {
		case <-freed:
			t.Fatal(why)
		default:
		}
	}
	ticks <- time.Time{}
	// The first check never finds the process quiet.
	stats <- Stats{Allocs: 1 << 20, Live: 40 << 20, Kept: 100 << 20}
	noneFreed("returned memory a busy process's goal allows")
	stats <- Stats{Allocs: 1<<20 + Slack, Live: 40 << 20, Kept: 100 << 20}
	noneFreed("returned memory while the process allocated Slack since the last check")
	stats <- Stats{Allocs: 2<<20 + Slack, Live: 40 << 20, Kept: 100 << 20}
	<-freed // quiet: 100 MiB kept is more than 40 live + 32
	ticks <- time.Time{}
	stats <- Stats{Allocs: 1 << 30, Live: 40 << 20, Kept: 200 << 20}
	<-freed // busy: 200 MiB is more than 2×40 + 32

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
	if s.Excess(false) == 0 {
		t.Fatalf("256 MiB of garbage is no excess: %+v (before %+v)", s, before)
	}
	if !New().Check() {
		t.Fatal("Check returned nothing")
	}
	if after := Read(); after.Excess(true) != 0 {
		t.Fatalf("excess %d left after Check: %+v", after.Excess(true), after)
	}
}

var sink []byte
