package telemetry

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

// An Exporter's batch processor runs goroutines; Shutdown must end them.
func TestMain(m *testing.M) { testutil.Main(m) }
