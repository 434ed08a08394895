package storemetrics

import (
	"testing"

	weirtest "github.com/weirhq/weir/internal/testutil"
)

// The wrapped Badger store is closed by every test: none of its
// goroutines may outlive them.
func TestMain(m *testing.M) { weirtest.Main(m) }
