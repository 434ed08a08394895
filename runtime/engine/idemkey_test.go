package engine

import (
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// TestIdemKeyOneSpelling: a fan-out item's call (item.go) and the cohort's
// look-up of its record (itemKey) spell the key the same way, and a task
// node's and an agent call's keys are the same function's.
func TestIdemKeyOneSpelling(t *testing.T) {
	t.Parallel()
	run, node := &store.Run{ID: "run_a"}, &flows.Node{ID: "fan"}
	item := &toolCall{Run: run, Node: node, Visit: 2, Index: []int{7}}
	if got, want := item.key(), itemKey(&store.Cohort{RunID: "run_a", Node: "fan", Visit: 2}, 7); got != want || got != "run_a/fan/2/7" {
		t.Fatalf("an item's call key %q, the cohort's %q", got, want)
	}
	for _, tt := range []struct {
		c    *toolCall
		want string
	}{
		{&toolCall{Run: run, Node: node, Visit: 1}, "run_a/fan/1"},
		{&toolCall{Run: run, Node: node, Visit: 1, Index: []int{3, 0}}, "run_a/fan/1/3/0"},
	} {
		if got := tt.c.key(); got != tt.want {
			t.Errorf("key %q, want %q", got, tt.want)
		}
	}
}
