package pgtest

import (
	"errors"
	"strings"
	"testing"
)

// TestStatus: unreachable is one line that says the tests are skipped and
// why, or an error where they are required.
func TestStatus(t *testing.T) {
	unreachable := errors.New("PostgreSQL at postgres://root@127.0.0.1:1/test is not reachable: " +
		oneLine(errors.New("failed to connect:\n\t127.0.0.1:1: connection refused\n\t127.0.0.1:1: connection refused")))
	line, err := status(unreachable, false)
	if err != nil || strings.Count(line, "\n") != 0 || !strings.Contains(line, "SKIPPED") ||
		strings.Count(line, "connection refused") != 1 || !strings.Contains(line, EnvMode+"=required") {
		t.Fatalf("status when unreachable: %q, %v", line, err)
	}
	if _, err := status(unreachable, true); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("status when required and unreachable: %v, want an error", err)
	}
	if line, err := status(nil, true); err != nil || !strings.HasPrefix(line, "PostgreSQL tests: running on ") {
		t.Fatalf("status when reachable: %q, %v", line, err)
	}
}
