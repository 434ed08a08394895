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
// On every tick (Interval in the daemon), Run reads the runtime's own
// figures and collects and returns the free pages at once
// (debug.FreeOSMemory) when the heap memory kept (mapped and not yet
// returned) exceeds by more than Slack either
//   - the live heap, when the process allocated less than Slack since the
//     last tick: it is quiet, and needs no room to grow into; or
//   - what the next collection may use, twice the live heap, whatever the
//     load: the leftovers of a burst the runtime has not collected yet.
//
// A busy daemon stays under the second line (the runtime's pacing keeps
// it there), so it pays nothing but the reading.
package memreturn

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// Interval is how often Run looks: a quiet daemon keeps a burst's
	// memory at most two intervals.
	Interval = 5 * time.Second
	// Slack is how far above its line the kept heap may be before it is
	// returned, and the allocation between two ticks under which the
	// process is quiet: under it, a forced collection would win too
	// little to be worth its cost.
	Slack = 32 << 20
)

// Stats is what the decision reads, in bytes.
type Stats struct {
	// Allocs is every byte the process allocated on the heap so far.
	Allocs uint64
	// Live is the live heap at the end of the last collection.
	Live uint64
	// Kept is the heap memory mapped and not returned to the system:
	// live objects, garbage not yet collected and free pages.
	Kept uint64
}

// Excess reports the bytes of s.Kept above the line plus Slack (0:
// nothing worth returning): the live heap if the process is quiet, else
// what the next collection may use.
func (s Stats) Excess(quiet bool) uint64 {
	line := 2*s.Live + Slack
	if quiet {
		line = s.Live + Slack
	}
	if s.Kept <= line {
		return 0
	}
	return s.Kept - line
}

var samples = []metrics.Sample{
	{Name: "/gc/heap/allocs:bytes"},
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
	return Stats{Allocs: v(0), Live: v(1), Kept: v(2) + v(3) + v(4)}
}

// Returner is the watch of one process; its zero value is not usable
// (New).
type Returner struct {
	read   func() Stats
	free   func()
	allocs uint64 // Stats.Allocs at the last check
	seen   bool   // a check ran
}

// New returns the watch of this process.
func New() *Returner {
	return &Returner{read: Read, free: debug.FreeOSMemory}
}

// Check returns the idle heap if it is worth it and reports whether it
// did. The first check never finds the process quiet.
func (r *Returner) Check() bool {
	s := r.read()
	quiet := r.seen && s.Allocs-r.allocs < Slack
	r.allocs, r.seen = s.Allocs, true
	if s.Excess(quiet) == 0 {
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
