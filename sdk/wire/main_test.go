package wire

import (
	"testing"

	"go.uber.org/goleak"
)

// Schema checks start no goroutines; the leak check keeps it so. It uses
// goleak directly, not the main module's test helpers: the SDK is built
// by vendors outside this module.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
