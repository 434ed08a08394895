package engine

import (
	"testing"

	"github.com/weirhq/weir/runtime/store"
)

// TestLiveWork: a step task is held by its run, a fan-out child's or an
// agent call's by its task; letting go of a run another worker took over
// leaves the other's hold; a dispatched task is taken before any hold;
// the withheld runs are forgotten when the served tools change, and
// noted once.
func TestLiveWork(t *testing.T) {
	t.Parallel()
	l := newLiveWork()
	step := &store.Task{ID: "task_s", RunID: "run_a", Kind: store.TaskStep}
	item := &store.Task{ID: "task_i", RunID: "run_a", Kind: store.TaskItem}
	other := &store.Task{ID: "task_o", RunID: "run_b", Kind: store.TaskStep}
	if l.taken(step) || l.taken(item) {
		t.Fatal("taken before anything is held")
	}
	l.dispatch(other.ID)
	if !l.taken(other) || !l.isDispatched(other.ID) || l.inHand() != 1 {
		t.Fatal("a dispatched task is not taken")
	}
	l.undispatch(other.ID)
	first, second := &liveRun{runID: "run_a"}, &liveRun{runID: "run_a"}
	l.hold(step, first)
	l.hold(item, &liveRun{runID: "run_a"})
	if !l.taken(step) || !l.taken(item) || l.taken(other) {
		t.Fatal("held tasks are not taken, or another run's is")
	}
	if run, items := l.ofRun("run_a"); run != first || len(items) != 1 {
		t.Fatalf("ofRun: %v and %d items", run, len(items))
	}
	l.holdRun("run_a", second) // a child inside its parent's step took the run id over
	l.release(step, first)
	if l.run("run_a") != second {
		t.Fatal("letting go of a run another worker holds removed the other's hold")
	}
	l.releaseRun("run_a", second)
	l.release(item, nil)
	if l.taken(step) || l.taken(item) {
		t.Fatal("still taken after release")
	}

	w := l.withhold("run_w", []string{"x.y"})
	if l.withheldKnown("run_w") != w || l.noteOnce(w) || !l.noteOnce(w) {
		t.Fatal("a withheld run is not remembered, or not noted once")
	}
	l.servedPins(map[string]string{"x": "1"})
	if l.withheldKnown("run_w") != nil {
		t.Fatal("withheld runs kept after the served tools changed")
	}
	l.withhold("run_w", nil)
	l.servedPins(map[string]string{"x": "1"})
	if l.withheldKnown("run_w") == nil {
		t.Fatal("withheld runs forgotten though the served tools did not change")
	}
}
