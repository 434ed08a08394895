// Package memreturn gives the daemon's idle heap back to the operating
// system once a burst of work is over.
//
// The Go runtime keeps what a burst needed: its heap goal is twice the
// live heap of the last collection, Badger allocates every write buffer
// (16 MiB and more) afresh, and the runtime returns freed pages only
// slowly, in the background. A daemon that has just accepted 100,000 runs
// parked on a human wait, and then gone quiet, would keep the burst's peak
// resident for minutes although its live heap is a fraction of it.
//
// On every tick (Interval in the daemon), Run reads the runtime's own figures. When the heap
// memory it keeps (mapped and not yet returned) exceeds what the next
// collection may use, twice the live heap, by more than Slack, it collects
// and returns the free pages at once (debug.FreeOSMemory). A busy daemon
// stays under that line (the runtime's pacing keeps it there), so it pays
// nothing but the reading.
package memreturn

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// Interval is how often Run looks: the longest an idle burst's
	// memory stays resident.
	Interval = 5 * time.Second
	// Slack is how far above twice the live heap the kept heap may be
	// before it is returned: under it, a forced collection would win
	// too little to be worth its cost.
	Slack = 32 << 20
)

// Stats is what the decision reads, in bytes.
type Stats struct {
	// Live is the live heap at the end of the last collection.
	Live uint64
	// Kept is the heap memory mapped and not returned to the system:
	// live objects, garbage not yet collected and free pages.
	Kept uint64
}

// Excess reports the bytes of s.Kept above what the next collection may
// use plus Slack (0: nothing worth returning).
func (s Stats) Excess() uint64 {
	line := 2*s.Live + Slack
	if s.Kept <= line {
		return 0
	}
	return s.Kept - line
}

var samples = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
}

// Read returns the runtime's current figures.
func Read() Stats {
	s := make([]metrics.Sample, len(samples))
	copy(s, samples)
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return Stats{Live: v(0), Kept: v(1) + v(2) + v(3)}
}

// Returner is the watch of one process; its zero value is not usable
// (New).
type Returner struct {
	read func() Stats
	free func()
}

// New returns the watch of this process.
func New() *Returner {
	return &Returner{read: Read, free: debug.FreeOSMemory}
}

// Check returns the idle heap if it is worth it and reports whether it
// did.
func (r *Returner) Check() bool {
	if r.read().Excess() == 0 {
		return false
	}
	r.free()
	return true
}

// Run checks on every tick until ctx ends.
func (r *Returner) Run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			r.Check()
		}
	}
}
