// Package modelgate admits model turns against their models' provider
// limits (max_concurrent, requests_per_minute, tokens_per_minute, as the
// chat tool declares them), before the turn is sent, so that a fan-out of
// agents on one model waits in the engine's queue holding nothing instead
// of collecting the provider's 429s or holding worker slots while a
// plugin waits (docs/design.md §9).
//
// A minute's limits are a sliding window of the turns admitted, at the
// instants they were admitted (each held a Margin past its minute), with
// their token estimates (the reported usage once they end): no 60-second
// span ever holds more than the limits, which is never more than a provider's token bucket of the same
// size allows, nor a provider's own window. A turn that does not fit is
// booked: told the first instant it would fit behind every turn booked
// before it, and once that instant has come it goes before any turn that
// has not waited. A booking is a place in line, not capacity: the window
// alone decides, so a turn that comes back late can delay the ones
// behind it but never push a minute past the limits. Concurrency cannot
// be booked (when a turn ends is not known): a turn over max_concurrent
// is told to come back after a short wait. A provider's 429 with a
// Retry-After pauses the model until then.
//
// The gate is the daemon's: in a fleet each daemon admits against its
// share of the limits (Share).
package modelgate

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirhq/weir/flows"
)

// Window is the span of requests_per_minute and tokens_per_minute.
const Window = time.Minute

// Margin is how much longer than Window a turn counts from its
// admission: the call reaches the provider a moment later, later for
// some turns than others (a plugin's first call launches it), and a
// provider that counts arrivals must never see more than the limit
// within its minute.
const Margin = 2 * time.Second

// held is how long an admitted turn counts in its model's window.
const held = Window + Margin

// ConcurrencyWait is how long a turn refused for max_concurrent waits
// before it asks again: when a turn in flight ends is not known, and a
// turn usually takes seconds.
const ConcurrencyWait = time.Second

// Gate holds every model's window. The zero value is not usable; use New.
type Gate struct {
	mu     sync.Mutex
	models map[string]*model
}

// New returns an empty gate.
func New() *Gate { return &Gate{models: map[string]*model{}} }

type start struct {
	at     time.Time // admitted then; for a booking, when it may come
	tokens int64
	ticket string
}

type model struct {
	inFlight int64
	// admitted are the turns admitted within the window, oldest first.
	admitted []*start
	// booked is the line of turns told to wait, in order (each booked at
	// or after the one before).
	booked []*start
	paused time.Time         // nothing is admitted before it (a Retry-After)
	waited int64             // turns told to wait since the daemon started
	limits flows.ModelLimits // the latest in force, for Uses
}

// Permit is an admitted turn's hold on its model. Release it once, when
// the turn ends.
type Permit struct {
	g     *Gate
	key   string
	start *start
	once  sync.Once
}

// Release ends the turn: its concurrency slot frees and its token
// estimate is replaced by used, the tokens the provider reported (-1:
// unknown, the estimate stands). A nil permit does nothing.
func (p *Permit) Release(used int64) {
	if p == nil || p.g == nil {
		return
	}
	p.once.Do(func() {
		p.g.mu.Lock()
		defer p.g.mu.Unlock()
		p.g.models[p.key].inFlight--
		if used >= 0 {
			p.start.tokens = used
		}
	})
}

// Wait is a refusal: the turn comes back at Until, with the same ticket;
// Why cites the limit.
type Wait struct {
	Until time.Time
	Why   string
}

// Share is a daemon's part of a fleet-wide limit: the limit divided among
// the live daemons that serve the model, rounded down but never below 1.
func Share(l flows.ModelLimits, daemons int) flows.ModelLimits {
	if daemons <= 1 {
		return l
	}
	part := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		return max(1, v/int64(daemons))
	}
	return flows.ModelLimits{MaxConcurrent: part(l.MaxConcurrent), RequestsPerMinute: part(l.RequestsPerMinute), TokensPerMinute: part(l.TokensPerMinute)}
}

// Admit admits one turn of the model key that expects to use tokens (its
// prompt estimate plus its output limit) at now, or says when to come
// back. ticket names the turn, the same on every try of it: it keeps the
// turn's place in line. Limits with nothing set admit at once, with a
// permit that does nothing.
func (g *Gate) Admit(key string, lim flows.ModelLimits, ticket string, tokens int64, now time.Time) (*Permit, *Wait) {
	if !lim.Any() {
		return &Permit{}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.model(key)
	m.prune(now)
	m.limits = lim
	if lim.MaxConcurrent > 0 && m.inFlight >= lim.MaxConcurrent {
		m.waited++
		return nil, &Wait{Until: now.Add(ConcurrencyWait), Why: fmt.Sprintf("%d turns in flight, max_concurrent is %d", m.inFlight, lim.MaxConcurrent)}
	}
	mine := m.place(ticket)
	if mine >= 0 && m.booked[mine].at.After(now) {
		return nil, &Wait{Until: m.booked[mine].at, Why: "booked behind earlier turns of the model"}
	}
	why := m.refusal(lim, tokens, now)
	if why == "" && m.dueAhead(mine, now) {
		why = "turns that waited longer go first"
	}
	if why != "" {
		m.waited++
		if mine >= 0 {
			m.booked = append(m.booked[:mine], m.booked[mine+1:]...)
		}
		at := latest(m.first(lim, tokens, now), now.Add(ConcurrencyWait))
		m.booked = append(m.booked, &start{at: at, tokens: tokens, ticket: ticket})
		return nil, &Wait{Until: at, Why: why}
	}
	if mine >= 0 {
		m.booked = append(m.booked[:mine], m.booked[mine+1:]...)
	}
	s := &start{at: now, tokens: tokens, ticket: ticket}
	m.admitted = append(m.admitted, s)
	m.inFlight++
	return &Permit{g: g, key: key, start: s}, nil
}

// Pause holds every start of the model until until: the provider said to
// wait (a 429's Retry-After).
func (g *Gate) Pause(key string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.model(key); until.After(m.paused) {
		m.paused = until
	}
}

func (g *Gate) model(key string) *model {
	m := g.models[key]
	if m == nil {
		m = &model{}
		g.models[key] = m
	}
	return m
}

// place is the ticket's index in the line, or -1.
func (m *model) place(ticket string) int {
	for i, b := range m.booked {
		if b.ticket == ticket {
			return i
		}
	}
	return -1
}

// dueAhead says a turn booked before place (all of them when place is
// -1) may come now and has not yet.
func (m *model) dueAhead(place int, now time.Time) bool {
	if place < 0 {
		place = len(m.booked)
	}
	for _, b := range m.booked[:place] {
		if !b.at.After(now) {
			return true
		}
	}
	return false
}

// refusal says which limit a start of tokens now would pass, "" if none.
func (m *model) refusal(lim flows.ModelLimits, tokens int64, now time.Time) string {
	if m.paused.After(now) {
		return "the provider asked to wait (Retry-After)"
	}
	if rpm := lim.RequestsPerMinute; rpm > 0 && int64(len(m.admitted)) >= rpm {
		return fmt.Sprintf("%d turns in the last minute, requests_per_minute is %d", len(m.admitted), rpm)
	}
	if tpm := lim.TokensPerMinute; tpm > 0 {
		var sum int64
		for _, s := range m.admitted {
			sum += s.tokens
		}
		// A turn larger than the whole limit runs alone in an empty window.
		if sum > 0 && sum+tokens > tpm {
			return fmt.Sprintf("~%d tokens in the last minute and ~%d for this turn, tokens_per_minute is %d", sum, tokens, tpm)
		}
	}
	return ""
}

// first is the first instant when a start of tokens would fit the window
// if every turn in line were admitted at its booked instant before it.
func (m *model) first(lim flows.ModelLimits, tokens int64, now time.Time) time.Time {
	all := make([]*start, 0, len(m.admitted)+len(m.booked))
	all = append(all, m.admitted...)
	all = append(all, m.booked...)
	slices.SortStableFunc(all, func(a, b *start) int { return a.at.Compare(b.at) })
	at := now
	if n := len(all); n > 0 {
		at = latest(at, all[n-1].at)
	}
	at = latest(at, m.paused)
	if rpm := lim.RequestsPerMinute; rpm > 0 && int64(len(all)) >= rpm {
		// The rpm-th latest start must leave the window first.
		at = latest(at, all[int64(len(all))-rpm].at.Add(held))
	}
	if tpm := lim.TokensPerMinute; tpm > 0 {
		var sum int64
		for _, s := range all {
			sum += s.tokens
		}
		for i := 0; i < len(all) && sum > 0 && sum+tokens > tpm; i++ {
			sum -= all[i].tokens
			at = latest(at, all[i].at.Add(held))
		}
	}
	return at
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// prune drops the admitted turns that left the window, and the bookings
// whose instant passed a window ago without the turn coming (its run
// ended meanwhile): they no longer hold the line.
func (m *model) prune(now time.Time) {
	cut := now.Add(-held)
	i := 0
	for i < len(m.admitted) && !m.admitted[i].at.After(cut) {
		i++
	}
	m.admitted = m.admitted[i:]
	m.booked = slices.DeleteFunc(m.booked, func(b *start) bool { return !b.at.After(cut) })
}

// Use is one model's use of its limits now.
type Use struct {
	Model    string            `json:"model"`
	Limits   flows.ModelLimits `json:"limits"`
	InFlight int64             `json:"in_flight"`
	// Started and Tokens are the window's admitted turns and their token
	// estimates (reported usage once a turn ended); Booked the turns in
	// line.
	Started int64 `json:"started_last_minute"`
	Tokens  int64 `json:"tokens_last_minute"`
	Booked  int64 `json:"booked"`
	// Waited counts the turns told to wait since the daemon started.
	Waited      int64     `json:"waited"`
	PausedUntil time.Time `json:"paused_until,omitzero"`
}

// Uses is every model's use, in no order.
func (g *Gate) Uses(now time.Time) []Use {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Use, 0, len(g.models))
	for key, m := range g.models {
		m.prune(now)
		u := Use{Model: key, InFlight: m.inFlight, Started: int64(len(m.admitted)), Booked: int64(len(m.booked)), Waited: m.waited, Limits: m.limits}
		for _, s := range m.admitted {
			u.Tokens += s.tokens
		}
		if m.paused.After(now) {
			u.PausedUntil = m.paused
		}
		out = append(out, u)
	}
	return out
}
