package badgerstore

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// syncBuffer is a bytes.Buffer safe for Badger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBadgerLogsThroughHclog checks that Badger's routine messages reach
// the hclog logger at Debug (not Info), so a logger at Info stays quiet.
func TestBadgerLogsThroughHclog(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		level hclog.Level
		quiet bool
	}{
		{hclog.Debug, false},
		{hclog.Info, true},
	} {
		var out syncBuffer
		logger := hclog.New(&hclog.LoggerOptions{Name: "store", Level: c.level, Output: &out})
		s, err := Open(t.TempDir(), Options{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if c.quiet && got != "" {
			t.Fatalf("logger at %s printed Badger's routine messages:\n%s", c.level, got)
		}
		if !c.quiet && !strings.Contains(got, "[DEBUG] store:") {
			t.Fatalf("logger at %s got no Badger message at DEBUG:\n%s", c.level, got)
		}
	}
}
