// Package ticks reads a schedule's firings back from the runs they
// started, for the benchmark driver and the soak: a firing's run carries a
// request id derived from the schedule and the tick
// (schedule:NAME:<tick in RFC 3339>), so the runs alone say which ticks
// fired, how often, and how late, even after the store has let the
// schedule's own firing records go (it keeps the latest ten).
package ticks

import (
	"fmt"
	"strings"
	"time"
)

// prefix starts the request id of every run a schedule starts.
const prefix = "schedule:"

// Parse reads the schedule name and the tick of a firing's request id; ok
// is false for a request id no schedule derived (a client's, or one hashed
// because the name made it too long).
func Parse(requestID string) (name string, tick time.Time, ok bool) {
	rest, found := strings.CutPrefix(requestID, prefix)
	if !found {
		return "", time.Time{}, false
	}
	// A schedule's name holds no ':' (the rule of flow names); the tick
	// after it does.
	name, at, found := strings.Cut(rest, ":")
	if !found || name == "" {
		return "", time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return "", time.Time{}, false
	}
	return name, t, true
}

// Every declares n schedules NAME0 … NAME(n-1) starting flow every period,
// one per line, in the flow language shared by Starlark and the bench's
// files.
func Every(name, flow, period string, from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "schedule(%q, flow = %q, every = %q)\n", fmt.Sprintf("%s%d", name, i), flow, period)
	}
	return b.String()
}
