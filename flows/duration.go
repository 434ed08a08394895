package flows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ParseDuration parses a duration as flows write it: Go's time.ParseDuration
// syntax ("1h30m", "10m", "30s", "250ms") plus a day suffix "d" worth 24
// hours ("30d", "1d12h"). A flow waits on humans for days, so days are
// first-class; there is no month or year because their length varies.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	if s == "" {
		return 0, errors.New(`empty duration (write e.g. "30s", "10m", "2h" or "30d")`)
	}
	neg := false
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		s = s[1:]
	}
	// Split off a leading "<digits>d" day component; the rest is Go syntax.
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n := 0
		if i == 0 {
			return 0, fmt.Errorf("invalid duration %q", orig)
		}
		for _, c := range s[:i] {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("invalid duration %q: days must be a whole number", orig)
			}
			n = n*10 + int(c-'0')
			if n > 106751 { // about the most days a time.Duration holds
				return 0, fmt.Errorf("invalid duration %q: too long", orig)
			}
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
	}
	var rest time.Duration
	if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || strings.ContainsAny(s, "+-") {
			return 0, fmt.Errorf("invalid duration %q (write e.g. \"30s\", \"10m\", \"2h\" or \"30d\")", orig)
		}
		rest = d
	}
	total := days + rest
	if total < days { // overflow
		return 0, fmt.Errorf("invalid duration %q: too long", orig)
	}
	if neg {
		total = -total
	}
	return total, nil
}

// FormatDuration prints d in the shortest form ParseDuration reads back,
// using days for whole multiples of 24 hours ("30d", "1d2h0m0s", "10m0s").
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	const day = 24 * time.Hour
	if d >= day {
		days, rest := d/day, d%day
		if rest == 0 {
			return fmt.Sprintf("%s%dd", sign, days)
		}
		return fmt.Sprintf("%s%dd%s", sign, days, rest)
	}
	return sign + d.String()
}

// jsonDuration is a time.Duration that encodes as a string such as "10m0s"
// or "30d", so that stored IR stays readable.
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(FormatDuration(time.Duration(d)))
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = jsonDuration(v)
	return nil
}
