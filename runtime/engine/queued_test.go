package engine

import "testing"

// TestQueuedRunsLeaveOnce: a run leaves the set once whichever way it goes,
// a run never in it leaves nothing behind, and the bound holds.
func TestQueuedRunsLeaveOnce(t *testing.T) {
	t.Parallel()
	q := queuedRuns{}
	if q.reserve("a", "o", 2, 0) != "" || q.reserve("b", "o", 2, 0) != "" {
		t.Fatal("two runs under a bound of two refused")
	}
	if q.reserve("c", "o", 2, 0) == "" {
		t.Fatal("a third run over a bound of two reserved")
	}
	if !q.remove("a") || q.remove("a") {
		t.Fatal("a run left the set twice, or not once")
	}
	if q.remove("child") {
		t.Fatal("a run never reserved (a fan-out's subflow child) left the set")
	}
	if q.reserve("c", "o", 2, 0) != "" || q.len() != 2 {
		t.Fatalf("after one left: %d runs, want room for one more and 2 in all", q.len())
	}
	q.restore("a", "o") // a lease that did not happen, over the bound
	if q.len() != 3 {
		t.Fatalf("restore: %d runs, want 3", q.len())
	}
	q.reset(map[string]string{"x": "o"})
	if q.len() != 1 || !q.remove("x") {
		t.Fatal("reset did not replace the set")
	}
}

// An owner's own bound refuses that owner alone with E_OWNER_QUOTA, the
// daemon's bound anyone with E_QUEUE_FULL, and a run leaving gives its
// owner's place back.
func TestQueuedRunsPerOwner(t *testing.T) {
	t.Parallel()
	q := queuedRuns{}
	for _, id := range []string{"a1", "a2"} {
		if code := q.reserve(id, "alice", 4, 2); code != "" {
			t.Fatalf("alice's %s refused under her bound of 2: %s", id, code)
		}
	}
	if code := q.reserve("a3", "alice", 4, 2); code != CodeOwnerQuota {
		t.Fatalf("alice's third run: %q, want %s", code, CodeOwnerQuota)
	}
	if code := q.reserve("b1", "bob", 4, 2); code != "" {
		t.Fatalf("bob refused for alice's quota: %s", code)
	}
	if code := q.reserve("c1", "carol", 3, 0); code != CodeQueueFull {
		t.Fatalf("over the daemon's bound: %q, want %s", code, CodeQueueFull)
	}
	if got := q.owners(); got["alice"] != 2 || got["bob"] != 1 || len(got) != 2 {
		t.Fatalf("owners = %v", got)
	}
	if owner, ok := q.take("a1"); !ok || owner != "alice" {
		t.Fatalf("take = %q %v", owner, ok)
	}
	if code := q.reserve("a3", "alice", 4, 2); code != "" {
		t.Fatalf("alice's run after one of hers left: %s", code)
	}
}
