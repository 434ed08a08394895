package hooks

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

// The handler starts no goroutines of its own; the leak check keeps it so.
func TestMain(m *testing.M) { testutil.Main(m) }
