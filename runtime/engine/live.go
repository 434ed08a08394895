package engine

import (
	"maps"
	"slices"
	"sync"

	"github.com/weirhq/weir/runtime/store"
)

// liveWork is the work this process holds in memory: the tasks handed to
// a worker whose lease is not durable yet, the runs in a worker's hands
// (by run id), the fan-out children's calls (by task id), and the runs
// this engine withholds for lack of a tool. It has its own lock, which
// nothing outside it takes; a liveRun's own lock may be taken under it
// (cancelRuns), never the other way round.
type liveWork struct {
	mu         sync.Mutex
	dispatched map[string]bool
	runs       map[string]*liveRun
	items      map[string]*liveRun
	withheld   map[string]*withheldRun
	lastPins   map[string]string
}

func newLiveWork() *liveWork {
	return &liveWork{dispatched: map[string]bool{}, runs: map[string]*liveRun{}, items: map[string]*liveRun{}, withheld: map[string]*withheldRun{}}
}

// dispatch marks taskID as handed to a worker (or kept by one), so that
// no dispatch pass hands it to another.
func (l *liveWork) dispatch(taskID string) {
	l.mu.Lock()
	l.dispatched[taskID] = true
	l.mu.Unlock()
}

// undispatch ends dispatch's mark.
func (l *liveWork) undispatch(taskID string) {
	l.mu.Lock()
	delete(l.dispatched, taskID)
	l.mu.Unlock()
}

// isDispatched says taskID is handed to a worker.
func (l *liveWork) isDispatched(taskID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dispatched[taskID]
}

// inHand counts the tasks handed to workers.
func (l *liveWork) inHand() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.dispatched)
}

// taken says t is in a worker's hands: handed to one, or its run (its
// call, for a fan-out child or an agent call) held by one.
func (l *liveWork) taken(t *store.Task) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dispatched[t.ID] {
		return true
	}
	if t.Kind != store.TaskStep {
		return l.items[t.ID] != nil
	}
	return l.runs[t.RunID] != nil
}

// hold registers lr as the worker of t: a step task by its run, any other
// by its task id.
func (l *liveWork) hold(t *store.Task, lr *liveRun) {
	l.mu.Lock()
	if t.Kind != store.TaskStep {
		l.items[t.ID] = lr
	} else {
		l.runs[t.RunID] = lr
	}
	l.mu.Unlock()
}

// release ends hold, if lr still holds t.
func (l *liveWork) release(t *store.Task, lr *liveRun) {
	l.mu.Lock()
	if t.Kind != store.TaskStep {
		delete(l.items, t.ID)
	} else if l.runs[t.RunID] == lr {
		delete(l.runs, t.RunID)
	}
	l.mu.Unlock()
}

// holdRun registers lr as the worker of runID (a child run inside its
// parent's step).
func (l *liveWork) holdRun(runID string, lr *liveRun) {
	l.mu.Lock()
	l.runs[runID] = lr
	l.mu.Unlock()
}

// releaseRun ends holdRun, if lr still holds runID.
func (l *liveWork) releaseRun(runID string, lr *liveRun) {
	l.mu.Lock()
	if l.runs[runID] == lr {
		delete(l.runs, runID)
	}
	l.mu.Unlock()
}

// run is the worker holding runID, or nil.
func (l *liveWork) run(runID string) *liveRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[runID]
}

// ofRun is the worker holding runID (or nil) and those holding its
// fan-out children's calls.
func (l *liveWork) ofRun(runID string) (run *liveRun, items []*liveRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range l.items {
		if it.runID == runID {
			items = append(items, it)
		}
	}
	return l.runs[runID], items
}

// cancelItems cancels the calls of the fan-out children held as taskIDs.
func (l *liveWork) cancelItems(taskIDs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range taskIDs {
		if lr := l.items[id]; lr != nil {
			lr.cancel()
		}
	}
}

// cancelRuns marks the held runs of runIDs cancel-requested (but skip) and
// cancels their calls and their fan-out children's.
func (l *liveWork) cancelRuns(runIDs []string, skip *liveRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range runIDs {
		if lr := l.runs[id]; lr != nil && lr != skip {
			lr.markCancelled()
			lr.cancel()
		}
	}
	for _, lr := range l.items {
		if slices.Contains(runIDs, lr.runID) {
			lr.cancel()
		}
	}
}

// cancelTask cancels the worker of a task whose lease was lost: the
// fan-out child's call held as taskID, else the worker of runID.
func (l *liveWork) cancelTask(taskID, runID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lr := l.items[taskID]; lr != nil {
		lr.cancel()
	} else if lr := l.runs[runID]; lr != nil {
		lr.cancel()
	}
}

// cancelUnprotected cancels every held call that may be interrupted (the
// end of a drain's grace).
func (l *liveWork) cancelUnprotected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range []map[string]*liveRun{l.runs, l.items} {
		for _, lr := range m {
			if !lr.protected.Load() {
				lr.abandon()
			}
		}
	}
}

// withheldRun is a run this engine withholds: the tools it lacks, and
// whether it wrote the run's withheld event.
type withheldRun struct {
	missing []string
	noted   bool
}

// servedPins records the tools this engine serves (by pin); when they
// changed, every withheld run is decided again.
func (l *liveWork) servedPins(pins map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !maps.Equal(pins, l.lastPins) {
		clear(l.withheld)
		l.lastPins = pins
	}
}

// withheldKnown is what is remembered of runID withheld (nil if nothing).
func (l *liveWork) withheldKnown(runID string) *withheldRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.withheld[runID]
}

// withhold remembers that runID is withheld for lack of missing, keeping
// at most maxWithheldNoted runs.
func (l *liveWork) withhold(runID string, missing []string) *withheldRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.withheld[runID]
	if w == nil {
		if len(l.withheld) >= maxWithheldNoted {
			clear(l.withheld)
		}
		w = &withheldRun{missing: missing}
		l.withheld[runID] = w
	}
	return w
}

// noteOnce marks w noted and says whether it was already.
func (l *liveWork) noteOnce(w *withheldRun) (already bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	already, w.noted = w.noted, true
	return already
}

// cancelNotified stops the work held for a run whose cancel another
// daemon recorded (or this one: then it is already stopped). A worker
// past its finish decision, or that knows already, is left alone, as
// Cancel leaves it.
func (w *liveWork) cancelNotified(runID string) {
	// The held work's lock is let go before a run's lock is taken.
	l, items := w.ofRun(runID)
	if l != nil {
		if l.requestCancel() {
			l.cancel()
		}
	}
	for _, it := range items {
		it.cancel()
	}
}
