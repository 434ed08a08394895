// Package cohort holds the decisions of a fan-out cohort (docs/design.md §7) as
// pure functions of its counters, its node's declaration and the time:
// when to freeze admission, how many children to admit, when the grace
// period is over and in-flight children are stopped, when the cohort
// closes (by sufficiency, by exhaustion or by the deadline fuse) and when
// the parked parent must look again by itself. The engine's transaction
// reads the cohort, asks Advance, and applies the answer; a table test
// covers the decisions without a store.
package cohort

import (
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Decl is what the fan-out node declares that the decisions read.
type Decl struct {
	Width     int           // children in flight at most
	Protected bool          // in-flight children are never stopped
	Grace     time.Duration // how long a frozen cohort waits for in-flight children
	// Fallback is the longest a parked parent sleeps without a wake.
	Fallback time.Duration
}

// State is the part of a cohort the decisions read: its counters, with
// the judgements of the last look already applied.
type State struct {
	State    store.CohortState
	Items    int
	Need     int
	Next     int // next item to admit
	InFlight int
	Mature   int
	Fresh    int // children ended but not yet judged
	Deadline time.Time
	FrozenAt time.Time
	Prepared int // children prepared for admission, from Next on
}

// StateOf reads a cohort's counters; prepared counts the children ready
// for admission from c.Next on.
func StateOf(c *store.Cohort, prepared int) State {
	return State{State: c.State, Items: c.Items, Need: c.Need, Next: c.Next, InFlight: c.InFlight, Mature: c.Mature,
		Fresh: len(c.Fresh), Deadline: c.Deadline, FrozenAt: c.FrozenAt, Prepared: prepared}
}

// Decision is one look's verdict, to apply in this order: freeze, admit,
// stop, then close, look again at once, or park until Wake.
type Decision struct {
	// Freeze: stop admitting (the need is met, or can no longer be).
	Freeze bool
	// Admit is how many prepared children to admit now.
	Admit int
	// Stop: the grace period is over; stop the in-flight children.
	Stop bool
	// Close: fix the cutoff now and reduce. Sufficient says the need was
	// met; Fuse says the deadline has passed, FuseClosed that it closed a
	// cohort that fell short.
	Close      bool
	Sufficient bool
	Fuse       bool
	FuseClosed bool
	// JudgeFirst: the cohort would close but children ended that are not
	// judged yet; the parent looks again at once to judge them first.
	JudgeFirst bool
	// Wake is when the parked parent looks again by itself (when neither
	// Close nor JudgeFirst).
	Wake time.Time
}

// Advance decides one look of the parent at an open or frozen cohort.
func Advance(s State, d Decl, now time.Time) Decision {
	var out Decision
	fuse := !s.Deadline.IsZero() && !now.Before(s.Deadline)
	if s.State == store.CohortOpen {
		// Ended but not yet judged children may still be mature.
		potential := s.Mature + s.Fresh + s.InFlight + (s.Items - s.Next)
		switch {
		case s.Mature >= s.Need, potential < s.Need:
			out.Freeze = true
			s.State, s.FrozenAt = store.CohortFrozen, now
		default:
			out.Admit = max(0, min(d.Width-s.InFlight, s.Items-s.Next, s.Prepared))
			s.Next += out.Admit
			s.InFlight += out.Admit
		}
	}
	if s.State == store.CohortFrozen && s.InFlight > 0 && !d.Protected && !now.Before(s.FrozenAt.Add(d.Grace)) {
		out.Stop = true
		s.InFlight = 0
	}
	allDone := s.Next == s.Items && s.InFlight == 0
	if fuse || (s.State == store.CohortFrozen && s.InFlight == 0) || (s.State == store.CohortOpen && allDone) {
		if s.Fresh > 0 && !fuse {
			out.JudgeFirst = true
			out.Wake = now
			return out
		}
		out.Close = true
		out.Sufficient = s.Mature >= s.Need
		out.Fuse = fuse
		out.FuseClosed = fuse && !out.Sufficient
		return out
	}
	out.Wake = Wake(s, d, now)
	return out
}

// Wake is when a parked parent must look again at its cohort even if no
// child wakes it: at once if there is something to judge or nothing left
// to wait for, else the fuse, the end of the grace period or the fallback,
// whichever comes first.
func Wake(s State, d Decl, now time.Time) time.Time {
	if s.Fresh > 0 || (s.InFlight == 0 && (s.Next == s.Items || s.State != store.CohortOpen)) {
		return now
	}
	at := now.Add(d.Fallback)
	if !s.Deadline.IsZero() && s.Deadline.Before(at) {
		at = s.Deadline
	}
	if s.State == store.CohortFrozen && s.InFlight > 0 && !d.Protected {
		if end := s.FrozenAt.Add(d.Grace); end.Before(at) {
			at = end
		}
	}
	return at
}
