package panics

import (
	"errors"
	"strings"
	"testing"
)

func TestCatch(t *testing.T) {
	t.Parallel()
	want := errors.New("plain")
	if err := Catch("nothing", func() error { return want }); err != want {
		t.Fatalf("an error is returned as is: %v", err)
	}
	if err := Catch("nothing", func() error { return nil }); err != nil {
		t.Fatalf("no error: %v", err)
	}
	err := Catch("offering flow x", func() error { panic(errors.New("bad schema")) })
	var pe *Error
	if !errors.As(err, &pe) || pe.What != "offering flow x" || pe.Value != "bad schema" || !strings.Contains(pe.Stack, "panics_test.go") {
		t.Fatalf("a panic: %#v", err)
	}
	if err.Error() != "offering flow x panicked: bad schema" {
		t.Fatalf("text %q", err)
	}
}

// A panic value that quotes megabytes of user data is cut.
func TestCatchBoundsTheValue(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	for _, v := range []any{big, errors.New(big), []byte(big)} {
		err := Catch("rendering", func() error { panic(v) })
		var pe *Error
		if !errors.As(err, &pe) || len(pe.Value) > MaxValueBytes || len(pe.Stack) > maxStackBytes {
			t.Fatalf("%T: value %d bytes, stack %d", v, len(pe.Value), len(pe.Stack))
		}
	}
	// A nil-pointer dereference is a runtime error, caught the same way.
	var m map[string]*int
	err := Catch("deref", func() error { _ = *m["x"]; return nil })
	if err == nil || !strings.Contains(err.Error(), "nil pointer") {
		t.Fatalf("runtime panic: %v", err)
	}
}
