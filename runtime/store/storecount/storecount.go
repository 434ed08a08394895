// Package storecount counts what a store's transactions read: every read
// method called, and the records it returned (a list of 100 records is one
// read of 100 records). It wraps any store.Store, so a test or a benchmark
// can say what a path costs in reads — the same at turn 1 and turn 100 of
// an agent, say — on the real backend, without timing anything.
//
// A wrapped transaction keeps the store.RunCounter ability of the one it
// wraps; other optional abilities (those of a shared store) are hidden,
// and the engine takes its fallbacks for them.
package storecount

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Store is a store.Store whose reads are counted.
type Store struct {
	store.Store
	mu    sync.Mutex
	reads map[string]Count
}

var _ store.Store = (*Store)(nil)

// Count is what one read method (or all of them) did.
type Count struct {
	// Calls is how many times it was called; Records how many records
	// it returned (one for a get that found its record, none for one
	// that did not, the length of a list).
	Calls, Records int64
}

// Add is c and d together.
func (c Count) Add(d Count) Count { return Count{c.Calls + d.Calls, c.Records + d.Records} }

// Sub is what c counts beyond d: the reads between two snapshots.
func (c Count) Sub(d Count) Count { return Count{c.Calls - d.Calls, c.Records - d.Records} }

// New wraps st.
func New(st store.Store) *Store { return &Store{Store: st, reads: map[string]Count{}} }

// Update counts the reads of fn's transaction.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(s.wrap(tx)) })
}

// View counts the reads of fn's transaction.
func (s *Store) View(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.View(ctx, func(tx store.Tx) error { return fn(s.wrap(tx)) })
}

// Reads is a snapshot of the counts so far, by read method.
func (s *Store) Reads() map[string]Count {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.reads)
}

// Total is every read method's count so far, together.
func (s *Store) Total() Count {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t Count
	for _, c := range s.reads {
		t = t.Add(c)
	}
	return t
}

func (s *Store) wrap(t store.Tx) store.Tx {
	w := &tx{Tx: t, s: s}
	if rc, ok := t.(store.RunCounter); ok {
		return &runCounterTx{tx: w, rc: rc}
	}
	return w
}

func (s *Store) count(method string, records int) {
	s.mu.Lock()
	c := s.reads[method]
	c.Calls++
	c.Records += int64(records)
	s.reads[method] = c
	s.mu.Unlock()
}

// one counts a get: one record if it found it.
func one[T any](s *Store, method string, v T, err error) (T, error) {
	n := 0
	if err == nil {
		n = 1
	}
	s.count(method, n)
	return v, err
}

// list counts a list: its length.
func list[T any](s *Store, method string, vs []T, err error) ([]T, error) {
	s.count(method, len(vs))
	return vs, err
}

// tx is a store.Tx whose read methods count; its writes pass through.
type tx struct {
	store.Tx
	s *Store
}

type runCounterTx struct {
	*tx
	rc store.RunCounter
}

func (t *runCounterTx) RunCount(phase store.Phase) (int, error) {
	n, err := t.rc.RunCount(phase)
	return one(t.s, "RunCount", n, err)
}

func (t *runCounterTx) OwnerRunCount(owner string, phase store.Phase) (int, error) {
	n, err := t.rc.OwnerRunCount(owner, phase)
	return one(t.s, "OwnerRunCount", n, err)
}

func (t *tx) FlowVersionGet(name, hash string) (*store.FlowVersion, error) {
	v, err := t.Tx.FlowVersionGet(name, hash)
	return one(t.s, "FlowVersionGet", v, err)
}

func (t *tx) FlowVersionLatest(name string) (*store.FlowVersion, error) {
	v, err := t.Tx.FlowVersionLatest(name)
	return one(t.s, "FlowVersionLatest", v, err)
}

func (t *tx) FlowVersionList() ([]*store.FlowVersion, error) {
	vs, err := t.Tx.FlowVersionList()
	return list(t.s, "FlowVersionList", vs, err)
}

func (t *tx) FlowNameList(p store.FlowNameListParams) ([]string, error) {
	vs, err := t.Tx.FlowNameList(p)
	return list(t.s, "FlowNameList", vs, err)
}

func (t *tx) FlowVersionHistory(name string, limit int) ([]*store.FlowVersion, error) {
	vs, err := t.Tx.FlowVersionHistory(name, limit)
	return list(t.s, "FlowVersionHistory", vs, err)
}

func (t *tx) SourceGet(hash string) (*store.Source, error) {
	v, err := t.Tx.SourceGet(hash)
	return one(t.s, "SourceGet", v, err)
}

func (t *tx) RunGet(id string) (*store.Run, error) {
	v, err := t.Tx.RunGet(id)
	return one(t.s, "RunGet", v, err)
}

func (t *tx) RunList(p store.RunListParams) ([]*store.Run, error) {
	vs, err := t.Tx.RunList(p)
	return list(t.s, "RunList", vs, err)
}

func (t *tx) ContinuationGet(runID string) ([]byte, error) {
	v, err := t.Tx.ContinuationGet(runID)
	return one(t.s, "ContinuationGet", v, err)
}

func (t *tx) DedupGet(owner, requestID string) (*store.Dedup, error) {
	v, err := t.Tx.DedupGet(owner, requestID)
	return one(t.s, "DedupGet", v, err)
}

func (t *tx) TaskGet(id string) (*store.Task, error) {
	v, err := t.Tx.TaskGet(id)
	return one(t.s, "TaskGet", v, err)
}

func (t *tx) TaskListReady(now time.Time, limit int) ([]*store.Task, error) {
	vs, err := t.Tx.TaskListReady(now, limit)
	return list(t.s, "TaskListReady", vs, err)
}

func (t *tx) TaskListReadyByOwner(p store.TaskListReadyByOwnerParams) ([]*store.Task, error) {
	vs, err := t.Tx.TaskListReadyByOwner(p)
	return list(t.s, "TaskListReadyByOwner", vs, err)
}

func (t *tx) TaskListByRun(runID string) ([]*store.Task, error) {
	vs, err := t.Tx.TaskListByRun(runID)
	return list(t.s, "TaskListByRun", vs, err)
}

func (t *tx) TaskByChild(childRunID string) (*store.Task, error) {
	v, err := t.Tx.TaskByChild(childRunID)
	return one(t.s, "TaskByChild", v, err)
}

func (t *tx) TaskCount() (queued, leased int, err error) {
	queued, leased, err = t.Tx.TaskCount()
	t.s.count("TaskCount", 0)
	return queued, leased, err
}

func (t *tx) LeaseGet(taskID string) (*store.Lease, error) {
	v, err := t.Tx.LeaseGet(taskID)
	return one(t.s, "LeaseGet", v, err)
}

func (t *tx) LeaseListExpired(now time.Time, limit int) ([]*store.Lease, error) {
	vs, err := t.Tx.LeaseListExpired(now, limit)
	return list(t.s, "LeaseListExpired", vs, err)
}

func (t *tx) LeaseList() ([]*store.Lease, error) {
	vs, err := t.Tx.LeaseList()
	return list(t.s, "LeaseList", vs, err)
}

func (t *tx) IdemGet(key string) (*store.Idem, error) {
	v, err := t.Tx.IdemGet(key)
	return one(t.s, "IdemGet", v, err)
}

func (t *tx) DeadLetterList(p store.DeadLetterListParams) ([]*store.DeadLetter, error) {
	vs, err := t.Tx.DeadLetterList(p)
	return list(t.s, "DeadLetterList", vs, err)
}

func (t *tx) DeadLetterGet(taskID string) (*store.DeadLetter, error) {
	v, err := t.Tx.DeadLetterGet(taskID)
	return one(t.s, "DeadLetterGet", v, err)
}

func (t *tx) EventList(p store.EventListParams) ([]*store.Event, error) {
	vs, err := t.Tx.EventList(p)
	return list(t.s, "EventList", vs, err)
}

func (t *tx) CohortGet(runID, node string, visit int) (*store.Cohort, error) {
	v, err := t.Tx.CohortGet(runID, node, visit)
	return one(t.s, "CohortGet", v, err)
}

func (t *tx) CohortItemGet(runID, node string, visit, index int) (*store.CohortItem, error) {
	v, err := t.Tx.CohortItemGet(runID, node, visit, index)
	return one(t.s, "CohortItemGet", v, err)
}

func (t *tx) CohortItemList(runID, node string, visit int) ([]*store.CohortItem, error) {
	vs, err := t.Tx.CohortItemList(runID, node, visit)
	return list(t.s, "CohortItemList", vs, err)
}

func (t *tx) AgentTurnGet(runID, node string, visit, turn int) (*store.AgentTurn, error) {
	v, err := t.Tx.AgentTurnGet(runID, node, visit, turn)
	return one(t.s, "AgentTurnGet", v, err)
}

func (t *tx) AgentTurnList(p store.AgentTurnListParams) ([]*store.AgentTurn, error) {
	vs, err := t.Tx.AgentTurnList(p)
	return list(t.s, "AgentTurnList", vs, err)
}

func (t *tx) IdemListRun(runID string) ([]*store.Idem, error) {
	vs, err := t.Tx.IdemListRun(runID)
	return list(t.s, "IdemListRun", vs, err)
}

func (t *tx) MetaGet(key string) ([]byte, error) {
	v, err := t.Tx.MetaGet(key)
	return one(t.s, "MetaGet", v, err)
}

func (t *tx) ServiceLeaseGet(name string) (*store.ServiceLease, error) {
	v, err := t.Tx.ServiceLeaseGet(name)
	return one(t.s, "ServiceLeaseGet", v, err)
}

func (t *tx) OwnerEventGet(owner, id string) (*store.OwnerEvent, error) {
	v, err := t.Tx.OwnerEventGet(owner, id)
	return one(t.s, "OwnerEventGet", v, err)
}

func (t *tx) OwnerEventList(p store.OwnerEventListParams) ([]*store.OwnerEvent, error) {
	vs, err := t.Tx.OwnerEventList(p)
	return list(t.s, "OwnerEventList", vs, err)
}

func (t *tx) OwnerEventListBefore(before time.Time, limit int) ([]*store.OwnerEvent, error) {
	vs, err := t.Tx.OwnerEventListBefore(before, limit)
	return list(t.s, "OwnerEventListBefore", vs, err)
}

func (t *tx) OwnerEventCount(owner string) (int, error) {
	n, err := t.Tx.OwnerEventCount(owner)
	t.s.count("OwnerEventCount", 0)
	return n, err
}

func (t *tx) EventSlotGet(owner, name, key string) (*store.EventSlot, error) {
	v, err := t.Tx.EventSlotGet(owner, name, key)
	return one(t.s, "EventSlotGet", v, err)
}

func (t *tx) TriggerGet(owner, name string) (*store.Trigger, error) {
	v, err := t.Tx.TriggerGet(owner, name)
	return one(t.s, "TriggerGet", v, err)
}

func (t *tx) TriggerListByEvent(owner, event string) ([]*store.Trigger, error) {
	vs, err := t.Tx.TriggerListByEvent(owner, event)
	return list(t.s, "TriggerListByEvent", vs, err)
}

func (t *tx) TriggerList(owner string, limit int) ([]*store.Trigger, error) {
	vs, err := t.Tx.TriggerList(owner, limit)
	return list(t.s, "TriggerList", vs, err)
}

func (t *tx) ScheduleGet(owner, name string) (*store.Schedule, error) {
	v, err := t.Tx.ScheduleGet(owner, name)
	return one(t.s, "ScheduleGet", v, err)
}

func (t *tx) ScheduleList(p store.ScheduleListParams) ([]*store.Schedule, error) {
	vs, err := t.Tx.ScheduleList(p)
	return list(t.s, "ScheduleList", vs, err)
}

func (t *tx) ScheduleListDue(now time.Time, limit int) ([]*store.Schedule, error) {
	vs, err := t.Tx.ScheduleListDue(now, limit)
	return list(t.s, "ScheduleListDue", vs, err)
}

func (t *tx) OwnerSpendList(p store.OwnerSpendListParams) ([]store.OwnerSpend, error) {
	vs, err := t.Tx.OwnerSpendList(p)
	return list(t.s, "OwnerSpendList", vs, err)
}
