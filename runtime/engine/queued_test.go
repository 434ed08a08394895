package engine

import "testing"

// TestQueuedRunsLeaveOnce: a run leaves the set once whichever way it goes,
// a run never in it leaves nothing behind, and the bound holds.
func TestQueuedRunsLeaveOnce(t *testing.T) {
	t.Parallel()
	q := queuedRuns{ids: map[string]struct{}{}}
	if !q.reserve("a", 2) || !q.reserve("b", 2) {
		t.Fatal("two runs under a bound of two refused")
	}
	if q.reserve("c", 2) {
		t.Fatal("a third run over a bound of two reserved")
	}
	if !q.remove("a") || q.remove("a") {
		t.Fatal("a run left the set twice, or not once")
	}
	if q.remove("child") {
		t.Fatal("a run never reserved (a fan-out's subflow child) left the set")
	}
	if !q.reserve("c", 2) || q.len() != 2 {
		t.Fatalf("after one left: %d runs, want room for one more and 2 in all", q.len())
	}
	q.restore("a") // a lease that did not happen, over the bound
	if q.len() != 3 {
		t.Fatalf("restore: %d runs, want 3", q.len())
	}
	q.reset([]string{"x"})
	if q.len() != 1 || !q.remove("x") {
		t.Fatal("reset did not replace the set")
	}
}
