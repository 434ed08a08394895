package sandbox_test

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

// The tests' workers are the weir binary, as the daemon's are.
func TestMain(m *testing.M) { testutil.Main(m, testutil.Weir()) }
