package tick

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, expr string, every time.Duration, zone string) *Spec {
	t.Helper()
	s, err := Parse(expr, every, zone)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// ticks lists n ticks of s after from, as RFC 3339 in UTC.
func ticks(s *Spec, from time.Time, n int) []string {
	var out []string
	for t := from; len(out) < n; {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.Format(time.RFC3339))
	}
	return out
}

func TestParseRefusesWithAReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr  string
		every time.Duration
		zone  string
		want  string
	}{
		{"", 0, "", "needs cron or every"},
		{"* * * * *", time.Minute, "", "not both"},
		{"", 500 * time.Millisecond, "", "shortest period"},
		{"", time.Minute, "Europe/Paris", "UTC"},
		{"0 9 * * MON-FRI", 0, "Mars/Olympus", "not a known zone"},
		{"0 9 * *", 0, "", "cron"},
		{"61 9 * * *", 0, "", "cron"},
		{"CRON_TZ=Europe/Paris 0 9 * * *", 0, "", "timezone"},
		{"@every 5m", 0, "", "every ="},
		{"0 0 30 2 *", 0, "", "no day"},
	} {
		if _, err := Parse(c.expr, c.every, c.zone); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %v, %q) = %v, want an error saying %q", c.expr, c.every, c.zone, err, c.want)
		}
	}
}

func TestCronTicksInAZone(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "0 9 * * MON-FRI", 0, "Europe/Paris")
	// Friday 2026-12-04 08:00 UTC is 09:00 in Paris (UTC+1): the next
	// ticks skip the weekend.
	got := ticks(s, utc("2026-12-04T07:00:00Z"), 3)
	want := []string{"2026-12-04T08:00:00Z", "2026-12-07T08:00:00Z", "2026-12-08T08:00:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ticks %v, want %v", got, want)
	}
	if d := mustParse(t, "@daily", 0, ""); d.Next(utc("2026-12-04T07:00:00Z")) != utc("2026-12-05T00:00:00Z") {
		t.Fatalf("@daily: %v", d.Next(utc("2026-12-04T07:00:00Z")))
	}
}

// TestDaylightSaving: a wall time repeated when clocks go back fires once,
// at its first occurrence; one skipped when they go forward fires at the
// transition; in two zones, on both days.
func TestDaylightSaving(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, expr, zone, from string
		want                   []string
	}{
		// Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
		{"Paris spring forward, 02:30 does not exist", "30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		// Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 occurs twice.
		{"Paris fall back, 02:30 twice", "30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		// New York, 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC).
		{"New York spring forward, every quarter of the skipped hour", "*/15 2 * * *", "America/New_York", "2026-03-08T06:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"}},
		// New York, 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00 UTC).
		{"New York fall back, 01:30 twice", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"New York fall back, every minute of the repeated hour once", "59 1 * * *", "America/New_York", "2026-11-01T05:58:00Z",
			[]string{"2026-11-01T05:59:00Z", "2026-11-02T06:59:00Z"}},
	} {
		s := mustParse(t, c.expr, 0, c.zone)
		if got := ticks(s, utc(c.from), len(c.want)); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: ticks %v, want %v", c.name, got, c.want)
		}
	}
	// From inside the repeated hour's second occurrence, the next tick is
	// not that hour again.
	s := mustParse(t, "30 1 * * *", 0, "America/New_York")
	if got := s.Next(utc("2026-11-01T06:10:00Z")); got != utc("2026-11-02T06:30:00Z") {
		t.Errorf("from the second 01:10: %v", got)
	}
}

func TestEveryCountsFromTheEpoch(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "", 30*time.Second, "")
	got := ticks(s, utc("2026-12-01T09:00:10Z"), 3)
	want := []string{"2026-12-01T09:00:30Z", "2026-12-01T09:01:00Z", "2026-12-01T09:01:30Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ticks %v, want %v", got, want)
	}
	if n := s.Next(utc("2026-12-01T09:00:30Z")); n != utc("2026-12-01T09:01:00Z") {
		t.Fatalf("from a tick: %v, want the one after", n)
	}
}

func TestDueByPolicy(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "", time.Minute, "")
	next := utc("2026-12-01T09:00:00Z")
	for _, c := range []struct {
		name    string
		now     string
		policy  CatchUp
		max     int
		fire    []string
		skipped int
		stored  string
	}{
		{"not yet due", "2026-12-01T08:59:59Z", CatchUpNone, 0, nil, 0, "2026-12-01T09:00:00Z"},
		{"on time", "2026-12-01T09:00:01Z", CatchUpNone, 0, []string{"2026-12-01T09:00:00Z"}, 0, "2026-12-01T09:01:00Z"},
		{"none after an hour away", "2026-12-01T10:00:30Z", CatchUpNone, 0, nil, 61, "2026-12-01T10:01:00Z"},
		{"none, the latest within grace", "2026-12-01T10:00:05Z", CatchUpNone, 0, []string{"2026-12-01T10:00:00Z"}, 60, "2026-12-01T10:01:00Z"},
		{"latest", "2026-12-01T10:00:30Z", CatchUpLatest, 0, []string{"2026-12-01T10:00:00Z"}, 60, "2026-12-01T10:01:00Z"},
		{"all, bounded", "2026-12-01T10:00:30Z", CatchUpAll, 3, []string{"2026-12-01T09:58:00Z", "2026-12-01T09:59:00Z", "2026-12-01T10:00:00Z"}, 58, "2026-12-01T10:01:00Z"},
		{"all within the bound", "2026-12-01T09:01:30Z", CatchUpAll, 10, []string{"2026-12-01T09:00:00Z", "2026-12-01T09:01:00Z"}, 0, "2026-12-01T09:02:00Z"},
	} {
		d := Due(s, Pass{Next: next, Now: utc(c.now), Grace: 10 * time.Second, CatchUp: c.policy, MaxCatchUp: c.max})
		var fire []string
		for _, f := range d.Fire {
			fire = append(fire, f.Format(time.RFC3339))
		}
		if strings.Join(fire, " ") != strings.Join(c.fire, " ") || d.Skipped != c.skipped || d.Next != utc(c.stored) {
			t.Errorf("%s: fire %v skipped %d next %v; want %v, %d, %s", c.name, fire, d.Skipped, d.Next.Format(time.RFC3339), c.fire, c.skipped, c.stored)
		}
	}
}

// TestDueNoneFiresEveryTickOnTime: a pass a few periods late (a busy
// daemon, a lease handed over) fires each tick within grace under
// catch_up = "none"; only the ones past grace were missed.
func TestDueNoneFiresEveryTickOnTime(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "", time.Second, "")
	next := utc("2026-12-01T09:00:00Z")
	d := Due(s, Pass{Next: next, Now: next.Add(12 * time.Second), Grace: 10 * time.Second, CatchUp: CatchUpNone})
	if len(d.Fire) != 11 || d.Fire[0] != next.Add(2*time.Second) || d.Skipped != 2 || d.Next != next.Add(13*time.Second) {
		t.Fatalf("fire %v skipped %d next %v", d.Fire, d.Skipped, d.Next)
	}
}

// TestDueAfterALongAbsenceIsBounded: a year away at every = 1s walks a
// bounded number of ticks and still fires the latest.
func TestDueAfterALongAbsenceIsBounded(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "", time.Second, "")
	next := utc("2026-01-01T00:00:00Z")
	now := next.Add(30 * 24 * time.Hour)
	d := Due(s, Pass{Next: next, Now: now, CatchUp: CatchUpLatest})
	if len(d.Fire) != 1 || d.Fire[0] != now || d.Next != now.Add(time.Second) || d.Skipped != 30*24*3600 {
		t.Fatalf("fire %v skipped %d next %v", d.Fire, d.Skipped, d.Next)
	}
}
