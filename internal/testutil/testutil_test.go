package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	Eventually(t, 30*time.Second, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

// fatalTB records the failure instead of failing the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalMessage runs fn on its own goroutine with a TB whose Fatalf ends
// that goroutine, and returns the message fn failed with ("" if none).
func fatalMessage(t *testing.T, fn func(f testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	t.Parallel()
	msg := fatalMessage(t, func(f testing.TB) {
		Eventually(f, 20*time.Millisecond, func() error { return errors.New("still not") })
	})
	if !strings.Contains(msg, "still not") {
		t.Fatalf("failure message %q does not carry the condition's error", msg)
	}
}

func TestPluginMustBeDeclared(t *testing.T) {
	t.Parallel()
	msg := fatalMessage(t, func(f testing.TB) { Plugin(f, "testkit") })
	if !strings.Contains(msg, "not declared") {
		t.Fatalf("asking for an undeclared plugin: %q", msg)
	}
}
