package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// A wait on a run (GET /v1/runs/{id}?wait=, GET /v1/runs/{id}/wait, the
// CLI's run wait) is told of each change this engine commits to the run,
// instead of reading the run again and again (docs/design.md §6.4). The
// engine's store is wrapped (watchedStore) so that every Update remembers
// the runs its transaction wrote and, once it committed, wakes whoever
// watches them. A run's ancestors are woken with it, so a wait for a
// decision anywhere below a run hears of a child's park.
//
// Another daemon sharing the store commits without telling this one: on a
// shared store AwaitRun also reads the run again, backing off from
// awaitPollMin to awaitPollMax. A wait for the run's end alone on a store
// that announces ends (pgstore's LISTEN) is told of it instead, and reads
// the run again only every awaitEndFallback on the engine's clock, for an
// announcement lost (a full buffer, the listener reconnecting, a daemon
// of a release that does not announce ends).
const (
	awaitPollMin     = 10 * time.Millisecond
	awaitPollMax     = 200 * time.Millisecond
	awaitEndFallback = time.Second
)

// AwaitFor says what a wait held on a run (AwaitRun) waits for, and so
// which changes it must look for.
type AwaitFor int

const (
	// AwaitEnd: the run's end alone (any condition is met then too).
	AwaitEnd AwaitFor = iota
	// AwaitRecord: a change of the run's own record (a phase).
	AwaitRecord
	// AwaitElsewhere: a change the run's record may not show (a
	// decision opening in a descendant): the run is read again on a
	// timer wherever it is stored.
	AwaitElsewhere
)

// runWatchers is who watches which run.
type runWatchers struct {
	n  atomic.Int64 // watches open: a commit with none skips the lock
	mu sync.Mutex
	by map[string]map[chan struct{}]struct{}
}

// watch registers a channel woken (buffer of one: wakes coalesce) after
// each commit that writes run id.
func (w *runWatchers) watch(id string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.by == nil {
		w.by = map[string]map[chan struct{}]struct{}{}
	}
	set := w.by[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.by[id] = set
	}
	set[ch] = struct{}{}
	w.n.Add(1)
	w.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(set, ch)
			if len(set) == 0 { // a set is in the map for as long as it is not empty
				delete(w.by, id)
			}
			w.n.Add(-1)
			w.mu.Unlock()
		})
	}
}

// wake wakes the watchers of ids. It runs after the commit and reads the
// count after it too: a watcher registered before its first read of the
// run either sees the commit in that read or is counted here.
func (w *runWatchers) wake(ids []string) {
	if len(ids) == 0 || w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		for ch := range w.by[id] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// watchedStore is the engine's store: each Update records the runs it
// wrote and wakes their watchers once it committed. Optional abilities of
// the backend are asked of the unwrapped store and transaction (baseTx).
type watchedStore struct {
	store.Store
	w *runWatchers
}

func (s watchedStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	var ids []string
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		ids = ids[:0] // fn may run again after a conflict
		return fn(watchTx{Tx: tx, ids: &ids})
	})
	if err == nil {
		s.w.wake(ids)
	}
	return err
}

// TaskClaim passes a claim committed alone on to the store
// (store.Claimer): it writes no run.
func (s watchedStore) TaskClaim(ctx context.Context, p store.TaskClaimParams) ([]*store.Task, error) {
	return store.ClaimAlone(ctx, s.Store, p)
}

// watchTx notes the runs a transaction writes.
type watchTx struct {
	store.Tx
	ids *[]string
}

func (t watchTx) note(r *store.Run) {
	*t.ids = append(*t.ids, r.ID)
	*t.ids = append(*t.ids, r.Ancestors...)
}

func (t watchTx) RunInsert(r *store.Run) error {
	if err := t.Tx.RunInsert(r); err != nil {
		return err
	}
	t.note(r)
	return nil
}

func (t watchTx) RunUpdate(r *store.Run) error {
	if err := t.Tx.RunUpdate(r); err != nil {
		return err
	}
	t.note(r)
	return nil
}

func (t watchTx) RunDelete(id string) error {
	if err := t.Tx.RunDelete(id); err != nil {
		return err
	}
	*t.ids = append(*t.ids, id)
	return nil
}

// ContinuationPut wakes the run's watchers too: a decision opened or
// taken lives in the continuation.
func (t watchTx) ContinuationPut(runID string, data []byte) error {
	if err := t.Tx.ContinuationPut(runID, data); err != nil {
		return err
	}
	*t.ids = append(*t.ids, runID)
	return nil
}

// baseTx is the backend's own transaction under the engine's wrapping,
// for asking it of an optional ability (store.RunCounter, store.Roll).
func baseTx(tx store.Tx) store.Tx {
	if w, ok := tx.(watchTx); ok {
		return w.Tx
	}
	return tx
}

// AwaitRun reads owner's run id, and again after each change to it, until
// met says the wait is over, hold passes on the engine's clock, or ctx
// ends. It returns nil then (the caller tells them apart by what met last
// saw and by ctx); an error is a read's (E_NOT_FOUND for a run that is not
// owner's or is gone). what says which changes met waits for: those this
// engine does not commit itself (another daemon's, a descendant's) are
// looked for by reading the run again on a timer (awaitTimer).
func (e *Engine) AwaitRun(ctx context.Context, owner, id string, hold time.Duration, what AwaitFor, met func(ctx context.Context, run *store.Run) (bool, error)) error {
	changed, stop := e.watchers.watch(id)
	defer stop()
	var deadline <-chan time.Time
	if hold > 0 { // else met decides on the first read
		t := e.clock.NewTicker(hold)
		defer t.Stop()
		deadline = t.C()
	}
	look := &awaitLook{}
	if hold > 0 {
		look = awaitTimer(what, e.st.Capabilities().Shared, e.hearsFinishes, e.clock)
	}
	defer look.stop()
	for {
		run, err := e.Get(ctx, owner, id)
		if err != nil {
			return err
		}
		if done, err := met(ctx, run); done || err != nil || hold <= 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-deadline:
			return nil
		case <-changed:
		case <-look.C:
			look.again()
		}
	}
}

// awaitLook is when a wait reads the run again besides the commits it is
// told of: C is nil where every change it waits for is told.
type awaitLook struct {
	C      <-chan time.Time
	ticker clock.Ticker // the slow look for a lost end
	timer  *time.Timer  // the backing-off look
	every  time.Duration
}

// awaitTimer is the look of a wait for what: none where every change it
// waits for is told (one engine on its store); every awaitEndFallback on
// the engine's clock for the end alone on a store that announces ends;
// else backing off from awaitPollMin to awaitPollMax.
func awaitTimer(what AwaitFor, shared, hearsFinishes bool, clk clock.Clock) *awaitLook {
	switch {
	case what != AwaitElsewhere && !shared:
		return &awaitLook{}
	case what == AwaitEnd && hearsFinishes:
		t := clk.NewTicker(awaitEndFallback)
		return &awaitLook{C: t.C(), ticker: t}
	}
	t := time.NewTimer(awaitPollMin)
	return &awaitLook{C: t.C, timer: t, every: awaitPollMin}
}

// again sets the next look after one.
func (l *awaitLook) again() {
	if l.timer != nil {
		l.every = min(2*l.every, awaitPollMax)
		l.timer.Reset(l.every)
	}
}

func (l *awaitLook) stop() {
	if l.ticker != nil {
		l.ticker.Stop()
	}
	if l.timer != nil {
		l.timer.Stop()
	}
}
