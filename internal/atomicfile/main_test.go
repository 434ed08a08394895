package atomicfile

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

// Writes start no goroutines; the leak check, run after every package's
// tests, keeps it so.
func TestMain(m *testing.M) { testutil.Main(m) }
