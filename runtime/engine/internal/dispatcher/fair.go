package dispatcher

// The fair order: owners with ready work are served by weighted fair
// queuing (start-time fair queuing, the virtual-time form of stride
// scheduling), not first come first served. Each owner has a pass, the
// virtual time up to which it has been served; serving it a slot moves
// its pass on by stride/weight, so an owner of weight 2 is passed half as
// far per slot as one of weight 1 and is picked twice as often while both
// have work. The virtual time is the start of the slot served last: an
// owner that comes back from idle starts there, not where it left off, so
// idling earns no credit to burst with later, and an owner alone is
// served every slot (the order is work-conserving). Within an owner the
// order is the store's (oldest ready first).

// stride is the pass a slot costs an owner of weight 1; weight w costs
// stride/w. Large enough that weights up to MaxWeight stay distinct.
const stride = 1 << 32

// MaxWeight is the largest weight the fair order tells apart; larger
// weights count as it.
const MaxWeight = 1 << 16

// Next picks which of owners (each with a task to offer now, in the
// order of their oldest task) is served next: the one whose start,
// max(its pass, vt), is least; a tie goes to the earlier owner, the one
// whose oldest task is older. An owner without a pass starts at vt. It is
// -1 for no owners.
func Next(owners []string, pass map[string]uint64, vt uint64) int {
	best, bestStart := -1, uint64(0)
	for i, o := range owners {
		start := max(pass[o], vt)
		if best < 0 || start < bestStart {
			best, bestStart = i, start
		}
	}
	return best
}

// Served is an owner's pass and the virtual time after it was served one
// slot, from its pass and the virtual time before.
func Served(pass, vt uint64, weight int) (newPass, newVT uint64) {
	weight = min(max(weight, 1), MaxWeight)
	start := max(pass, vt)
	return start + stride/uint64(weight), start
}

// Shares is the fair order's memory across passes: each owner's pass and
// the virtual time. Only owners ahead of the virtual time are kept (one
// at or behind it starts at vt anyway), so it holds no more owners than
// have been served lately.
type Shares struct {
	vt   uint64
	pass map[string]uint64
}

// NewShares returns the memory of an order that has served nobody.
func NewShares() *Shares { return &Shares{pass: map[string]uint64{}} }

// Next picks which of owners is served next (see Next).
func (s *Shares) Next(owners []string) int { return Next(owners, s.pass, s.vt) }

// Serve records that owner, of weight weight, was given a slot.
func (s *Shares) Serve(owner string, weight int) {
	s.pass[owner], s.vt = Served(s.pass[owner], s.vt, weight)
}

// Prune forgets the owners no further ahead than the virtual time.
func (s *Shares) Prune() {
	for o, p := range s.pass {
		if p <= s.vt {
			delete(s.pass, o)
		}
	}
}

// Len is how many owners' passes are kept.
func (s *Shares) Len() int { return len(s.pass) }
