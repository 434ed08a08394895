package engine

import "sync"

// queuedRuns is admission's view of the runs accepted and not yet started,
// by id, which MaxQueued bounds. A set rather than a counter: each run
// leaves it exactly once whichever way it goes (its first lease, a cancel,
// a drop), a run that was never in it (a fan-out's subflow child) cannot
// drive the count below the truth, and a lease takes its run out before
// the commit that shows the run "running", so a client who sees its run
// running is never refused on its account.
//
// Each run is held with its owner, so that an owner's own max_queued
// bounds its share of the queue (the daemon's MaxQueued bounds the sum).
type queuedRuns struct {
	mu      sync.Mutex
	ids     map[string]string // run id → owner
	byOwner map[string]int
}

// reserve adds id for owner unless the set already holds max runs
// (CodeQueueFull) or ownerMax of owner's (CodeOwnerQuota; 0: no bound of
// the owner's own). It returns the refusal's code, "" when id was added.
func (q *queuedRuns) reserve(id, owner string, max, ownerMax int) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ids) >= max {
		return CodeQueueFull
	}
	if ownerMax > 0 && q.byOwner[owner] >= ownerMax {
		return CodeOwnerQuota
	}
	q.addLocked(id, owner)
	return ""
}

func (q *queuedRuns) addLocked(id, owner string) {
	if q.ids == nil {
		q.ids, q.byOwner = map[string]string{}, map[string]int{}
	}
	if _, ok := q.ids[id]; ok {
		return
	}
	q.ids[id] = owner
	q.byOwner[owner]++
}

// restore puts back a run whose lease did not happen, whatever the limit:
// it was counted before and still is not started.
func (q *queuedRuns) restore(id, owner string) {
	q.mu.Lock()
	q.addLocked(id, owner)
	q.mu.Unlock()
}

// remove takes id out and reports whether it was in.
func (q *queuedRuns) remove(id string) bool {
	_, ok := q.take(id)
	return ok
}

// take takes id out and returns its owner, if it was in.
func (q *queuedRuns) take(id string) (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	owner, ok := q.ids[id]
	if !ok {
		return "", false
	}
	delete(q.ids, id)
	if q.byOwner[owner]--; q.byOwner[owner] <= 0 {
		delete(q.byOwner, owner)
	}
	return owner, true
}

// reset replaces the set with runs (run id → owner), at recovery.
func (q *queuedRuns) reset(runs map[string]string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids, q.byOwner = map[string]string{}, map[string]int{}
	for id, owner := range runs {
		q.addLocked(id, owner)
	}
}

// owners counts the runs not yet started by owner.
func (q *queuedRuns) owners() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.byOwner))
	for o, n := range q.byOwner {
		out[o] = n
	}
	return out
}

// len counts the runs not yet started.
func (q *queuedRuns) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ids)
}

// some returns up to n ids of the set, in no particular order (a map's):
// repeated calls cover the set without a cursor.
func (q *queuedRuns) some(n int) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, min(n, len(q.ids)))
	for id := range q.ids {
		if len(out) == n {
			break
		}
		out = append(out, id)
	}
	return out
}
