package engine

import (
	"encoding/json"
	"testing"

	"github.com/weirhq/weir/runtime/store"
)

const toolTimeoutSrc = `
flow(name = "bounded_wait", nodes = [task("t", tool = "testkit.bounded", args = {"wait": True})])
flow(name = "bounded_look", nodes = [task("t", tool = "testkit.bounded", args = {"wait": False})])
flow(name = "bounded_own", nodes = [task("t", tool = "testkit.bounded", args = {"wait": False}, timeout = "2m")])
`

// TestToolDefaultTimeoutBoundsANodeWithout: a node that sets no timeout
// calling a tool that declares one (testkit.bounded, 500ms) is bounded by
// the tool's, not by the engine's five minutes; a node's own timeout
// still wins.
func TestToolDefaultTimeoutBoundsANodeWithout(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, toolTimeoutSrc)

	run := b.waitTerminal(t, b.start(t, "bounded_wait", `{}`, ""))
	wantFailed(t, run, "E_TOOL_DEADLINE")

	deadlineMS := func(flow string) int64 {
		t.Helper()
		run := b.waitTerminal(t, b.start(t, flow, `{}`, ""))
		if run.Phase != store.PhaseCompleted {
			t.Fatalf("%s ended %s %+v", flow, run.Phase, run.Error)
		}
		var out struct {
			DeadlineMS *int64 `json:"deadline_ms"`
		}
		if err := json.Unmarshal(run.Output, &out); err != nil || out.DeadlineMS == nil {
			t.Fatalf("%s output %s: %v", flow, run.Output, err)
		}
		return *out.DeadlineMS
	}
	if ms := deadlineMS("bounded_look"); ms > 500 {
		t.Errorf("a node without timeout gave the call %dms, want the tool's 500ms at most", ms)
	}
	if ms := deadlineMS("bounded_own"); ms <= 500 || ms > 120000 {
		t.Errorf("a node with timeout 2m gave the call %dms", ms)
	}
}
