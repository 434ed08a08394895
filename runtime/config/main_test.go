package config

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

// Loading and reloading start no goroutines of their own; the leak check
// keeps it so.
func TestMain(m *testing.M) { testutil.Main(m) }
