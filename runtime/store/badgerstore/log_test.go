package badgerstore

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/internal/testutil"
)

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
		var out testutil.Buffer
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
