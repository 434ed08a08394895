// Package tick computes a schedule's ticks: when a cron expression in a
// time zone, or a fixed period, fires next, and which ticks a pass of the
// schedule service fires after it was away (catch-up).
//
// robfig/cron parses the expression (the five standard fields and the
// @daily-style descriptors); weir walks the wall clock itself, because
// daylight saving needs a rule that library does not give: a wall time
// that occurs twice (the hour repeated when clocks go back) fires once,
// at its first occurrence; a wall time that does not exist (the hour
// skipped when clocks go forward) fires at the instant of the transition.
// A tick's identity is its instant in UTC, so the same tick is the same
// on every daemon and after every restart (DESIGN §12, identity from the
// journal: the service stores the next tick, it never recomputes it from
// the time it started).
package tick

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest period a schedule may have.
const MinEvery = time.Second

// searchDays bounds the search for a cron expression's next tick: an
// expression that matches no day within it (February 30) never fires.
const searchDays = 5*366 + 1

// Spec is a parsed schedule: a cron expression in a zone, or a period.
type Spec struct {
	cron  *cron.SpecSchedule // nil for a period
	loc   *time.Location
	every time.Duration
}

// parser takes the five standard fields and the descriptors (@daily,
// @weekly, ...); @every is refused by Parse (every = "..." says it).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a schedule: expr, a cron expression evaluated in zone (an
// IANA name; "" is UTC), or every, a period of at least MinEvery counted
// from the Unix epoch (so its ticks are the same wherever it is computed).
// Exactly one of expr and every is given.
func Parse(expr string, every time.Duration, zone string) (s *Spec, err error) {
	switch {
	case expr != "" && every != 0:
		return nil, errors.New("a schedule has cron or every, not both")
	case expr == "" && every == 0:
		return nil, errors.New("a schedule needs cron or every")
	case every != 0:
		if every < MinEvery {
			return nil, fmt.Errorf("every = %s: the shortest period is %s", every, MinEvery)
		}
		if zone != "" {
			return nil, errors.New("a period (every) counts in UTC: timezone goes with cron only")
		}
		return &Spec{every: every, loc: time.UTC}, nil
	}
	loc := time.UTC
	if zone != "" {
		if loc, err = time.LoadLocation(zone); err != nil {
			return nil, fmt.Errorf("timezone %q is not a known zone (an IANA name such as Europe/Paris)", zone)
		}
	}
	trimmed := strings.TrimSpace(expr)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, fmt.Errorf("cron %q names its zone inside: give it as timezone = \"...\"", expr)
	}
	if strings.HasPrefix(trimmed, "@every") {
		return nil, fmt.Errorf("cron %q: write a period as every = \"...\"", expr)
	}
	defer func() {
		// The library runs on user input: a panic is a refusal.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("cron %q cannot be read", expr)
		}
	}()
	parsed, err := parser.Parse(trimmed)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %v", expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("cron %q is not a calendar expression", expr)
	}
	s = &Spec{cron: spec, loc: loc}
	// Any five years hold every day a calendar expression can name
	// (February 29 included), so one fixed start tells them all.
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("cron %q matches no day in the next five years", expr)
	}
	return s, nil
}

// Location is the zone the spec's wall times are read in.
func (s *Spec) Location() *time.Location { return s.loc }

// Next is the first tick strictly after after, in UTC; the zero time if
// there is none within the search bound.
func (s *Spec) Next(after time.Time) time.Time {
	if s.cron == nil {
		n := after.UnixNano()/int64(s.every) + 1
		if after.UnixNano() < 0 && after.UnixNano()%int64(s.every) != 0 {
			n-- // division truncates toward zero
		}
		return time.Unix(0, n*int64(s.every)).UTC()
	}
	local := after.In(s.loc)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	for range searchDays {
		if s.dayMatches(day) {
			for h := 0; h < 24; h++ {
				if s.cron.Hour&(1<<uint(h)) == 0 {
					continue
				}
				for m := 0; m < 60; m++ {
					if s.cron.Minute&(1<<uint(m)) == 0 {
						continue
					}
					if t := instant(day.Year(), day.Month(), day.Day(), h, m, s.loc); t.After(after) {
						return t.UTC()
					}
				}
			}
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}
}

// dayMatches is cron's day rule: with both day fields restricted, either
// matches; with one of them "*", both must.
func (s *Spec) dayMatches(day time.Time) bool {
	c := s.cron
	if c.Month&(1<<uint(day.Month())) == 0 {
		return false
	}
	const star = 1 << 63
	dom := c.Dom&(1<<uint(day.Day())) != 0
	dow := c.Dow&(1<<uint(day.Weekday())) != 0
	if c.Dom&star != 0 || c.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

// instant is the instant a wall time of loc names: its first occurrence
// when it occurs twice, and the transition's instant when it does not
// occur (skipped by a change of offset).
func instant(y int, mo time.Month, d, h, mi int, loc *time.Location) time.Time {
	asUTC := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	// The offsets in force a day either side cover any transition that
	// can make this wall time repeat or not exist.
	_, before := asUTC.Add(-24 * time.Hour).In(loc).Zone()
	_, after := asUTC.Add(24 * time.Hour).In(loc).Zone()
	var found time.Time
	for _, off := range []int{before, after} {
		t := asUTC.Add(-time.Duration(off) * time.Second)
		if w := t.In(loc); w.Hour() == h && w.Minute() == mi && w.Day() == d && (found.IsZero() || t.Before(found)) {
			found = t
		}
	}
	if !found.IsZero() {
		return found
	}
	// Skipped: the later candidate lies past the transition, which is
	// where its zone's span begins.
	late := asUTC.Add(-time.Duration(min(before, after)) * time.Second)
	start, _ := late.In(loc).ZoneBounds()
	return start
}

// CatchUp says which ticks missed while the service was away fire.
type CatchUp string

// The catch-up policies.
const (
	// CatchUpNone fires only the ticks that are on time (within Grace);
	// the missed ones are skipped.
	CatchUpNone CatchUp = "none"
	// CatchUpLatest fires the latest tick due, once, and skips the rest.
	CatchUpLatest CatchUp = "latest"
	// CatchUpAll fires every tick due, oldest first, up to MaxCatchUp (the
	// latest ones); older ones are skipped.
	CatchUpAll CatchUp = "all"
)

// Pass is what a pass of the schedule service gives Due.
type Pass struct {
	// Next is the stored next tick: the first not yet fired or skipped.
	Next time.Time
	Now  time.Time
	// Grace is how late a tick may fire and still count as on time.
	Grace      time.Duration
	CatchUp    CatchUp
	MaxCatchUp int
}

// Decision is what a pass does: the ticks to fire, oldest first, how
// many it skips, and the next tick to store.
type Decision struct {
	Fire    []time.Time
	Skipped int
	Next    time.Time
}

// maxDueScan bounds the ticks Due walks through after a long absence; past
// it the oldest are counted as skipped without being listed.
const maxDueScan = 100_000

// Due decides a pass: every tick from p.Next up to p.Now is due; the
// policy says which of them fire. A tick not yet due fires nothing and
// Next stays.
func Due(s *Spec, p Pass) Decision {
	if p.Next.IsZero() || p.Now.Before(p.Next) {
		return Decision{Next: p.Next}
	}
	var due []time.Time
	skipped := 0
	t := p.Next
	for !t.IsZero() && !t.After(p.Now) {
		if len(due) == maxDueScan {
			skipped += len(due) - 1
			due = due[len(due)-1:]
		}
		due = append(due, t)
		t = s.Next(t)
	}
	d := Decision{Next: t}
	last := due[len(due)-1]
	switch p.CatchUp {
	case CatchUpAll:
		keep := max(p.MaxCatchUp, 1)
		if len(due) > keep {
			skipped += len(due) - keep
			due = due[len(due)-keep:]
		}
		d.Fire = due
	case CatchUpLatest:
		skipped += len(due) - 1
		d.Fire = []time.Time{last}
	default:
		// The ticks within Grace are on time (a pass a little late
		// fires each); the older ones were missed.
		for len(due) > 0 && p.Now.Sub(due[0]) > p.Grace {
			skipped++
			due = due[1:]
		}
		d.Fire = due
	}
	d.Skipped = skipped
	return d
}
