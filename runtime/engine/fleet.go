package engine

import (
	"github.com/weirhq/weir/runtime/store"
)

// Several daemons on one shared store (docs/design.md §10): the store's
// transactions keep them apart (a task's claim, its lease's fence and the
// rescue of its lease are serialized against each other), and a store that
// is a store.Waker tells each engine of the writes it must act on. Wake-ups
// kick the scheduler; the tick (Tick) stays the fallback for a lost one. A
// cancel recorded by another daemon stops the work this one holds; the
// lease renewal, which reads the run, is the fallback for a lost cancel.

// followWakes passes the store's announcements to the scheduler until
// Stop.
func (e *Engine) followWakes(wakes <-chan store.Wake) {
	for {
		select {
		case <-e.stop:
			return
		case w := <-wakes:
			if w.CancelRunID != "" {
				e.cancelNotified(w.CancelRunID)
				continue
			}
			e.kick()
		}
	}
}

// cancelNotified stops the work this engine holds for a run whose cancel
// another daemon recorded (or this one: then it is already stopped). A
// worker past its finish decision, or that knows already, is left alone,
// as Cancel leaves it.
func (e *Engine) cancelNotified(runID string) {
	// e.mu is let go before a run's lock is taken: Cancel holds the run's
	// lock while it takes e.mu.
	e.mu.Lock()
	l := e.live[runID]
	var items []*liveRun
	for _, it := range e.items {
		if it.runID == runID {
			items = append(items, it)
		}
	}
	e.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		act := !l.completing && !l.cancelRequested
		if act {
			l.cancelRequested = true
		}
		l.mu.Unlock()
		if act {
			l.cancel()
		}
	}
	for _, it := range items {
		it.cancel()
	}
}
