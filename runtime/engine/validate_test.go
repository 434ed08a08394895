package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/sandbox"
)

// wideSrc declares a flow whose input schema passes registration's bounds
// (1,000 alternatives per item) and a parent that starts it with 20,000
// items (literal args: no callable to evaluate under the pool's short
// deadline, only the child's validation).
const wideSrc = `
WIDE = {"type": "object", "properties": {"items": {"type": "array", "items": {"anyOf": [{"type": "string", "minLength": i} for i in range(1000)]}}}}
flow(name = "wide", input = WIDE, nodes = [task("t", tool = "kit.echo")])
flow(name = "wide_parent", nodes = [
    subflow("call", flow = "wide", args = {"items": [1] * 20000}),
])
`

// TestUnitCostlyValidationRunsInTheSandbox: validating a user's data
// against a user's schema that would take the daemon a minute and
// gigabytes (20,000 items against 1,000 alternatives) runs in a sandbox
// worker and ends at its deadline as that user's E_BAD_INPUT, for a run's
// start and for a child's input alike; a usual validation still answers
// from the daemon's process, and the run behind the bomb completes.
func TestUnitCostlyValidationRunsInTheSandbox(t *testing.T) {
	t.Parallel()
	// The deadline ends the bombs (each would take a minute); it must
	// also leave the parent's step time to load wideSrc in a fresh worker
	// (its args constant is evaluated there), which on a loaded machine
	// under -race took past 2 s.
	pool, err := sandbox.New(sandbox.Config{Workers: 1, Timeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	b := setupUnit(t, Config{Scripts: callsIn{pool}}, wideSrc)
	bomb := "[" + strings.Repeat("1,", 20_000) + "1]"

	_, err = b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "wide", Input: json.RawMessage(`{"items": ` + bomb + `}`)})
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != CodeBadInput || !strings.Contains(ee.Message, "sandbox's limits") {
		t.Fatalf("start with 20,000 failing items: %v, want E_BAD_INPUT ended by the sandbox's limits", err)
	}
	_, err = b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "wide", Input: json.RawMessage(`{"items": [1]}`)})
	if !errors.As(err, &ee) || ee.Code != CodeBadInput || !strings.Contains(ee.Message, "want string") {
		t.Fatalf("start with one failing item: %v, want E_BAD_INPUT saying why", err)
	}

	parent := b.start(t, "wide_parent", `{}`, "")
	ok := b.start(t, "wide", `{"items": ["fine"]}`, "")
	if r := b.waitTerminal(t, ok); r.Error != nil {
		t.Fatalf("a valid start: %+v", r.Error)
	}
	r := b.waitTerminal(t, parent)
	if r.Error == nil || r.Error.Code != CodeBadInput || !strings.Contains(r.Error.Message, "sandbox's limits") {
		t.Fatalf("a child's input of 20,000 failing items: %+v, want E_BAD_INPUT ended by the sandbox's limits", r.Error)
	}
	if s := pool.Stats(); s.Killed["time"]+s.Killed["memory"] < 2 {
		t.Fatalf("workers killed %v, want the two bombs'", s.Killed)
	}
}
