package daemon

import (
	"errors"
	"math"
	"testing"
)

// TestFailOnce: of a streak of failed readings only the first is passed
// on; the rest report no shortage; a success ends the streak, so the next
// failure is passed on again.
func TestFailOnce(t *testing.T) {
	t.Parallel()
	errMissing := errors.New("no such file or directory")
	readings := []struct {
		n   int64
		err error
	}{{0, errMissing}, {0, errMissing}, {0, errMissing}, {42, nil}, {0, errMissing}, {0, errMissing}}
	want := []struct {
		n      int64
		failed bool
	}{{0, true}, {math.MaxInt64, false}, {math.MaxInt64, false}, {42, false}, {0, true}, {math.MaxInt64, false}}
	i := 0
	read := failOnce(func() (int64, error) { r := readings[i]; return r.n, r.err })
	for i = range readings {
		n, err := read()
		if n != want[i].n || (err != nil) != want[i].failed {
			t.Errorf("reading %d: %d, %v; want %d, failed %v", i, n, err, want[i].n, want[i].failed)
		}
	}
}
