package sdk_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Calls run tools on goroutines of their own; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
