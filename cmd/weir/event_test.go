package main

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// weir event ls says what each trigger did with an event: the run it
// started, why it started none, or that its start is still to come.
func TestPrintOwnerEventsSaysWhatEachTriggerDid(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printOwnerEvents(&b, []apitypes.OwnerEvent{
		{Seq: 1, ID: "d-1", Name: "github.issues", Key: "42", AcceptedAt: time.Unix(0, 0),
			Started: []apitypes.EventStart{{Trigger: "opened", RunID: "run_1"}, {Trigger: "labeled", Skipped: "filtered out"}}},
		{Seq: 2, ID: "d-2", Name: "github.issues", AcceptedAt: time.Unix(0, 0), Delivered: []string{"run_2/w@1"}, TriggersPending: true},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", b.String())
	}
	if !strings.Contains(lines[1], "kept") || !strings.HasSuffix(lines[1], "run_1 labeled skipped (filtered out)") {
		t.Errorf("the first event's row: %q", lines[1])
	}
	if !strings.Contains(lines[2], " 1 ") || !strings.HasSuffix(lines[2], "(pending)") {
		t.Errorf("the second event's row: %q", lines[2])
	}
}
