package luafront_test

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

// Loading compiles files on several goroutines; none may outlive the load.
func TestMain(m *testing.M) { testutil.Main(m) }
