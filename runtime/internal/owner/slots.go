package owner

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// Load is what Next knows of one owner with work waiting for a slot.
type Load struct {
	// InUse is how many slots the owner holds now.
	InUse int
	// Served is the turn at which the owner was last given a slot: a
	// sequence number, 0 if it never was.
	Served uint64
}

// Next chooses which of the owners with work waiting gets the next free
// slot and returns its index in waiting, or -1 if waiting is empty. The
// owner holding the fewest slots goes first, so an owner over its share
// (the slots divided by the owners that want them) waits while another is
// under it; among equals the one served longest ago goes, which is round
// robin; a tie beyond that goes to the earlier in waiting (the owner that
// came first). Someone is always chosen, so an owner alone gets every
// slot: the sharing is work-conserving.
func Next(waiting []Load) int {
	best := -1
	for i, l := range waiting {
		if best < 0 || l.InUse < waiting[best].InUse ||
			(l.InUse == waiting[best].InUse && l.Served < waiting[best].Served) {
			best = i
		}
	}
	return best
}

// ErrStopped is Acquire's error when its stop channel closed first.
var ErrStopped = errors.New("owner: stopped waiting for a slot")

// Slots is a counting semaphore shared fairly between owners: a caller
// that finds no free slot waits in its owner's line, first come first
// served within the owner, and each slot that frees goes to the owner Next
// chooses. Nobody is refused: an owner's calls beyond its share wait. It
// is safe for concurrent use; the zero Slots has no slot.
//
// Sharing the slots that free cannot help an owner that arrives while
// another holds every slot with long work (a callable that runs to its
// deadline): it would wait for that work to end. The spare slots answer
// that: a spare is given only to an owner below its share of the n slots
// (BelowShare, every owner of weight 1), so an owner's first slot — and
// its next ones while it is under its share — never waits behind
// another's work, while the owner over its share cannot take a spare and
// the spares stay for the others.
type Slots struct {
	mu    sync.Mutex
	n     int     // the slots, spares not counted
	free  int     // of the n slots
	spare int     // spare slots free, for owners below their share
	lines []*line // owners holding or waiting for a slot, in order of arrival
	turn  uint64
}

// line is one owner's slots in use and its callers waiting, oldest first.
type line struct {
	name    string
	inUse   int
	spares  int // of inUse, spare slots
	served  uint64
	waiting []chan struct{}
}

// NewSlots returns n slots (at least one) and no spare.
func NewSlots(n int) *Slots {
	return NewSlotsWithSpare(n, 0)
}

// NewSlotsWithSpare returns n slots (at least one) and spare more that go
// only to owners below their share.
func NewSlotsWithSpare(n, spare int) *Slots {
	return &Slots{n: max(n, 1), free: max(n, 1), spare: max(spare, 0)}
}

// Acquire takes a slot for name, waiting in name's line while there is
// none to give it. It returns ctx's error if ctx ends first, ErrStopped
// if stop closes first (stop may be nil); it then holds no slot. A caller
// that acquired a slot must Release it with the same name.
func (s *Slots) Acquire(ctx context.Context, name string, stop <-chan struct{}) error {
	s.mu.Lock()
	l := s.line(name)
	if (s.free > 0 && !s.anyWaiting()) || (len(l.waiting) == 0 && s.spare > 0 && s.belowShare(l)) {
		s.give(l)
		s.mu.Unlock()
		return nil
	}
	granted := make(chan struct{}, 1)
	l.waiting = append(l.waiting, granted)
	s.mu.Unlock()

	var err error
	select {
	case <-granted:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
		err = ErrStopped
	}
	s.mu.Lock()
	if i := slices.Index(l.waiting, granted); i >= 0 {
		l.waiting = slices.Delete(l.waiting, i, i+1)
		s.forget(l)
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	// Given a slot as it stopped waiting: it goes to the next in line.
	s.Release(name)
	return err
}

// Release gives back a slot name acquired; the slot goes to whoever Next
// chooses among the owners waiting.
func (s *Slots) Release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.line(name)
	if l.inUse == 0 {
		panic("owner: Release of a slot " + name + " does not hold")
	}
	l.inUse--
	if l.spares > 0 {
		l.spares--
		s.spare++
	} else {
		s.free++
	}
	s.forget(l)
	s.dispatch()
}

// Waiting is how many callers wait for a slot, across owners.
func (s *Slots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		n += len(l.waiting)
	}
	return n
}

// dispatch gives free slots to waiting callers, as Next chooses, and
// spare ones to the owners waiting that are below their share.
func (s *Slots) dispatch() {
	var loads []Load
	var lines []*line
	for s.free > 0 || s.spare > 0 {
		loads, lines = loads[:0], lines[:0]
		for _, l := range s.lines {
			if len(l.waiting) > 0 && (s.free > 0 || s.belowShare(l)) {
				loads = append(loads, Load{InUse: l.inUse, Served: l.served})
				lines = append(lines, l)
			}
		}
		i := Next(loads)
		if i < 0 {
			return
		}
		l := lines[i]
		granted := l.waiting[0]
		l.waiting = slices.Delete(l.waiting, 0, 1)
		s.give(l)
		granted <- struct{}{}
	}
}

// give takes one of the n slots for l, else a spare (l is below its
// share then).
func (s *Slots) give(l *line) {
	if s.free > 0 {
		s.free--
	} else {
		s.spare--
		l.spares++
	}
	s.turn++
	l.inUse++
	l.served = s.turn
}

// belowShare applies BelowShare to l among the owners holding slots.
func (s *Slots) belowShare(l *line) bool {
	total := 1
	for _, o := range s.lines {
		if o != l && o.inUse > 0 {
			total++
		}
	}
	return BelowShare(l.inUse, s.n, 1, total)
}

func (s *Slots) anyWaiting() bool {
	for _, l := range s.lines {
		if len(l.waiting) > 0 {
			return true
		}
	}
	return false
}

// line returns name's line, added at the end if it has none.
func (s *Slots) line(name string) *line {
	for _, l := range s.lines {
		if l.name == name {
			return l
		}
	}
	l := &line{name: name}
	s.lines = append(s.lines, l)
	return l
}

// forget drops a line that neither holds nor waits, so the lines stay as
// many as the owners active now.
func (s *Slots) forget(l *line) {
	if l.inUse == 0 && len(l.waiting) == 0 {
		if i := slices.Index(s.lines, l); i >= 0 {
			s.lines = slices.Delete(s.lines, i, i+1)
		}
	}
}
