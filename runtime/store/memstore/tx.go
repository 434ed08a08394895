package memstore

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
)

// table names one kind of record.
type table int

// The tables. Keys are the record's identity; composite keys join their
// parts with sep, which is why ids must not contain it (the same rule as
// Badger's, so input one backend refuses the other refuses too).
const (
	tFlowVersion table = iota // name sep hash
	tFlowLatest               // name → latestFlow
	tSource                   // hash
	tRun                      // id
	tCont                     // run id → raw bytes
	tDedup                    // owner sep request id
	tTask                     // id
	tLease                    // task id
	tIdem                     // key
	tDead                     // task id
	tEvent                    // run id sep seq(8)
	tCohort                   // run sep node sep visit(8)
	tItem                     // run sep node sep visit(8) index(8)
	tTurn                     // run sep node sep visit(8) turn(8)
	tMeta                     // key → raw bytes
	tCounter                  // name → uint64
	tService                  // service lease name
	tSchedule                 // owner sep name
	tOwnerEvent               // owner sep id
	tEventSlot                // owner sep name sep key
	tTrigger                  // owner sep name
	tOwnerSpend               // owner sep minute(8) sep host
	tRunParked                // flow sep version sep position sep id: runs in PhaseWaiting
	numTables
)

const sep = "\x00"

// cEventSeq is the counter of event sequence numbers. It lives in a table,
// not in a field, so that a discarded function gives its numbers back.
const cEventSeq = "event-seq"

// latestFlow points at the latest version of a flow name.
type latestFlow struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// The ids every backend refuses alike (package store).
var (
	errBadID = store.ErrBadID
	checkID  = store.CheckID
	checkRun = store.CheckRun
)

func u64(v uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return string(b[:])
}

func cohortKey(runID, node string, visit int) string {
	return runID + sep + node + sep + u64(uint64(visit))
}

// tx implements store.Tx: reads look in the function's own writes first,
// then in the committed state it started from.
type tx struct {
	base   *state
	writes map[table]map[string]*entry // nil entry: deleted; nil map: View
	storekit.TxGuard
}

var _ store.Tx = (*tx)(nil)

func (t *tx) lookup(tb table, k string) (*entry, bool) {
	if e, ok := t.writes[tb][k]; ok {
		return e, e != nil
	}
	e, ok := t.base.tables[tb][k]
	return e, ok
}

func (t *tx) set(tb table, k string, e *entry) {
	w := t.writes[tb]
	if w == nil {
		w = map[string]*entry{}
		t.writes[tb] = w
	}
	w[k] = e
}

func (t *tx) del(tb table, k string) { t.set(tb, k, nil) }

// each calls fn for every live entry of tb, in no particular order.
func (t *tx) each(tb table, fn func(k string, e *entry)) {
	w := t.writes[tb]
	for k, e := range t.base.tables[tb] {
		if _, ok := w[k]; !ok {
			fn(k, e)
		}
	}
	for k, e := range w {
		if e != nil {
			fn(k, e)
		}
	}
}

// put stores v under k as a new entry: its encoding and a private decoded
// copy of it.
func put[T any](t *tx, tb table, k string, v *T) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("memstore: encode: %w", err)
	}
	private := new(T)
	if err := json.Unmarshal(raw, private); err != nil {
		return fmt.Errorf("memstore: decode: %w", err)
	}
	t.set(tb, k, &entry{raw: raw, val: private})
	return nil
}

// putChecked is the write of a record that needs nothing more than its
// check: refused in a View or by check (the store's own, so every backend
// refuses the same records), else put under k.
func putChecked[T any](t *tx, tb table, k string, v *T, check func(*T) error) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := check(v); err != nil {
		return err
	}
	return put(t, tb, k, v)
}

// fresh decodes a new copy of e for a caller to keep and change.
func fresh[T any](e *entry) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(e.raw, v); err != nil {
		return nil, fmt.Errorf("memstore: decode: %w", err)
	}
	return v, nil
}

func get[T any](t *tx, tb table, k string) (*T, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	e, ok := t.lookup(tb, k)
	if !ok {
		return nil, store.ErrNotFound
	}
	return fresh[T](e)
}

// peek returns the private copy of k's record, for the store's own reads.
func peek[T any](t *tx, tb table, k string) (*T, bool) {
	e, ok := t.lookup(tb, k)
	if !ok {
		return nil, false
	}
	return e.val.(*T), true
}

// list returns fresh copies of the records of tb that keep accepts (nil:
// all), ordered by less, up to limit (<= 0: no limit).
func list[T any](t *tx, tb table, keep func(*T) bool, less func(a, b *T) int, limit int) ([]*T, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	var hits []*entry
	t.each(tb, func(_ string, e *entry) {
		if keep == nil || keep(e.val.(*T)) {
			hits = append(hits, e)
		}
	})
	slices.SortFunc(hits, func(a, b *entry) int { return less(a.val.(*T), b.val.(*T)) })
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]*T, 0, len(hits))
	for _, e := range hits {
		v, err := fresh[T](e)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// putRaw stores a copy of data: the caller may change its slice later.
func (t *tx) putRaw(tb table, k string, data []byte) {
	t.set(tb, k, &entry{raw: append([]byte{}, data...)})
}

// getRaw returns a copy, which the caller may keep and change.
func (t *tx) getRaw(tb table, k string) ([]byte, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	e, ok := t.lookup(tb, k)
	if !ok {
		return nil, store.ErrNotFound
	}
	return append([]byte{}, e.raw...), nil
}

// delExisting deletes k, or returns ErrNotFound if it is absent.
func (t *tx) delExisting(what string, tb table, k string) error {
	if _, ok := t.lookup(tb, k); !ok {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	t.del(tb, k)
	return nil
}

// deleteWhere deletes every record of tb that match accepts.
func deleteWhere[T any](t *tx, tb table, match func(*T) bool) error {
	if err := t.Writable(); err != nil {
		return err
	}
	var keys []string
	t.each(tb, func(k string, e *entry) {
		if match(e.val.(*T)) {
			keys = append(keys, k)
		}
	})
	for _, k := range keys {
		t.del(tb, k)
	}
	return nil
}

// byTime orders by a time, then by an id: the order of every list keyed
// by a time.
func byTime(ta, tb time.Time, ida, idb string) int {
	if c := ta.Compare(tb); c != 0 {
		return c
	}
	return strings.Compare(ida, idb)
}

// ---- flow versions and sources ----

func (t *tx) FlowVersionPut(v *store.FlowVersion) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("flow version", v.Name, v.Hash); err != nil {
		return err
	}
	var latest uint64
	if l, ok := peek[latestFlow](t, tFlowLatest, v.Name); ok {
		latest = l.Seq
	}
	if v.Seq == 0 {
		v.Seq = latest + 1
	}
	if err := put(t, tFlowVersion, v.Name+sep+v.Hash, v); err != nil {
		return err
	}
	if v.Seq > latest {
		return put(t, tFlowLatest, v.Name, &latestFlow{Seq: v.Seq, Hash: v.Hash})
	}
	return nil
}

func (t *tx) FlowVersionGet(name, hash string) (*store.FlowVersion, error) {
	return get[store.FlowVersion](t, tFlowVersion, name+sep+hash)
}

func (t *tx) FlowVersionLatest(name string) (*store.FlowVersion, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	l, ok := peek[latestFlow](t, tFlowLatest, name)
	if !ok {
		return nil, store.ErrNotFound
	}
	return t.FlowVersionGet(name, l.Hash)
}

func (t *tx) FlowVersionList() ([]*store.FlowVersion, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	var names []string
	t.each(tFlowLatest, func(k string, _ *entry) { names = append(names, k) })
	slices.Sort(names)
	out := make([]*store.FlowVersion, 0, len(names))
	for _, name := range names {
		v, err := t.FlowVersionLatest(name)
		if err != nil {
			return nil, fmt.Errorf("memstore: latest version of %s: %w", name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func (t *tx) FlowNameList(p store.FlowNameListParams) ([]string, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	var names []string
	t.each(tFlowLatest, func(k string, _ *entry) {
		if k > p.After {
			names = append(names, k)
		}
	})
	slices.Sort(names)
	if p.Limit > 0 && len(names) > p.Limit {
		names = names[:p.Limit]
	}
	return names, nil
}

func (t *tx) FlowVersionHistory(name string, limit int) ([]*store.FlowVersion, error) {
	return list(t, tFlowVersion, func(v *store.FlowVersion) bool { return v.Name == name }, newestFirst, limit)
}

// newestFirst orders versions of one name by Seq, highest first, then by
// hash.
func newestFirst(a, b *store.FlowVersion) int {
	if c := cmp.Compare(b.Seq, a.Seq); c != 0 {
		return c
	}
	return strings.Compare(a.Hash, b.Hash)
}

func (t *tx) SourcePut(s *store.Source) error {
	return putChecked(t, tSource, s.Hash, s, func(s *store.Source) error { return checkID("source hash", s.Hash) })
}

func (t *tx) SourceGet(hash string) (*store.Source, error) {
	return get[store.Source](t, tSource, hash)
}

// ---- runs ----

func (t *tx) RunInsert(r *store.Run) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkRun(r); err != nil {
		return err
	}
	if _, ok := t.lookup(tRun, r.ID); ok {
		return fmt.Errorf("run %s: %w", r.ID, store.ErrExists)
	}
	return t.putRun(nil, r)
}

// putRun writes r and moves its parked index entry from old's (nil:
// none).
func (t *tx) putRun(old, r *store.Run) error {
	if old != nil && old.Phase == store.PhaseWaiting {
		t.del(tRunParked, parkedKey(old))
	}
	if r != nil && r.Phase == store.PhaseWaiting {
		t.set(tRunParked, parkedKey(r), &entry{})
	}
	if r == nil {
		return nil
	}
	return put(t, tRun, r.ID, r)
}

func parkedKey(r *store.Run) string {
	return r.Flow + sep + r.Version + sep + r.Position + sep + r.ID
}

func (t *tx) RunGet(id string) (*store.Run, error) {
	return get[store.Run](t, tRun, id)
}

func (t *tx) RunUpdate(r *store.Run) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkRun(r); err != nil {
		return err
	}
	old, ok := peek[store.Run](t, tRun, r.ID)
	if !ok {
		return fmt.Errorf("run %s: %w", r.ID, store.ErrNotFound)
	}
	return t.putRun(old, r)
}

func (t *tx) RunDelete(id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if old, ok := peek[store.Run](t, tRun, id); ok {
		_ = t.putRun(old, nil)
	}
	return t.delExisting("run "+id, tRun, id)
}

// RunParkedGroups walks the parked index's keys of p.Flow (the table
// holds only parked runs, so a registration never reads the others).
func (t *tx) RunParkedGroups(p store.RunParkedGroupsParams) ([]store.ParkedGroup, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	firsts := map[[2]string]string{}
	t.eachParked(p.Flow, func(version, position, id string) {
		if p.After != nil && store.CompareParked(version, position, p.After.Version, p.After.Position) <= 0 {
			return
		}
		g := [2]string{version, position}
		if first, ok := firsts[g]; !ok || id < first {
			firsts[g] = id
		}
	})
	out := make([]store.ParkedGroup, 0, len(firsts))
	for g, first := range firsts {
		out = append(out, store.ParkedGroup{Version: g[0], Position: g[1], First: first})
	}
	slices.SortFunc(out, func(a, b store.ParkedGroup) int {
		return store.CompareParked(a.Version, a.Position, b.Version, b.Position)
	})
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

func (t *tx) RunParkedList(p store.RunParkedListParams) ([]string, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	var out []string
	t.eachParked(p.Flow, func(version, position, id string) {
		if version == p.Version && position == p.Position && id > p.After {
			out = append(out, id)
		}
	})
	slices.Sort(out)
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// eachParked calls fn for every parked run of flow.
func (t *tx) eachParked(flow string, fn func(version, position, id string)) {
	prefix := flow + sep
	t.each(tRunParked, func(k string, _ *entry) {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			return
		}
		parts := strings.SplitN(rest, sep, 3)
		if len(parts) == 3 {
			fn(parts[0], parts[1], parts[2])
		}
	})
}

func (t *tx) RunList(p store.RunListParams) ([]*store.Run, error) {
	keep := func(r *store.Run) bool {
		return (p.After == "" || r.ID > p.After) &&
			p.Before.NewestBefore(r) &&
			(p.Owner == "" || r.Owner == p.Owner) &&
			(p.Phase == "" || r.Phase == p.Phase) &&
			(p.ParentRunID == "" || r.ParentRunID == p.ParentRunID) &&
			(p.Flow == "" || r.Flow == p.Flow) &&
			(p.FinishedBefore.IsZero() || (!r.FinishedAt.IsZero() && r.FinishedAt.Before(p.FinishedBefore)))
	}
	if p.Order == store.OrderNewest {
		return list(t, tRun, keep, store.CompareNewest, p.Limit)
	}
	return list(t, tRun, keep, func(a, b *store.Run) int { return strings.Compare(a.ID, b.ID) }, p.Limit)
}

// ---- continuations ----

func (t *tx) ContinuationPut(runID string, data []byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("run id", runID); err != nil {
		return err
	}
	t.putRaw(tCont, runID, data)
	return nil
}

func (t *tx) ContinuationGet(runID string) ([]byte, error) {
	return t.getRaw(tCont, runID)
}

func (t *tx) ContinuationDelete(runID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting("continuation", tCont, runID)
}

// ---- dedup ----

func (t *tx) DedupGet(owner, requestID string) (*store.Dedup, error) {
	return get[store.Dedup](t, tDedup, owner+sep+requestID)
}

func (t *tx) DedupPut(d *store.Dedup) error {
	return putChecked(t, tDedup, d.Owner+sep+d.RequestID, d, store.CheckDedup)
}

func (t *tx) DedupDelete(owner, requestID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting("dedup key", tDedup, owner+sep+requestID)
}

// ---- tasks ----

func (t *tx) TaskPut(tk *store.Task) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckTask(tk); err != nil {
		return err
	}
	if tk.Owner == "" {
		tk.Owner = t.runOwner(tk.RunID)
	}
	return put(t, tTask, tk.ID, tk)
}

// runOwner is the owner of run id, "" when there is no such run.
func (t *tx) runOwner(id string) string {
	if r, ok := peek[store.Run](t, tRun, id); ok {
		return r.Owner
	}
	return ""
}

func (t *tx) TaskGet(id string) (*store.Task, error) {
	return get[store.Task](t, tTask, id)
}

// TaskClaim reads, checks and writes each task in this transaction,
// which the store's one committer serializes against every other.
func (t *tx) TaskClaim(p store.TaskClaimParams) ([]*store.Task, error) {
	if err := t.Writable(); err != nil {
		return nil, err
	}
	return storekit.TaskClaim(t, p)
}

func (t *tx) TaskDelete(id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting("task "+id, tTask, id)
}

func taskByID(a, b *store.Task) int { return strings.Compare(a.ID, b.ID) }

func (t *tx) TaskListReady(now time.Time, limit int) ([]*store.Task, error) {
	keep := func(tk *store.Task) bool { return !tk.Leased && !tk.ReadyAt.After(now) }
	less := func(a, b *store.Task) int { return byTime(a.ReadyAt, b.ReadyAt, a.ID, b.ID) }
	return list(t, tTask, keep, less, limit)
}

func (t *tx) TaskListReadyByOwner(p store.TaskListReadyByOwnerParams) ([]*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	var ready []*entry
	t.each(tTask, func(_ string, e *entry) {
		if tk := e.val.(*store.Task); !tk.Leased && !tk.ReadyAt.After(p.Now) {
			ready = append(ready, e)
		}
	})
	slices.SortFunc(ready, func(a, b *entry) int {
		ta, tb := a.val.(*store.Task), b.val.(*store.Task)
		return byTime(ta.ReadyAt, tb.ReadyAt, ta.ID, tb.ID)
	})
	// ready is oldest first, so each owner's first task is its head and
	// owners are met in the order of their heads. Only what is listed is
	// copied out.
	var owners []string
	byOwner := map[string][]*entry{}
	for _, e := range ready {
		o := e.val.(*store.Task).Owner
		if o == "" {
			o = t.runOwner(e.val.(*store.Task).RunID)
		}
		q, seen := byOwner[o]
		if !seen {
			owners = append(owners, o)
		}
		if p.PerOwner <= 0 || len(q) < p.PerOwner {
			byOwner[o] = append(q, e)
		}
	}
	var out []*store.Task
	for _, o := range owners {
		for _, e := range byOwner[o] {
			if p.Limit > 0 && len(out) >= p.Limit {
				return out, nil
			}
			tk, err := fresh[store.Task](e)
			if err != nil {
				return nil, err
			}
			tk.Owner = o
			out = append(out, tk)
		}
	}
	return out, nil
}

func (t *tx) TaskListByRun(runID string) ([]*store.Task, error) {
	return list(t, tTask, func(tk *store.Task) bool { return tk.RunID == runID }, taskByID, 0)
}

// TaskByChild returns the waiting task with the lowest id, as Badger's
// index walk does, should two tasks wait on one child.
func (t *tx) TaskByChild(childRunID string) (*store.Task, error) {
	if childRunID == "" {
		return nil, fmt.Errorf("task waiting on %q: %w", childRunID, store.ErrNotFound)
	}
	ts, err := list(t, tTask, func(tk *store.Task) bool { return tk.WaitChild == childRunID }, taskByID, 1)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("task waiting on %s: %w", childRunID, store.ErrNotFound)
	}
	return ts[0], nil
}

func (t *tx) TaskCount() (queued, leased int, err error) {
	if err := t.Open(); err != nil {
		return 0, 0, err
	}
	t.each(tTask, func(_ string, e *entry) {
		if e.val.(*store.Task).Leased {
			leased++
		} else {
			queued++
		}
	})
	return queued, leased, nil
}

// ---- leases ----

func (t *tx) LeasePut(l *store.Lease) error {
	return putChecked(t, tLease, l.TaskID, l, func(l *store.Lease) error { return checkID("lease task id", l.TaskID) })
}

func (t *tx) LeaseGet(taskID string) (*store.Lease, error) {
	return get[store.Lease](t, tLease, taskID)
}

func (t *tx) LeaseDelete(taskID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting("lease of "+taskID, tLease, taskID)
}

func (t *tx) LeaseListExpired(now time.Time, limit int) ([]*store.Lease, error) {
	keep := func(l *store.Lease) bool { return l.Deadline.Before(now) }
	less := func(a, b *store.Lease) int { return byTime(a.Deadline, b.Deadline, a.TaskID, b.TaskID) }
	return list(t, tLease, keep, less, limit)
}

func (t *tx) LeaseList() ([]*store.Lease, error) {
	return list(t, tLease, nil, func(a, b *store.Lease) int { return strings.Compare(a.TaskID, b.TaskID) }, 0)
}

// ---- idempotency records ----

func (t *tx) IdemGet(k string) (*store.Idem, error) {
	return get[store.Idem](t, tIdem, k)
}

func (t *tx) IdemPut(r *store.Idem) error {
	return putChecked(t, tIdem, r.Key, r, func(r *store.Idem) error { return checkID("idempotency key", r.Key) })
}

// ---- dead letters ----

func (t *tx) DeadLetterPut(d *store.DeadLetter) error {
	return putChecked(t, tDead, d.TaskID, d, store.CheckDeadLetter)
}

func (t *tx) DeadLetterList(p store.DeadLetterListParams) ([]*store.DeadLetter, error) {
	less := func(a, b *store.DeadLetter) int { return byTime(a.At, b.At, a.TaskID, b.TaskID) }
	return list(t, tDead, p.Keeps, less, p.Limit)
}

func (t *tx) DeadLetterGet(taskID string) (*store.DeadLetter, error) {
	return get[store.DeadLetter](t, tDead, taskID)
}

func (t *tx) DeadLetterDelete(taskID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if _, ok := t.lookup(tDead, taskID); ok {
		t.del(tDead, taskID)
	}
	return nil
}

// ---- events ----

func (t *tx) EventAppend(e *store.Event) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("event run id", e.RunID); err != nil {
		return err
	}
	var seq uint64
	if c, ok := peek[uint64](t, tCounter, cEventSeq); ok {
		seq = *c
	}
	seq++
	next := seq
	if err := put(t, tCounter, cEventSeq, &next); err != nil {
		return err
	}
	e.Seq = seq
	return put(t, tEvent, e.RunID+sep+u64(seq), e)
}

func (t *tx) EventList(p store.EventListParams) ([]*store.Event, error) {
	keep := func(e *store.Event) bool { return e.RunID == p.RunID && e.Seq > p.AfterSeq }
	return list(t, tEvent, keep, func(a, b *store.Event) int { return cmp.Compare(a.Seq, b.Seq) }, p.Limit)
}

// ---- cohorts ----

func (t *tx) CohortPut(c *store.Cohort) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("cohort run/node", c.RunID, c.Node); err != nil {
		return err
	}
	return put(t, tCohort, cohortKey(c.RunID, c.Node, c.Visit), c)
}

func (t *tx) CohortGet(runID, node string, visit int) (*store.Cohort, error) {
	return get[store.Cohort](t, tCohort, cohortKey(runID, node, visit))
}

func (t *tx) CohortItemPut(it *store.CohortItem) error {
	return putChecked(t, tItem, cohortKey(it.RunID, it.Node, it.Visit)+u64(uint64(it.Index)), it, store.CheckCohortItem)
}

func (t *tx) CohortItemGet(runID, node string, visit, index int) (*store.CohortItem, error) {
	return get[store.CohortItem](t, tItem, cohortKey(runID, node, visit)+u64(uint64(index)))
}

func (t *tx) CohortItemList(runID, node string, visit int) ([]*store.CohortItem, error) {
	keep := func(it *store.CohortItem) bool { return it.RunID == runID && it.Node == node && it.Visit == visit }
	return list(t, tItem, keep, func(a, b *store.CohortItem) int { return cmp.Compare(a.Index, b.Index) }, 0)
}

// ---- agent turns ----

func (t *tx) AgentTurnPut(at *store.AgentTurn) error {
	return putChecked(t, tTurn, cohortKey(at.RunID, at.Node, at.Visit)+u64(uint64(at.Turn)), at, store.CheckAgentTurn)
}

func (t *tx) AgentTurnGet(runID, node string, visit, turn int) (*store.AgentTurn, error) {
	return get[store.AgentTurn](t, tTurn, cohortKey(runID, node, visit)+u64(uint64(turn)))
}

func (t *tx) AgentTurnList(p store.AgentTurnListParams) ([]*store.AgentTurn, error) {
	keep := func(at *store.AgentTurn) bool { return at.RunID == p.RunID && at.Node == p.Node && at.Visit == p.Visit }
	return list(t, tTurn, keep, func(a, b *store.AgentTurn) int { return cmp.Compare(a.Turn, b.Turn) }, 0)
}

// ---- retention ----

func (t *tx) AgentTurnDeleteRun(runID string) error {
	return deleteWhere(t, tTurn, func(at *store.AgentTurn) bool { return at.RunID == runID })
}

func (t *tx) EventDeleteRun(runID string) error {
	return deleteWhere(t, tEvent, func(e *store.Event) bool { return e.RunID == runID })
}

func (t *tx) EventDeleteBefore(runID string, beforeSeq uint64) error {
	return deleteWhere(t, tEvent, func(e *store.Event) bool { return e.RunID == runID && e.Seq < beforeSeq })
}

func (t *tx) CohortDeleteRun(runID string) error {
	if err := deleteWhere(t, tCohort, func(c *store.Cohort) bool { return c.RunID == runID }); err != nil {
		return err
	}
	return deleteWhere(t, tItem, func(it *store.CohortItem) bool { return it.RunID == runID })
}

func (t *tx) IdemDeleteRun(runID string) error {
	return deleteWhere(t, tIdem, func(r *store.Idem) bool { return strings.HasPrefix(r.Key, runID+"/") })
}

func (t *tx) IdemListRun(runID string) ([]*store.Idem, error) {
	keep := func(r *store.Idem) bool { return strings.HasPrefix(r.Key, runID+"/") }
	return list(t, tIdem, keep, func(a, b *store.Idem) int { return strings.Compare(a.Key, b.Key) }, 0)
}

// ---- meta ----

func (t *tx) MetaGet(k string) ([]byte, error) {
	return t.getRaw(tMeta, k)
}

func (t *tx) MetaPut(k string, value []byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if k == "" {
		return fmt.Errorf("%w: meta key", errBadID)
	}
	t.putRaw(tMeta, k, value)
	return nil
}
