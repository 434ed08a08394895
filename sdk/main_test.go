package sdk_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Serving a plugin starts goroutines; none may outlive a test. This
// package uses goleak directly, not the main module's test helpers: the
// SDK is built by vendors outside this module.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
