package textbound

import (
	"strings"
	"sync"
	"testing"
)

// A tail keeps the last bytes up to its bound, whatever the writes' sizes,
// and answers every write whole.
func TestTailKeepsTheLastBytes(t *testing.T) {
	t.Parallel()
	tail := NewTail(8)
	for _, w := range []string{"abc", "defghij", "", "klmnopqrstuvwxyz", "0"} {
		if n, err := tail.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("write %q: %d %v", w, n, err)
		}
	}
	if got := tail.String(); got != "tuvwxyz0" {
		t.Errorf("tail %q, want the last 8 bytes tuvwxyz0", got)
	}
	short := NewTail(100)
	_, _ = short.Write([]byte("short"))
	if got := short.String(); got != "short" {
		t.Errorf("tail %q, want all of a shorter text", got)
	}
}

// Writers on several goroutines share one tail (run with -race).
func TestTailConcurrentWrites(t *testing.T) {
	t.Parallel()
	tail := NewTail(64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = tail.Write([]byte("xy"))
			}
		}()
	}
	wg.Wait()
	if got := tail.String(); got != strings.Repeat("xy", 32) {
		t.Errorf("tail %q, want the last 64 bytes", got)
	}
}
