package modelgate

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// event is one turn's next visit to the gate (come) or its end (done).
type event struct {
	at     time.Time
	turn   int
	done   bool
	permit *Permit
}

type events []*event

func (q events) Len() int           { return len(q) }
func (q events) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q events) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)        { *q = append(*q, x.(*event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type admitted struct {
	at     time.Time
	turn   int
	tokens int64 // what the turn used
}

// simulate drives turns through one gate: each arrives at a random
// instant, comes back at its Wait's Until (up to late later), holds its
// permit for a random while and reports using at most its estimate. It
// returns the admissions in order and the most turns ever in flight.
func simulate(t *testing.T, seed uint64, lim flows.ModelLimits, turns int, late time.Duration) ([]admitted, int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	g := New()
	q := &events{}
	estimate := make([]int64, turns)
	for i := range turns {
		estimate[i] = 100 + rng.Int64N(900)
		heap.Push(q, &event{at: epoch.Add(time.Duration(rng.Int64N(int64(90 * time.Second)))), turn: i})
	}
	var out []admitted
	var inFlight, peak int64
	for q.Len() > 0 {
		e := heap.Pop(q).(*event)
		if e.done {
			inFlight--
			used := estimate[e.turn] - rng.Int64N(estimate[e.turn])
			e.permit.Release(used)
			out[e.turn2admission(out)].tokens = used
			continue
		}
		p, w := g.Admit("llm.chat/small", lim, fmt.Sprint("turn-", e.turn), estimate[e.turn], e.at)
		if w != nil {
			if !w.Until.After(e.at) {
				t.Fatalf("turn %d told to come back at %v, not after now %v (%s)", e.turn, w.Until, e.at, w.Why)
			}
			back := w.Until
			if late > 0 {
				back = back.Add(time.Duration(rng.Int64N(int64(late))))
			}
			heap.Push(q, &event{at: back, turn: e.turn})
			continue
		}
		out = append(out, admitted{at: e.at, turn: e.turn, tokens: estimate[e.turn]})
		inFlight++
		peak = max(peak, inFlight)
		heap.Push(q, &event{at: e.at.Add(time.Duration(1 + rng.Int64N(int64(20*time.Second)))), turn: e.turn, done: true, permit: p})
		if len(out) > turns {
			t.Fatalf("%d admissions of %d turns", len(out), turns)
		}
	}
	if len(out) != turns {
		t.Fatalf("%d of %d turns admitted", len(out), turns)
	}
	return out, peak
}

func (e *event) turn2admission(out []admitted) int {
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].turn == e.turn {
			return i
		}
	}
	panic("a turn ended that was never admitted")
}

// The limits hold over every minute and its Margin (so a provider that
// counts arrivals up to Margin late still sees them held), whoever comes
// back late: for each admission, the span that starts at it holds at most
// requests_per_minute admissions and tokens_per_minute used tokens (a
// turn larger than the limit alone), and no more than max_concurrent are
// ever in flight.
func TestNoMinutePassesTheLimits(t *testing.T) {
	for _, tc := range []struct {
		lim  flows.ModelLimits
		late time.Duration
	}{
		{flows.ModelLimits{RequestsPerMinute: 10}, 0},
		{flows.ModelLimits{RequestsPerMinute: 10}, 5 * time.Second},
		{flows.ModelLimits{TokensPerMinute: 3000}, 0},
		{flows.ModelLimits{TokensPerMinute: 3000}, 7 * time.Second},
		{flows.ModelLimits{MaxConcurrent: 3}, 0},
		{flows.ModelLimits{MaxConcurrent: 4, RequestsPerMinute: 7, TokensPerMinute: 2500}, 3 * time.Second},
	} {
		for seed := range uint64(20) {
			out, peak := simulate(t, seed, tc.lim, 60, tc.late)
			if tc.lim.MaxConcurrent > 0 && peak > tc.lim.MaxConcurrent {
				t.Fatalf("%+v seed %d: %d in flight at once", tc.lim, seed, peak)
			}
			for i, a := range out {
				n, sum := int64(0), int64(0)
				for _, b := range out[i:] {
					if b.at.Before(a.at.Add(held)) {
						n++
						sum += b.tokens
					}
				}
				if rpm := tc.lim.RequestsPerMinute; rpm > 0 && n > rpm {
					t.Fatalf("%+v seed %d: %d turns in the minute from %v", tc.lim, seed, n, a.at.Sub(epoch))
				}
				if tpm := tc.lim.TokensPerMinute; tpm > 0 && n > 1 && sum > tpm {
					t.Fatalf("%+v seed %d: %d tokens in the minute from %v", tc.lim, seed, sum, a.at.Sub(epoch))
				}
			}
		}
	}
}

// Turns that wait are served in the order they came when they come back
// on time: a booking is a place in line that a newcomer does not take.
func TestWaitingTurnsKeepTheirPlace(t *testing.T) {
	g := New()
	lim := flows.ModelLimits{RequestsPerMinute: 2}
	now := epoch
	for i := range 2 {
		if _, w := g.Admit("m", lim, fmt.Sprint(i), 10, now); w != nil {
			t.Fatalf("turn %d waits in an empty window: %s", i, w.Why)
		}
	}
	_, w2 := g.Admit("m", lim, "2", 10, now.Add(time.Second))
	_, w3 := g.Admit("m", lim, "3", 10, now.Add(2*time.Second))
	if w2 == nil || w3 == nil || !w2.Until.Equal(epoch.Add(held)) || !w3.Until.Equal(epoch.Add(held)) {
		t.Fatalf("waits %+v %+v: want both booked for when the first two leave the window", w2, w3)
	}
	// A newcomer at the instant the window frees goes behind them.
	if _, w := g.Admit("m", lim, "late", 10, epoch.Add(held)); w == nil {
		t.Fatal("a newcomer took the place of turns that waited")
	}
	for _, id := range []string{"2", "3"} {
		if _, w := g.Admit("m", lim, id, 10, epoch.Add(held)); w != nil {
			t.Fatalf("turn %s refused at its booking: %s", id, w.Why)
		}
	}
	if _, w := g.Admit("m", lim, "late", 10, epoch.Add(held)); w == nil || !w.Until.After(epoch.Add(held)) {
		t.Fatalf("the newcomer got in past requests_per_minute: %+v", w)
	}
}

// A booking whose turn never comes back (its run was cancelled) holds
// the line for at most a window.
func TestAnAbandonedBookingLetsGo(t *testing.T) {
	g := New()
	lim := flows.ModelLimits{RequestsPerMinute: 1}
	g.Admit("m", lim, "a", 1, epoch)
	_, w := g.Admit("m", lim, "gone", 1, epoch)
	if w == nil {
		t.Fatal("a second turn in a minute of requests_per_minute = 1")
	}
	after := w.Until.Add(held + time.Second)
	if _, w := g.Admit("m", lim, "next", 1, after); w != nil {
		t.Fatalf("a booking nobody claimed still holds the line a window later: %s", w.Why)
	}
	if u := g.Uses(after); len(u) != 1 || u[0].Booked != 0 || u[0].Started != 1 || u[0].Waited != 1 {
		t.Fatalf("uses %+v", u)
	}
}

// A provider's Retry-After holds every turn of the model, booked ones
// too, and no other model's.
func TestPauseHoldsTheModel(t *testing.T) {
	g := New()
	lim := flows.ModelLimits{RequestsPerMinute: 100}
	until := epoch.Add(20 * time.Second)
	g.Pause("m", until)
	_, w := g.Admit("m", lim, "a", 1, epoch)
	if w == nil || w.Until.Before(until) {
		t.Fatalf("admitted during the provider's pause: %+v", w)
	}
	if _, w := g.Admit("other", lim, "b", 1, epoch); w != nil {
		t.Fatalf("another model paused: %s", w.Why)
	}
	if p, w := g.Admit("m", lim, "a", 1, w.Until); w != nil || p == nil {
		t.Fatalf("refused after the pause: %+v", w)
	}
}

// Concurrency frees on Release, once however often it is called, and
// the unlimited model's permit is a no-op.
func TestReleaseFreesOnce(t *testing.T) {
	g := New()
	lim := flows.ModelLimits{MaxConcurrent: 1}
	p, _ := g.Admit("m", lim, "a", 1, epoch)
	if _, w := g.Admit("m", lim, "b", 1, epoch); w == nil {
		t.Fatal("two in flight with max_concurrent = 1")
	}
	p.Release(-1)
	p.Release(-1)
	if _, w := g.Admit("m", lim, "b", 1, epoch); w != nil {
		t.Fatalf("refused after the release: %s", w.Why)
	}
	if _, w := g.Admit("m", lim, "c", 1, epoch); w == nil {
		t.Fatal("a double release freed two slots")
	}
	free, w := g.Admit("m", flows.ModelLimits{}, "d", 1, epoch)
	if w != nil {
		t.Fatal("a model without limits refused a turn")
	}
	free.Release(5)
	var none *Permit
	none.Release(1)
}

func TestShare(t *testing.T) {
	l := flows.ModelLimits{MaxConcurrent: 5, RequestsPerMinute: 60, TokensPerMinute: 0}
	if got := Share(l, 1); got != l {
		t.Fatalf("one daemon: %+v", got)
	}
	if got := Share(l, 4); got != (flows.ModelLimits{MaxConcurrent: 1, RequestsPerMinute: 15}) {
		t.Fatalf("four daemons: %+v", got)
	}
	if got := Share(l, 100); got.MaxConcurrent != 1 || got.RequestsPerMinute != 1 {
		t.Fatalf("a hundred daemons: %+v (never below 1)", got)
	}
}
