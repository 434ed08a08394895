package mcpserver

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// A budget wait is ended by its owner's raise, not a decision: the
// waiting answer says so with the command, instead of naming the approve
// tool; a runaway wait is decided like an approval.
func TestBudgetWaitIsSettledByARaise(t *testing.T) {
	t.Parallel()
	w := apitypes.HumanWait{ID: "a@1.budget.1", Kind: apitypes.WaitBudget, RunID: "run_1", Node: "a", Shown: []byte(`{"needed":2}`)}
	if !settledByOps(w) || w.NeedsDecision() {
		t.Errorf("a budget wait: settledByOps %v, NeedsDecision %v", settledByOps(w), w.NeedsDecision())
	}
	if tool, line := howToEnd("run_1", w); tool != RaiseBudgetTool || !strings.Contains(line, "weir run budget run_1 --add N") || !strings.Contains(line, RaiseBudgetTool) {
		t.Errorf("howToEnd %q %q", tool, line)
	}
	r := apitypes.HumanWait{ID: "a@1.runaway.1", Kind: apitypes.WaitRunaway, RunID: "run_1", Node: "a"}
	if settledByOps(r) || !r.NeedsDecision() {
		t.Errorf("a runaway wait: settledByOps %v, NeedsDecision %v", settledByOps(r), r.NeedsDecision())
	}
}
