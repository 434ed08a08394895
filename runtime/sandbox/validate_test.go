package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/sandbox"
)

// wideSchema is an array schema whose items are checked against n
// alternatives each, all of which the number 1 fails.
func wideSchema(n int) []byte {
	br := make([]string, n)
	for i := range br {
		br[i] = fmt.Sprintf(`{"type":"string","minLength":%d}`, i)
	}
	return []byte(`{"type":"array","items":{"anyOf":[` + strings.Join(br, ",") + `]}}`)
}

func ones(n int) []byte { return []byte("[" + strings.Repeat("1,", n-1) + "1]") }

// TestValidateSchema: a worker validates a value against a user's
// schema: accepted data is nil, refused data an *InvalidValueError, and a
// validation that would take a minute and gigabytes (within every bound
// registration puts on the schema) is ended by the worker's limits, and
// the next validation is answered by a fresh worker.
func TestValidateSchema(t *testing.T) {
	t.Parallel()
	p := newPool(t, sandbox.Config{Workers: 1, Timeout: 2 * time.Second})
	ctx := context.Background()
	wide := wideSchema(1000)
	if err := p.ValidateSchema(ctx, wide, []byte(`["a"]`)); err != nil {
		t.Fatalf("valid data: %v", err)
	}
	if err := p.ValidateSchema(ctx, wide, ones(3)); !flows.IsInvalidValue(err) || !strings.Contains(err.Error(), "want string") {
		t.Fatalf("three failing items: %v, want an InvalidValueError", err)
	}
	err := p.ValidateSchema(ctx, wide, ones(20_000))
	if l := flows.LimitOf(err); l != flows.LimitTime && l != flows.LimitMemory {
		t.Fatalf("20,000 items against 1,000 alternatives: %v, want the worker's time or memory limit", err)
	}
	if err := p.ValidateSchema(ctx, []byte(`{"type": 7}`), []byte(`1`)); err == nil || flows.IsInvalidValue(err) || flows.LimitOf(err) != "" {
		t.Fatalf("a schema that does not compile: %v, want the compiler's error", err)
	}
	if err := p.ValidateSchema(ctx, wide, ones(2)); !flows.IsInvalidValue(err) {
		t.Fatalf("after the bomb: %v", err)
	}
	if s := p.Stats(); s.Killed[flows.LimitTime]+s.Killed[flows.LimitMemory] != 1 {
		t.Fatalf("killed %v, want one worker killed", s.Killed)
	}
}
