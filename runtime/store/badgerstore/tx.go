package badgerstore

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
)

// storeTx implements store.Tx over a kv. Each method first checks its
// TxGuard: fn must not retain tx, and a retained one fails loudly instead
// of writing into someone else's transaction.
type storeTx struct {
	kv *kv
	storekit.TxGuard
}

var _ store.Tx = (*storeTx)(nil)

// getJSON reads and decodes k, mapping absence to store.ErrNotFound.
func (t *storeTx) getJSON(k []byte, v any) error {
	b, err := t.kv.get(k)
	if errors.Is(err, errNoKey) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	return decodeJSON(b, v)
}

// putChecked is the write of a record that needs nothing more than its
// check: refused in a View or by check (the store's own, so every backend
// refuses the same records), else stored under k.
func putChecked[T any](t *storeTx, k []byte, v *T, check func(*T) error) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := check(v); err != nil {
		return err
	}
	return t.putJSON(k, v)
}

// putIndexed writes v under k with the index entries index names for
// it; the entries of the record it replaces are removed first, so an
// index never lists a record twice or where it no longer is.
func putIndexed[T any](t *storeTx, k []byte, v *T, index func(*T) [][]byte) error {
	old := new(T)
	switch err := t.getJSON(k, old); {
	case err == nil:
		if err := t.delKeys(index(old)); err != nil {
			return err
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := t.setKeys(index(v)); err != nil {
		return err
	}
	return t.putJSON(k, v)
}

// deleteIndexed removes the record under k and its index entries; what
// names the record in the error when there is none.
func deleteIndexed[T any](t *storeTx, k []byte, what string, index func(*T) [][]byte) error {
	old := new(T)
	if err := t.getJSON(k, old); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := t.delKeys(index(old)); err != nil {
		return err
	}
	return t.kv.del(k)
}

func (t *storeTx) putJSON(k []byte, v any) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return t.kv.set(k, b)
}

// counter reads a bookkeeping counter (absent is zero).
func (t *storeTx) counter(k string) (uint64, error) {
	b, err := t.kv.get([]byte(k))
	if errors.Is(err, errNoKey) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeU64("counter "+k, b)
}

func (t *storeTx) addCounter(k string, delta int) error {
	n, err := t.counter(k)
	if err != nil {
		return err
	}
	if delta < 0 && n < uint64(-delta) {
		return fmt.Errorf("badgerstore: counter %s would go below zero", k)
	}
	return t.kv.set([]byte(k), encodeU64(uint64(int64(n)+int64(delta))))
}

// getOne reads and decodes k into a new T, after the read check: the
// whole of a Get method.
func getOne[T any](t *storeTx, k []byte) (*T, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	r := new(T)
	if err := t.getJSON(k, r); err != nil {
		return nil, err
	}
	return r, nil
}

// listJSON decodes every value in [lower, upper) into a new T, up to limit
// (<= 0: no limit), keeping those keep accepts (nil: all).
func listJSON[T any](t *storeTx, lower, upper []byte, limit int, keep func(*T) bool) ([]*T, error) {
	var out []*T
	err := t.kv.scan(lower, upper, false, func(_, v []byte) (bool, error) {
		r := new(T)
		if err := decodeJSON(v, r); err != nil {
			return false, err
		}
		if keep == nil || keep(r) {
			out = append(out, r)
		}
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// scanKeys returns the keys in [lower, upper), up to limit (<= 0: all).
func (t *storeTx) scanKeys(lower, upper []byte, limit int) ([][]byte, error) {
	var out [][]byte
	err := t.kv.scan(lower, upper, true, func(k, _ []byte) (bool, error) {
		out = append(out, k)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// ---- flow versions and sources ----

func (t *storeTx) FlowVersionPut(v *store.FlowVersion) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("flow version", v.Name, v.Hash); err != nil {
		return err
	}
	latestSeq, _, err := t.flowLatest(v.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if v.Seq == 0 {
		v.Seq = latestSeq + 1
	}
	if err := t.putJSON(key(pFlowVersion, v.Name, sep, v.Hash), v); err != nil {
		return err
	}
	if v.Seq > latestSeq {
		ptr := append(encodeU64(v.Seq), v.Hash...)
		return t.kv.set(key(pFlowLatest, v.Name), ptr)
	}
	return nil
}

// flowLatest reads the latest pointer of a flow name: its Seq and hash.
func (t *storeTx) flowLatest(name string) (uint64, string, error) {
	b, err := t.kv.get(key(pFlowLatest, name))
	if errors.Is(err, errNoKey) {
		return 0, "", store.ErrNotFound
	}
	if err != nil {
		return 0, "", err
	}
	seq, err := decodeU64("flow latest", b[:min(len(b), 9)])
	return seq, string(b[9:]), err
}

func (t *storeTx) FlowVersionGet(name, hash string) (*store.FlowVersion, error) {
	return getOne[store.FlowVersion](t, key(pFlowVersion, name, sep, hash))
}

func (t *storeTx) FlowVersionLatest(name string) (*store.FlowVersion, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	_, hash, err := t.flowLatest(name)
	if err != nil {
		return nil, err
	}
	return t.FlowVersionGet(name, hash)
}

func (t *storeTx) FlowVersionList() ([]*store.FlowVersion, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	p := []byte(pFlowLatest)
	keys, err := t.scanKeys(p, prefixEnd(p), 0)
	if err != nil {
		return nil, err
	}
	out := make([]*store.FlowVersion, 0, len(keys))
	for _, k := range keys {
		v, err := t.FlowVersionLatest(string(k[len(p):]))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (t *storeTx) FlowNameList(p store.FlowNameListParams) ([]string, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := []byte(pFlowLatest)
	lower := prefix
	if p.After != "" {
		// The first key after the name: its own key with a zero byte.
		lower = append([]byte(pFlowLatest+p.After), 0)
	}
	keys, err := t.scanKeys(lower, prefixEnd(prefix), p.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, string(k[len(prefix):]))
	}
	return out, nil
}

// FlowVersionHistory reads every version of the name (they are keyed by
// hash) and keeps the newest limit.
func (t *storeTx) FlowVersionHistory(name string, limit int) ([]*store.FlowVersion, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	p := key(pFlowVersion, name, sep)
	out, err := listJSON[store.FlowVersion](t, p, prefixEnd(p), 0, nil)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *store.FlowVersion) int {
		if c := cmp.Compare(b.Seq, a.Seq); c != 0 {
			return c
		}
		return strings.Compare(a.Hash, b.Hash)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []*store.FlowVersion{}
	}
	return out, nil
}

func (t *storeTx) SourcePut(s *store.Source) error {
	return putChecked(t, key(pSource, s.Hash), s, func(s *store.Source) error { return checkID("source hash", s.Hash) })
}

func (t *storeTx) SourceGet(hash string) (*store.Source, error) {
	return getOne[store.Source](t, key(pSource, hash))
}

// ---- runs ----

func runIndexKeys(r *store.Run) [][]byte {
	ks := [][]byte{
		key(pRunOwner, r.Owner, sep, r.ID),
		key(pRunPhase, string(r.Phase), sep, r.ID),
		key(pRunCreated, r.Owner, sep, newestKey(r.CreatedAt), r.ID),
		key(pRunOwnerPh, r.Owner, sep, string(r.Phase), sep, r.ID),
	}
	if r.ParentRunID != "" {
		ks = append(ks, key(pRunParent, r.ParentRunID, sep, r.ID))
	}
	if r.Phase == store.PhaseWaiting {
		ks = append(ks, parkedKey(r))
	}
	return ks
}

func parkedKey(r *store.Run) []byte {
	return key(pRunParked, r.Flow, sep, r.Version, sep, r.Position, sep, r.ID)
}

// RunParkedGroups reads the first key of each group of p.Flow's part of
// the rpk/ index and seeks past the rest of the group, on one iterator: a
// group of 10,000 runs costs one key.
func (t *storeTx) RunParkedGroups(p store.RunParkedGroupsParams) ([]store.ParkedGroup, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pRunParked, p.Flow, sep)
	lower := prefix
	if p.After != nil {
		lower = prefixEnd(key(string(prefix), p.After.Version, sep, p.After.Position, sep))
	}
	var out []store.ParkedGroup
	err := t.kv.scanSkip(lower, prefixEnd(prefix), true, func(k, _ []byte) ([]byte, bool, error) {
		parts := strings.SplitN(string(k[len(prefix):]), sep, 3)
		if len(parts) != 3 {
			return nil, false, fmt.Errorf("badgerstore: parked index entry %q", k)
		}
		out = append(out, store.ParkedGroup{Version: parts[0], Position: parts[1], First: parts[2]})
		return prefixEnd(key(string(prefix), parts[0], sep, parts[1], sep)), p.Limit <= 0 || len(out) < p.Limit, nil
	})
	return out, err
}

// RunParkedList is a keys-only walk of one group of the rpk/ index.
func (t *storeTx) RunParkedList(p store.RunParkedListParams) ([]string, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pRunParked, p.Flow, sep, p.Version, sep, p.Position, sep)
	lower := prefix
	if p.After != "" {
		lower = key(string(prefix), p.After, "\x00")
	}
	var out []string
	err := t.kv.scan(lower, prefixEnd(prefix), true, func(k, _ []byte) (bool, error) {
		out = append(out, string(k[len(prefix):]))
		return p.Limit <= 0 || len(out) < p.Limit, nil
	})
	return out, err
}

func (t *storeTx) RunInsert(r *store.Run) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkRun(r); err != nil {
		return err
	}
	k := key(pRun, r.ID)
	if ok, err := t.kv.has(k); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("run %s: %w", r.ID, store.ErrExists)
	}
	return t.putRun(k, nil, r)
}

// putRun writes r and moves its index entries from old's (nil: none).
func (t *storeTx) putRun(k []byte, old, r *store.Run) error {
	if old != nil {
		for _, ik := range runIndexKeys(old) {
			if err := t.kv.del(ik); err != nil {
				return err
			}
		}
	}
	for _, ik := range runIndexKeys(r) {
		if err := t.kv.set(ik, nil); err != nil {
			return err
		}
	}
	return t.putJSON(k, r)
}

func (t *storeTx) RunGet(id string) (*store.Run, error) {
	return getOne[store.Run](t, key(pRun, id))
}

func (t *storeTx) RunUpdate(r *store.Run) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkRun(r); err != nil {
		return err
	}
	old, err := t.RunGet(r.ID)
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return t.putRun(key(pRun, r.ID), old, r)
}

func (t *storeTx) RunDelete(id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, err := t.RunGet(id)
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	for _, ik := range runIndexKeys(old) {
		if err := t.kv.del(ik); err != nil {
			return err
		}
	}
	return t.kv.del(key(pRun, id))
}

// RunList walks the most selective index the filters allow (parent, then
// owner, then phase, else every run), in run id order, and checks the
// remaining filters on each record.
func (t *storeTx) RunList(p store.RunListParams) ([]*store.Run, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	keep := func(r *store.Run) bool {
		return (p.Owner == "" || r.Owner == p.Owner) &&
			(p.Phase == "" || r.Phase == p.Phase) &&
			(p.ParentRunID == "" || r.ParentRunID == p.ParentRunID) &&
			(p.Flow == "" || r.Flow == p.Flow) &&
			(p.After == "" || r.ID > p.After) &&
			p.Before.NewestBefore(r) &&
			(p.FinishedBefore.IsZero() || (!r.FinishedAt.IsZero() && r.FinishedAt.Before(p.FinishedBefore)))
	}
	if p.Order == store.OrderNewest {
		return t.runListNewest(p, keep)
	}
	var prefix []byte
	switch {
	case p.ParentRunID != "":
		prefix = key(pRunParent, p.ParentRunID, sep)
	case p.Owner != "":
		prefix = key(pRunOwner, p.Owner, sep)
	case p.Phase != "":
		prefix = key(pRunPhase, string(p.Phase), sep)
	default:
		lower := []byte(pRun)
		if p.After != "" {
			lower = key(pRun, p.After, sep) // the first id after p.After
		}
		return listJSON(t, lower, prefixEnd([]byte(pRun)), p.Limit, keep)
	}
	lower := prefix
	if p.After != "" {
		lower = key(string(prefix), p.After, sep)
	}
	// Index entries come in run id order, so the records are read with
	// one walk over the runs rather than a lookup each.
	get, done := t.kv.lookup([]byte(pRun), prefixEnd([]byte(pRun)))
	defer done()
	var out []*store.Run
	err := t.kv.scan(lower, prefixEnd(prefix), true, func(k, _ []byte) (bool, error) {
		b, err := get(key(pRun, string(k[len(prefix):])))
		if err != nil {
			return false, fmt.Errorf("badgerstore: index entry %q: %w", k, err)
		}
		r := new(store.Run)
		if err := decodeJSON(b, r); err != nil {
			return false, err
		}
		if keep(r) {
			out = append(out, r)
		}
		return p.Limit <= 0 || len(out) < p.Limit, nil
	})
	return out, err
}

// runListNewest walks the owner's rc/ index from the cursor on, so a page
// reads about as many records as it returns. Without an owner it reads
// every run and sorts them (no caller lists everyone's runs by time).
func (t *storeTx) runListNewest(p store.RunListParams, keep func(*store.Run) bool) ([]*store.Run, error) {
	if p.Owner == "" {
		all, err := listJSON(t, []byte(pRun), prefixEnd([]byte(pRun)), 0, keep)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(all, store.CompareNewest)
		if p.Limit > 0 && len(all) > p.Limit {
			all = all[:p.Limit]
		}
		return all, nil
	}
	prefix := key(pRunCreated, p.Owner, sep)
	lower := prefix
	if p.Before != nil {
		// The first entry after the cursor's own.
		lower = key(string(prefix), newestKey(p.Before.CreatedAt), p.Before.ID, sep)
	}
	var out []*store.Run
	err := t.kv.scan(lower, prefixEnd(prefix), true, func(k, _ []byte) (bool, error) {
		id := string(k[len(prefix)+timeKeyLen:])
		r := new(store.Run)
		if err := t.getJSON(key(pRun, id), r); err != nil {
			return false, fmt.Errorf("badgerstore: index entry %q: %w", k, err)
		}
		if keep(r) {
			out = append(out, r)
		}
		return p.Limit <= 0 || len(out) < p.Limit, nil
	})
	return out, err
}

// RunCount implements store.RunCounter: a keys-only walk of the phase
// index, reading no run record.
func (t *storeTx) RunCount(phase store.Phase) (int, error) {
	if err := t.Open(); err != nil {
		return 0, err
	}
	prefix := key(pRunPhase, string(phase), sep)
	n := 0
	err := t.kv.scan(prefix, prefixEnd(prefix), true, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// OwnerRunCount implements store.RunCounter: a keys-only walk of the
// owner's part of the rop/ index.
func (t *storeTx) OwnerRunCount(owner string, phase store.Phase) (int, error) {
	if err := t.Open(); err != nil {
		return 0, err
	}
	prefix := key(pRunOwnerPh, owner, sep, string(phase), sep)
	n := 0
	err := t.kv.scan(prefix, prefixEnd(prefix), true, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

var _ store.RunCounter = (*storeTx)(nil)

// ---- continuations ----

func (t *storeTx) ContinuationPut(runID string, data []byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("run id", runID); err != nil {
		return err
	}
	return t.kv.set(key(pCont, runID), encodeRaw(data))
}

func (t *storeTx) ContinuationGet(runID string) ([]byte, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	b, err := t.kv.get(key(pCont, runID))
	if errors.Is(err, errNoKey) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeRaw("continuation", b)
}

func (t *storeTx) ContinuationDelete(runID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting("continuation", key(pCont, runID))
}

// delExisting deletes k, or returns ErrNotFound if it is absent.
func (t *storeTx) delExisting(what string, k []byte) error {
	ok, err := t.kv.has(k)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return t.kv.del(k)
}

// ---- dedup ----

func (t *storeTx) DedupGet(owner, requestID string) (*store.Dedup, error) {
	return getOne[store.Dedup](t, key(pDedup, owner, sep, requestID))
}

func (t *storeTx) DedupPut(d *store.Dedup) error {
	return putChecked(t, key(pDedup, d.Owner, sep, d.RequestID), d, store.CheckDedup)
}

func (t *storeTx) DedupDelete(owner, requestID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.delExisting("dedup key", key(pDedup, owner, sep, requestID))
}

// ---- tasks ----

func taskIndexKeys(tk *store.Task) [][]byte {
	ks := [][]byte{key(pTaskRun, tk.RunID, sep, tk.ID)}
	if !tk.Leased {
		ks = append(ks, key(pTaskQueue, timeKey(tk.ReadyAt), tk.ID), key(pTaskOwner, tk.Owner, sep, timeKey(tk.ReadyAt), tk.ID))
	}
	if tk.WaitChild != "" {
		ks = append(ks, key(pTaskChild, tk.WaitChild, sep, tk.ID))
	}
	return ks
}

func taskCounter(tk *store.Task) string {
	if tk.Leased {
		return kTasksLeased
	}
	return kTasksQueued
}

// runOwner is the owner of run id, "" when there is no such run.
func (t *storeTx) runOwner(id string) (string, error) {
	r, err := t.RunGet(id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return r.Owner, nil
}

// dropTask removes old's index entries and its share of the counters.
// The entries are those TaskPut wrote, under the owner it stored; a record
// stored without an owner (put before its run existed, or from before
// tasks had owners, which upgradeLayout indexed under its run's owner)
// also drops the entry under its run's owner now: either may be the one
// written, and deleting a key that is not there is harmless.
func (t *storeTx) dropTask(old *store.Task) error {
	keys := taskIndexKeys(old)
	if old.Owner == "" {
		owner, err := t.runOwner(old.RunID)
		if err != nil {
			return err
		}
		if owner != "" {
			legacy := *old
			legacy.Owner = owner
			keys = append(keys, taskIndexKeys(&legacy)...)
		}
	}
	for _, ik := range keys {
		if err := t.kv.del(ik); err != nil {
			return err
		}
	}
	return t.addCounter(taskCounter(old), -1)
}

func (t *storeTx) TaskPut(tk *store.Task) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckTask(tk); err != nil {
		return err
	}
	if tk.Owner == "" {
		var err error
		if tk.Owner, err = t.runOwner(tk.RunID); err != nil {
			return err
		}
	}
	old, err := t.TaskGet(tk.ID)
	switch {
	case err == nil:
		if err := t.dropTask(old); err != nil {
			return err
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	for _, ik := range taskIndexKeys(tk) {
		if err := t.kv.set(ik, nil); err != nil {
			return err
		}
	}
	if err := t.addCounter(taskCounter(tk), 1); err != nil {
		return err
	}
	return t.putJSON(key(pTask, tk.ID), tk)
}

func (t *storeTx) TaskGet(id string) (*store.Task, error) {
	return getOne[store.Task](t, key(pTask, id))
}

// TaskClaim reads, checks and writes each task in this transaction,
// which the store's one committer serializes against every other.
func (t *storeTx) TaskClaim(p store.TaskClaimParams) ([]*store.Task, error) {
	if err := t.Writable(); err != nil {
		return nil, err
	}
	return storekit.TaskClaim(t, p)
}

func (t *storeTx) TaskDelete(id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, err := t.TaskGet(id)
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if err := t.dropTask(old); err != nil {
		return err
	}
	return t.kv.del(key(pTask, id))
}

// TaskListReady seeks the queue index to its start and stops at the first
// entry after now: parked tasks (ReadyAt in the future) and leased tasks
// (absent from the index) cost nothing.
func (t *storeTx) TaskListReady(now time.Time, limit int) ([]*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	lower := []byte(pTaskQueue)
	upper := prefixEnd(key(pTaskQueue, timeKey(now)))
	keys, err := t.scanKeys(lower, upper, limit)
	if err != nil {
		return nil, err
	}
	return t.tasksByKeys(keys, len(pTaskQueue)+timeKeyLen)
}

// TaskListReadyByOwner walks the owner index one owner at a time: for
// each, a seek to its first entry reads up to PerOwner entries ready by
// now, and the next seek goes past the owner's last entry, so an owner's
// 10,000 queued tasks cost it PerOwner reads, not 10,000. The owners are
// then ordered by their heads.
func (t *storeTx) TaskListReadyByOwner(p store.TaskListReadyByOwnerParams) ([]*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	type group struct {
		owner string
		keys  [][]byte
	}
	var groups []group
	end := prefixEnd([]byte(pTaskOwner))
	lower := []byte(pTaskOwner)
	for {
		next, err := t.scanKeys(lower, end, 1)
		if err != nil {
			return nil, err
		}
		if len(next) == 0 {
			break
		}
		rest := next[0][len(pTaskOwner):]
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil, fmt.Errorf("badgerstore: owner index entry %q has no separator", next[0])
		}
		owner := string(rest[:i])
		keys, err := t.scanKeys(key(pTaskOwner, owner, sep), prefixEnd(key(pTaskOwner, owner, sep, timeKey(p.Now))), p.PerOwner)
		if err != nil {
			return nil, err
		}
		if len(keys) > 0 {
			groups = append(groups, group{owner, keys})
		}
		lower = prefixEnd(key(pTaskOwner, owner, sep))
	}
	// A head's key ends in its ready time and id: comparing those orders
	// the owners by their oldest task.
	headOf := func(g group) []byte { return g.keys[0][len(pTaskOwner)+len(g.owner)+1:] }
	slices.SortFunc(groups, func(a, b group) int { return bytes.Compare(headOf(a), headOf(b)) })
	var out []*store.Task
	for _, g := range groups {
		if p.Limit > 0 && len(out) >= p.Limit {
			break
		}
		keys := g.keys
		if p.Limit > 0 {
			keys = keys[:min(len(keys), p.Limit-len(out))]
		}
		ts, err := t.tasksByKeys(keys, len(pTaskOwner)+len(g.owner)+1+timeKeyLen)
		if err != nil {
			return nil, err
		}
		for _, tk := range ts {
			tk.Owner = g.owner // a record from before tasks had owners
		}
		out = append(out, ts...)
	}
	return out, nil
}

// tasksByKeys loads the tasks whose ids end index keys at offset off.
func (t *storeTx) tasksByKeys(keys [][]byte, off int) ([]*store.Task, error) {
	get, done := t.kv.lookup([]byte(pTask), prefixEnd([]byte(pTask)))
	defer done()
	out := make([]*store.Task, 0, len(keys))
	for _, k := range keys {
		b, err := get(key(pTask, string(k[off:])))
		if err != nil {
			return nil, fmt.Errorf("badgerstore: index entry %q: %w", k, err)
		}
		tk := new(store.Task)
		if err := decodeJSON(b, tk); err != nil {
			return nil, err
		}
		out = append(out, tk)
	}
	return out, nil
}

func (t *storeTx) TaskListByRun(runID string) ([]*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pTaskRun, runID, sep)
	keys, err := t.scanKeys(prefix, prefixEnd(prefix), 0)
	if err != nil {
		return nil, err
	}
	return t.tasksByKeys(keys, len(prefix))
}

func (t *storeTx) TaskByChild(childRunID string) (*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pTaskChild, childRunID, sep)
	keys, err := t.scanKeys(prefix, prefixEnd(prefix), 1)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("task waiting on %s: %w", childRunID, store.ErrNotFound)
	}
	tasks, err := t.tasksByKeys(keys, len(prefix))
	if err != nil {
		return nil, err
	}
	return tasks[0], nil
}

// TaskCount reads two counters kept in step by TaskPut and TaskDelete, so
// it costs two point reads however long the queue is.
func (t *storeTx) TaskCount() (queued, leased int, err error) {
	if err := t.Open(); err != nil {
		return 0, 0, err
	}
	q, err := t.counter(kTasksQueued)
	if err != nil {
		return 0, 0, err
	}
	l, err := t.counter(kTasksLeased)
	if err != nil {
		return 0, 0, err
	}
	return int(q), int(l), nil
}

// ---- leases ----

func (t *storeTx) LeasePut(l *store.Lease) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("lease task id", l.TaskID); err != nil {
		return err
	}
	return putIndexed(t, key(pLease, l.TaskID), l, leaseIndexKeys)
}

// leaseIndexKeys is a lease's entry in the expiry order.
func leaseIndexKeys(l *store.Lease) [][]byte {
	return [][]byte{key(pLeaseExp, timeKey(l.Deadline), l.TaskID)}
}

func (t *storeTx) LeaseGet(taskID string) (*store.Lease, error) {
	return getOne[store.Lease](t, key(pLease, taskID))
}

func (t *storeTx) LeaseDelete(taskID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return deleteIndexed(t, key(pLease, taskID), "lease of "+taskID, leaseIndexKeys)
}

func (t *storeTx) LeaseListExpired(now time.Time, limit int) ([]*store.Lease, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	lower := []byte(pLeaseExp)
	upper := key(pLeaseExp, timeKey(now)) // Deadline strictly before now
	keys, err := t.scanKeys(lower, upper, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Lease, 0, len(keys))
	for _, k := range keys {
		l, err := t.LeaseGet(string(k[len(pLeaseExp)+timeKeyLen:]))
		if err != nil {
			return nil, fmt.Errorf("badgerstore: index entry %q: %w", k, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func (t *storeTx) LeaseList() ([]*store.Lease, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	p := []byte(pLease)
	return listJSON[store.Lease](t, p, prefixEnd(p), 0, nil)
}

// ---- idempotency records ----

func (t *storeTx) IdemGet(k string) (*store.Idem, error) {
	return getOne[store.Idem](t, key(pIdem, k))
}

func (t *storeTx) IdemPut(r *store.Idem) error {
	return putChecked(t, key(pIdem, r.Key), r, func(r *store.Idem) error { return checkID("idempotency key", r.Key) })
}

// ---- dead letters ----

func (t *storeTx) DeadLetterPut(d *store.DeadLetter) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := store.CheckDeadLetter(d); err != nil {
		return err
	}
	// Replacing a task's dead letter removes the old entry from the time
	// order first.
	ptr := key(pDeadTask, d.TaskID)
	b, err := t.kv.get(ptr)
	switch {
	case err == nil:
		old := new(store.DeadLetter)
		oldKey := key(pDead, string(b), d.TaskID)
		if err := t.getJSON(oldKey, old); err != nil {
			return err
		}
		if err := t.kv.del(oldKey); err != nil {
			return err
		}
		if err := t.kv.del(key(pDeadOwner, old.Owner, sep, string(b), d.TaskID)); err != nil {
			return err
		}
	case !errors.Is(err, errNoKey):
		return err
	}
	at := timeKey(d.At)
	if err := t.kv.set(ptr, []byte(at)); err != nil {
		return err
	}
	if err := t.kv.set(key(pDeadOwner, d.Owner, sep, at, d.TaskID), nil); err != nil {
		return err
	}
	return t.putJSON(key(pDead, at, d.TaskID), d)
}

func (t *storeTx) DeadLetterList(p store.DeadLetterListParams) ([]*store.DeadLetter, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	since := ""
	if !p.Since.IsZero() {
		since = timeKey(p.Since) // both orders begin with the time
	}
	if p.Owner == "" {
		pre := []byte(pDead)
		return listJSON[store.DeadLetter](t, key(pDead, since), prefixEnd(pre), p.Limit, p.Keeps)
	}
	prefix := key(pDeadOwner, p.Owner, sep)
	limit := p.Limit
	if p.Flow != "" || p.Tool != "" {
		limit = 0 // the owner's index holds neither: read until enough match
	}
	keys, err := t.scanKeys(key(pDeadOwner, p.Owner, sep, since), prefixEnd(prefix), limit)
	if err != nil {
		return nil, err
	}
	get, done := t.kv.lookup([]byte(pDead), prefixEnd([]byte(pDead)))
	defer done()
	out := make([]*store.DeadLetter, 0, len(keys))
	for _, k := range keys {
		if p.Limit > 0 && len(out) >= p.Limit {
			break
		}
		b, err := get(key(pDead, string(k[len(prefix):])))
		if err != nil {
			return nil, fmt.Errorf("badgerstore: index entry %q: %w", k, err)
		}
		d := new(store.DeadLetter)
		if err := decodeJSON(b, d); err != nil {
			return nil, err
		}
		if p.Keeps(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// deadLetterAt is the time key of taskID's dead letter, from its pointer.
func (t *storeTx) deadLetterAt(taskID string) (string, error) {
	b, err := t.kv.get(key(pDeadTask, taskID))
	if errors.Is(err, errNoKey) {
		return "", store.ErrNotFound
	}
	return string(b), err
}

func (t *storeTx) DeadLetterGet(taskID string) (*store.DeadLetter, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	at, err := t.deadLetterAt(taskID)
	if err != nil {
		return nil, err
	}
	d := new(store.DeadLetter)
	if err := t.getJSON(key(pDead, at, taskID), d); err != nil {
		return nil, err
	}
	return d, nil
}

func (t *storeTx) DeadLetterDelete(taskID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	at, err := t.deadLetterAt(taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	d := new(store.DeadLetter)
	if err := t.getJSON(key(pDead, at, taskID), d); err != nil {
		return err
	}
	return errors.Join(t.kv.del(key(pDeadTask, taskID)), t.kv.del(key(pDead, at, taskID)),
		t.kv.del(key(pDeadOwner, d.Owner, sep, at, taskID)))
}

// ---- events ----

// EventAppend takes the next value of a store-wide counter kept in the
// same transaction as the event, so Seq survives restarts and a discarded
// fn gives its numbers back.
func (t *storeTx) EventAppend(e *store.Event) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("event run id", e.RunID); err != nil {
		return err
	}
	seq, err := t.counter(kEventSeq)
	if err != nil {
		return err
	}
	seq++
	if err := t.kv.set([]byte(kEventSeq), encodeU64(seq)); err != nil {
		return err
	}
	e.Seq = seq
	return t.putJSON(key(pEvent, e.RunID, sep, u64Key(seq)), e)
}

func (t *storeTx) EventList(p store.EventListParams) ([]*store.Event, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	prefix := key(pEvent, p.RunID, sep)
	lower := prefix
	if p.AfterSeq > 0 {
		if p.AfterSeq == ^uint64(0) {
			return nil, nil
		}
		lower = key(string(prefix), u64Key(p.AfterSeq+1))
	}
	return listJSON[store.Event](t, lower, prefixEnd(prefix), p.Limit, nil)
}

// ---- meta ----

func (t *storeTx) MetaGet(k string) ([]byte, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	b, err := t.kv.get(key(pMeta, k))
	if errors.Is(err, errNoKey) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeRaw("meta", b)
}

func (t *storeTx) MetaPut(k string, value []byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if k == "" {
		return fmt.Errorf("%w: meta key", errBadID)
	}
	return t.kv.set(key(pMeta, k), encodeRaw(value))
}
