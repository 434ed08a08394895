package engine

import "sync"

// queuedRuns is admission's view of the runs accepted and not yet started,
// by id, which MaxQueued bounds. A set rather than a counter: each run
// leaves it exactly once whichever way it goes (its first lease, a cancel,
// a drop), a run that was never in it (a fan-out's subflow child) cannot
// drive the count below the truth, and a lease takes its run out before
// the commit that shows the run "running", so a client who sees its run
// running is never refused on its account.
type queuedRuns struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// reserve adds id unless the set already holds max runs.
func (q *queuedRuns) reserve(id string, max int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ids) >= max {
		return false
	}
	q.ids[id] = struct{}{}
	return true
}

// restore puts back a run whose lease did not happen, whatever the limit:
// it was counted before and still is not started.
func (q *queuedRuns) restore(id string) {
	q.mu.Lock()
	q.ids[id] = struct{}{}
	q.mu.Unlock()
}

// remove takes id out and reports whether it was in.
func (q *queuedRuns) remove(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.ids[id]
	delete(q.ids, id)
	return ok
}

// reset replaces the set, at recovery.
func (q *queuedRuns) reset(ids []string) {
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	q.mu.Lock()
	q.ids = m
	q.mu.Unlock()
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
