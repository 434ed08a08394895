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

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	t.Parallel()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(f, 20*time.Millisecond, func() error { return errors.New("still not") })
	}()
	<-done
	if !strings.Contains(f.msg, "still not") {
		t.Fatalf("failure message %q does not carry the condition's error", f.msg)
	}
}

func TestPluginMustBeDeclared(t *testing.T) {
	t.Parallel()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Plugin(f, "testkit")
	}()
	<-done
	if !strings.Contains(f.msg, "not declared") {
		t.Fatalf("asking for an undeclared plugin: %q", f.msg)
	}
}
