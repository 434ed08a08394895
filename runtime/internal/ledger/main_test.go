package ledger

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

// The ledger is shared by the engine's goroutines; none of its own may
// outlive a test.
func TestMain(m *testing.M) { testutil.Main(m) }
