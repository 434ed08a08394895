// Package store is weir's storage contract: the records the engine keeps
// (flow versions, runs, continuations, the task queue, leases, dedup keys,
// idempotency records, waits, dead letters and the event timeline) and the
// narrow, transaction-shaped interface every backend implements.
//
// The store is the truth; the engine's memory is only a view to schedule
// from. Badger (package badgerstore) is the embedded default; a PostgreSQL
// backend must later be a new package that passes storetest, nothing else.
//
// Every write happens inside Store.Update, which is atomic and durable when
// it returns nil: the engine acknowledges or acts on nothing before that.
// Backends are expected to share one sync between many concurrent Updates
// (group commit); that is what makes durable steps cheap.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Sentinel errors callers test with errors.Is.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrReadOnly: a write method was called inside View.
	ErrReadOnly = errors.New("store: write in a read-only transaction")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrLocked: another process holds the store (a running daemon): its
	// data directory, or its PostgreSQL schema.
	ErrLocked = errors.New("store: in use by another process")
	// ErrExists: an insert found the key already present.
	ErrExists = errors.New("store: already exists")
	// ErrDiskFull: the disk holding the store has less free space than
	// the store keeps in reserve, so the write was refused before any of
	// it reached the disk. The store is sound: writes succeed again once
	// space returns.
	ErrDiskFull = errors.New("store: disk full")
)

// Store is a storage backend.
type Store interface {
	// Update runs fn in one atomic read-write transaction and returns after
	// the transaction is durable. If fn returns an error nothing it wrote is
	// kept and that error is returned. fn may be run concurrently with other
	// callers' fns but never sees their uncommitted writes partially: each fn
	// is atomic on its own. fn must not retain tx.
	//
	// fn must be short and must not block (no I/O besides tx, no waiting
	// on channels or locks another fn may hold), and must not call Update
	// again. A backend may run fn more than once (to retry a conflict), so
	// fn must have no effects outside tx: counters, stats, wake-ups and
	// channel sends belong after Update has returned nil, and variables fn
	// sets for its caller are reset at fn's start.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn against a consistent read-only snapshot. Write methods
	// return ErrReadOnly.
	View(ctx context.Context, fn func(tx Tx) error) error
	// Capabilities says what this backend can do.
	Capabilities() Capabilities
	// Close flushes and releases the store. Later calls return ErrClosed.
	Close() error
}

// Capabilities lists optional abilities so the engine can check rather
// than assume.
type Capabilities struct {
	// GroupCommit: concurrent Updates share one durable sync.
	GroupCommit bool
	// Shared: several engines (a fleet of daemons) use this store at once.
	// The store's transactions are what keep them apart (a claim, a fence
	// and a rescue of one lease are serialized against each other), so an
	// engine must not take a lease away before its deadline: at start it
	// rescues only expired leases, since another holder may be alive.
	Shared bool
}

// Waker is an optional ability of a Store shared by several engines: it
// tells an engine, without polling, of writes any engine committed that
// the engine may have to act on. After a commit it announces every task
// put unleased with a ready time not in the future (acceptance, a child's
// end waking its parent, a decision, a retry or a drain handing work
// back) and every run put with CancelRequested. Announcements may be lost
// or repeated; the engine's tick and lease renewals are the fallback.
type Waker interface {
	Wakes() <-chan Wake
}

// LockHolder is an optional ability of a Store that holds a lock for
// the daemon's lifetime on a server it does not own (PostgreSQL's
// advisory lock for an unshared schema). LockLost is closed once that
// lock is gone: from then on every read and write fails, and the lock
// must not be taken again (another daemon may hold it by then), so the
// engine closes admission and the daemon stops.
type LockHolder interface {
	LockLost() <-chan struct{}
}

// Wake is one announcement of a Waker.
type Wake struct {
	// CancelRunID names a run whose cancel was requested: the engine
	// holding its work stops it. Empty (and FinishedRunID empty): a task
	// may be ready, or announcements were lost (every run may have
	// changed).
	CancelRunID string
	// FinishedRunID names a run whose end (a terminal phase) committed:
	// a wait held on it reads it again.
	FinishedRunID string
}

// Claimer is an optional ability of a shared Store: Tx.TaskClaim committed
// as a transaction of its own that passes over the tasks another
// transaction is claiming or changing now, so daemons racing for the same
// heads of the queue neither wait for each other nor collide (on
// PostgreSQL one READ COMMITTED statement with FOR UPDATE SKIP LOCKED). A
// task it returns is leased, with its lease, once it returns: what the
// claimer writes next for it (its run started, its event) follows in an
// Update fenced by that lease, and a claimer that cannot go on gives the
// task back in another. A store without it claims inside the Update that
// uses the claim (ClaimAlone does that on any store).
type Claimer interface {
	TaskClaim(ctx context.Context, p TaskClaimParams) ([]*Task, error)
}

// ClaimAlone commits p's claim on its own: with st's Claimer where it has
// one, else in an Update of its own.
func ClaimAlone(ctx context.Context, st Store, p TaskClaimParams) ([]*Task, error) {
	if c, ok := st.(Claimer); ok {
		return c.TaskClaim(ctx, p)
	}
	var out []*Task
	err := st.Update(ctx, func(tx Tx) error {
		var err error
		out, err = tx.TaskClaim(p)
		return err
	})
	return out, err
}

// Roll is an optional ability of a Tx of a shared store: the fleet's roll
// of daemons, each with the tools it serves and when it last said it was
// alive (docs/design.md §10). Registration warns of a flow whose tools
// some live daemon lacks or has from another plugin binary. A store that
// only one engine uses has no roll: the engine's own tools are the fleet's.
type Roll interface {
	// DaemonPut inserts or replaces a daemon's entry.
	DaemonPut(d *Daemon) error
	// DaemonDelete removes a daemon's entry (ErrNotFound if missing).
	DaemonDelete(id string) error
	// DaemonList returns every entry, live or stale, in id order.
	DaemonList() ([]*Daemon, error)
}

// Daemon is one daemon of a fleet as it last reported itself.
type Daemon struct {
	// ID is the engine's lease holder id: unique per process.
	ID   string `json:"id"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// Tools maps every tool the daemon serves to the SHA-256 of the plugin
	// binary that declares it ("" where the daemon's tools are not plugins).
	Tools     map[string]string `json:"tools"`
	StartedAt time.Time         `json:"started_at"`
	// SeenAt is the liveness stamp, renewed while the daemon runs: an
	// entry not renewed within the engine's staleness limit is a departed
	// daemon's and counts for nothing.
	SeenAt time.Time `json:"seen_at"`
}

// RunCounter is an optional ability of a Tx: counting the runs in one
// phase without reading them (an index walk, a COUNT). The engine checks
// for it and otherwise lists the runs, which reads every record.
type RunCounter interface {
	RunCount(phase Phase) (int, error)
	// OwnerRunCount counts owner's runs in phase, on an index of runs by
	// owner and phase: what admission's per-owner quotas read at the
	// door, shared by a fleet.
	OwnerRunCount(owner string, phase Phase) (int, error)
}

// Tx is one transaction. Methods are named noun-then-verb; each takes the
// record or a params struct. Reads inside Update see the transaction's own
// writes, lists included.
//
// Put methods insert or replace. Delete methods and RunUpdate return
// ErrNotFound when the record is missing. A limit of 0 or less means no
// limit. Lists are ordered by their key (id, name, ready time, deadline,
// Seq) and ties are broken by id.
type Tx interface {
	// Flow versions: the source and IR of every registered version, by
	// content hash, and the latest version of each flow name.
	// FlowVersionPut assigns a zero Seq (one above the name's latest, and
	// writes it into v); the version with the highest Seq is the latest.
	// Every field of v, Owner included, is kept as given and read back by
	// Get, Latest and List (the engine decides who may put; the store
	// only keeps what it is told).
	FlowVersionPut(v *FlowVersion) error
	FlowVersionGet(name, hash string) (*FlowVersion, error)
	FlowVersionLatest(name string) (*FlowVersion, error)
	// FlowVersionList returns the latest version of every flow, by name.
	FlowVersionList() ([]*FlowVersion, error)
	// FlowNameList returns the names of registered flows in name order,
	// after p.After, at most p.Limit (0: all): a listing pages by name and
	// reads each version on its own, never every IR at once.
	FlowNameList(p FlowNameListParams) ([]string, error)
	// FlowVersionHistory returns the versions of one flow name, newest
	// (highest Seq) first, ties by hash, up to limit: none for a name
	// never registered.
	FlowVersionHistory(name string, limit int) ([]*FlowVersion, error)
	// SourcePut stores a source bundle (the files registered together) by
	// its content hash; SourceGet reads it back.
	SourcePut(s *Source) error
	SourceGet(hash string) (*Source, error)

	// Runs.
	RunInsert(r *Run) error // ErrExists if the id is taken
	RunGet(id string) (*Run, error)
	RunUpdate(r *Run) error // ErrNotFound if missing
	// RunDelete removes the run record only; its tasks, continuation and
	// events are the caller's to delete.
	RunDelete(id string) error
	// RunList returns runs in id order, or newest first (p.Order).
	RunList(p RunListParams) ([]*Run, error)
	// RunParkedGroups and RunParkedList read the index of parked runs:
	// the runs in PhaseWaiting, by flow, then version, then Position,
	// then id. RunParkedGroups returns one entry per (version, position)
	// of flow's parked runs, in that order, after p.After, at most
	// p.Limit, each with its first run id: a backend skips the rest of a
	// group without reading it, so the groups cost what there are of
	// them, not what runs they hold. RunParkedList returns the ids of
	// one group's runs in id order, after p.After, at most p.Limit.
	// Registration reads them to say which parked runs of older versions
	// could go on under the new one (docs/design.md §2.2).
	RunParkedGroups(p RunParkedGroupsParams) ([]ParkedGroup, error)
	RunParkedList(p RunParkedListParams) ([]string, error)

	// Continuations: the engine's opaque, versioned encoding of a run's
	// position in its graph.
	ContinuationPut(runID string, data []byte) error
	ContinuationGet(runID string) ([]byte, error)
	ContinuationDelete(runID string) error

	// Dedup keys: (owner, request id) → run id and input hash.
	DedupGet(owner, requestID string) (*Dedup, error)
	DedupPut(d *Dedup) error
	DedupDelete(owner, requestID string) error

	// Tasks: the queue ordered by ready time. A task that waits (on a child
	// run, a human decision or a timer) is a task whose ReadyAt is in the
	// future; waking it moves ReadyAt to now. TaskPut inserts or replaces
	// and keeps the ready-time and child indexes in step.
	TaskPut(t *Task) error
	TaskGet(id string) (*Task, error)
	TaskDelete(id string) error
	// TaskListReady returns up to limit tasks with ReadyAt <= now that are
	// not leased, oldest ready time first.
	TaskListReady(now time.Time, limit int) ([]*Task, error)
	// TaskListReadyByOwner returns the head of every owner's queue: up to
	// p.PerOwner tasks of each owner with ReadyAt <= p.Now that are not
	// leased, oldest ready time first within an owner. Owners come in the
	// order of their oldest ready task (its ready time, then its id), each owner's
	// tasks together, and the list stops at p.Limit tasks, so an owner
	// with one ready task is listed however many tasks another has ahead
	// of it. Every task listed has its Owner set. This is the one listing
	// the dispatcher reads: the fair order across owners is made from it
	// (docs/design.md §4.1).
	TaskListReadyByOwner(p TaskListReadyByOwnerParams) ([]*Task, error)
	// TaskClaim takes the tasks p names for their leases, in one
	// operation: every task that exists, is not leased, is at its lease's
	// Attempt and is ready by p.Now is marked leased and its lease is
	// written (inserted or replaced); every other task is left as it is,
	// which is no error. It returns the tasks it claimed, as stored now,
	// in the order of p.Leases. It is the dispatcher's one claim
	// (docs/design.md §4.1, §10): the fair order decides which heads are
	// offered, the claim takes those still free.
	TaskClaim(p TaskClaimParams) ([]*Task, error)
	// TaskListByRun returns every task of a run (parked and leased
	// included), in task id order.
	TaskListByRun(runID string) ([]*Task, error)
	// TaskByChild finds the task waiting on childRunID through the indexed
	// WaitChild field.
	TaskByChild(childRunID string) (*Task, error)
	// TaskCount counts queued (unleased, parked included) and leased tasks.
	TaskCount() (queued, leased int, err error)

	// Leases: who holds a task and until when.
	LeasePut(l *Lease) error
	LeaseGet(taskID string) (*Lease, error)
	LeaseDelete(taskID string) error
	// LeaseListExpired returns leases whose Deadline is before now,
	// earliest deadline first.
	LeaseListExpired(now time.Time, limit int) ([]*Lease, error)
	// LeaseList returns every lease in task id order.
	LeaseList() ([]*Lease, error)

	// Idempotency records of tool calls, by idempotency key.
	IdemGet(key string) (*Idem, error)
	IdemPut(r *Idem) error

	// Dead letters: tasks that exhausted their retries, with every
	// attempt's error. DeadLetterPut replaces an earlier dead letter of the
	// same task; DeadLetterList returns the oldest (by At) first, those
	// that match every filter of p. DeadLetterGet returns ErrNotFound for
	// a task that is not dead-lettered; DeadLetterDelete of one is a
	// no-op (a redrive deletes the dead letter it sends back).
	DeadLetterPut(d *DeadLetter) error
	DeadLetterList(p DeadLetterListParams) ([]*DeadLetter, error)
	DeadLetterGet(taskID string) (*DeadLetter, error)
	DeadLetterDelete(taskID string) error

	// Events: the append-only timeline of a run. EventAppend assigns Seq,
	// strictly increasing within the store (and writes it into e);
	// EventList returns a run's events in Seq order.
	EventAppend(e *Event) error
	EventList(p EventListParams) ([]*Event, error)

	// Cohorts: one per visit of a fan-out node, with one item record per
	// child. CohortItemList returns a cohort's items in index order.
	CohortPut(c *Cohort) error
	CohortGet(runID, node string, visit int) (*Cohort, error)
	CohortItemPut(it *CohortItem) error
	CohortItemGet(runID, node string, visit, index int) (*CohortItem, error)
	CohortItemList(runID, node string, visit int) ([]*CohortItem, error)

	// Agent turns: one record per model turn of an agent node's visit
	// (AgentTurn). AgentTurnPut inserts or replaces (a turn is rewritten as
	// its calls end); AgentTurnGet reads one turn (ErrNotFound if it is not
	// journaled), so a call's end costs the same at turn 1 and turn 100;
	// AgentTurnList returns a visit's turns in turn order.
	AgentTurnPut(t *AgentTurn) error
	AgentTurnGet(runID, node string, visit, turn int) (*AgentTurn, error)
	AgentTurnList(p AgentTurnListParams) ([]*AgentTurn, error)

	// Retention: what pruning a finished run removes besides the run,
	// its continuation and its dedup key.
	EventDeleteRun(runID string) error
	// EventDeleteBefore removes the events of runID whose Seq is below
	// beforeSeq (the oldest part of a long-lived stream, such as the audit
	// stream, whose pseudo run never finishes).
	EventDeleteBefore(runID string, beforeSeq uint64) error
	CohortDeleteRun(runID string) error
	AgentTurnDeleteRun(runID string) error
	// IdemDeleteRun removes the idempotency records whose key starts with
	// runID + "/" (the engine's keys do).
	IdemDeleteRun(runID string) error
	// IdemListRun returns the idempotency records whose key starts with
	// runID + "/", in key order.
	IdemListRun(runID string) ([]*Idem, error)

	// Meta holds small named values (config version, schema version).
	MetaGet(key string) ([]byte, error)
	MetaPut(key string, value []byte) error

	// Service leases: which daemon does a fleet-wide job (ServiceLease;
	// TakeServiceLease decides, CheckServiceLease fences a write).
	ServiceLeaseGet(name string) (*ServiceLease, error)
	ServiceLeasePut(l *ServiceLease) error

	// Schedules: flows started on ticks (Schedule).
	ScheduleTx

	// Events of owners, where they meet their waits, and the triggers
	// they start runs of (OwnerEvent, EventSlot, Trigger).
	EventTx

	// Owners' spend windows (OwnerSpend).
	OwnerSpendTx
}

// FlowVersion is one registered version of one flow.
type FlowVersion struct {
	Name         string          `json:"name"`
	Hash         string          `json:"hash"` // content hash of the source bundle
	IR           json.RawMessage `json:"ir"`   // the flow's compiled graph
	RegisteredAt time.Time       `json:"registered_at"`
	// Owner registered this version. The owner of a flow name is the
	// owner of its latest version; only that owner may register new
	// versions of the name (docs/design.md §11). "" is a version from a
	// release before flows had owners: its name is unowned.
	Owner string `json:"owner,omitempty"`
	// Seq orders versions of one name; the latest has the highest Seq.
	Seq uint64 `json:"seq"`
}

// Source is a bundle of flow files registered together.
type Source struct {
	Hash  string       `json:"hash"`
	Files []SourceFile `json:"files"`
}

// SourceFile is one file of a Source.
type SourceFile struct {
	Path string `json:"path"`
	Src  []byte `json:"src"`
}

// Phase is where a run is in its life (docs/design.md §5).
type Phase string

// The phases of a run.
const (
	PhaseQueued     Phase = "queued"
	PhaseRunning    Phase = "running"
	PhaseWaiting    Phase = "waiting"
	PhaseCompleting Phase = "completing"
	PhaseCompleted  Phase = "completed"
	PhaseCancelled  Phase = "cancelled"
	PhaseFailed     Phase = "failed"
)

// Terminal reports whether the phase is final.
func (p Phase) Terminal() bool {
	return p == PhaseCompleted || p == PhaseCancelled || p == PhaseFailed
}

// RunError is the error a run or node ended with: a stable code and a
// message.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Run is one run of one flow version.
type Run struct {
	ID        string          `json:"id"`
	Flow      string          `json:"flow"`
	Version   string          `json:"version"` // flow content hash, pinned at start
	Owner     string          `json:"owner"`
	RequestID string          `json:"request_id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	InputHash string          `json:"input_hash"`
	Phase     Phase           `json:"phase"`
	Attempt   int             `json:"attempt"`
	// Depth is the number of subflow calls above this run (0 for a root);
	// Ancestors is the chain of flow names from the root to the parent.
	// Both are stored so the chain never needs walking.
	Depth     int      `json:"depth"`
	Ancestors []string `json:"ancestors,omitempty"`
	// DepthLimit is the deepest Depth a descendant may have: the tightest
	// max_depth of this run's flow and its ancestors' flows.
	DepthLimit int `json:"depth_limit"`
	// Parent run and the node in it that started this run, if any.
	ParentRunID string `json:"parent_run_id,omitempty"`
	ParentNode  string `json:"parent_node,omitempty"`
	// Cohort is set on a child of a fan-out: the item it works for.
	Cohort *CohortRef `json:"cohort,omitempty"`
	// ForkedFrom is set on a run forked from another: the source run and
	// the node visit the fork started at.
	ForkedFrom *ForkRef `json:"forked_from,omitempty"`
	// StartedBy says what started a run the daemon started itself
	// ("fork:RUN:NODE@VISIT", ...); "" for a run a client started.
	StartedBy string `json:"started_by,omitempty"`
	// Position is where a parked run waits, as the engine writes it when
	// the run parks: its node and a digest of the nodes whose results it
	// holds. The store indexes it, with Flow and Version, while the run is
	// in PhaseWaiting (RunParkedGroups); "" for a run parked before it was
	// kept.
	Position string `json:"position,omitempty"`
	// TraceID is the run's trace id (32 hex digits), fixed at acceptance:
	// the caller's, from its traceparent, else the run's own; "" on runs
	// accepted before it was kept (their own is derived from the id).
	TraceID string `json:"trace_id,omitempty"`
	// TraceState is the caller's W3C tracestate, kept beside its
	// traceparent; "" for none.
	TraceState string `json:"trace_state,omitempty"`
	// Raises are the latest budget raises made with a request id (at most
	// MaxRaises, the oldest dropped): a raise sent again with its id is
	// answered from here, never applied twice.
	Raises []BudgetRaise `json:"raises,omitempty"`

	ConfigVersion int64 `json:"config_version"`
	Budget        int64 `json:"budget"` // cost units reserved for the run
	Spent         int64 `json:"spent"`
	// Overspent is the part of Spent that tools and models reported above
	// what their calls reserved (a tool's bug, or a provider's usage past
	// the estimate): charged, since it was spent, but never a reason to
	// admit more work (docs/design.md §4).
	Overspent int64 `json:"overspent,omitempty"`
	// Escrow is the part of Budget held by this run's children that have
	// not ended: the sum of their Reserve. It changes only in the
	// transaction that admits a child (taken) or records its end
	// (returned), so the store alone says what is spoken for.
	Escrow int64 `json:"escrow,omitempty"`
	// Reserve is what this child run took out of its parent's remainder
	// when it was admitted (its Budget, or 0 under a parent without a
	// budget); its end returns it to the parent's Escrow.
	Reserve         int64           `json:"reserve,omitempty"`
	CancelRequested bool            `json:"cancel_requested,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
	Error           *RunError       `json:"error,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      time.Time       `json:"finished_at,omitzero"`
}

// ForkRef names where a fork began: a run, one of its nodes and the
// visit of that node (from 1).
type ForkRef struct {
	RunID string `json:"run_id"`
	Node  string `json:"node"`
	Visit int    `json:"visit"`
}

// FlowNameListParams selects a page of FlowNameList.
type FlowNameListParams struct {
	// After is an exclusive name to page from ("": the first).
	After string
	// Limit bounds the names returned (0: no limit).
	Limit int
}

// ParkedGroup is one group of the index of parked runs: flow's runs in
// PhaseWaiting on one version at one position.
type ParkedGroup struct {
	Version  string
	Position string
	// First is the group's first run id (in id order).
	First string
}

// ParkedGroupCursor is a place in RunParkedGroups' order: the group
// listed last.
type ParkedGroupCursor struct {
	Version  string
	Position string
}

// RunParkedGroupsParams selects groups of RunParkedGroups.
type RunParkedGroupsParams struct {
	Flow string
	// After is an exclusive group to page from (nil: the first).
	After *ParkedGroupCursor
	// Limit bounds the groups returned (0: no limit).
	Limit int
}

// RunParkedListParams selects run ids of one group of RunParkedList.
type RunParkedListParams struct {
	Flow     string
	Version  string
	Position string
	// After is an exclusive run id to page from ("": the first).
	After string
	// Limit bounds the ids returned (0: no limit).
	Limit int
}

// CompareParked orders parked groups as the index does: by version, then
// position.
func CompareParked(av, ap, bv, bp string) int {
	if c := strings.Compare(av, bv); c != 0 {
		return c
	}
	return strings.Compare(ap, bp)
}

// RunListParams filters RunList. Zero values mean "any".
type RunListParams struct {
	Owner       string
	Phase       Phase
	ParentRunID string
	Flow        string
	// FinishedBefore, if set, keeps only runs that finished before it.
	FinishedBefore time.Time
	// Order is the order of the list: run id order (the zero value) or
	// newest first.
	Order RunOrder
	// After is an exclusive run id to page from in id order; Before is the
	// last run of the previous page in newest-first order. Limit 0 means
	// no limit.
	After  string
	Before *RunCursor
	Limit  int
}

// RunOrder is the order RunList returns runs in.
type RunOrder string

// The orders of RunList.
const (
	// OrderID is run id order: stable, but random in time (ids are random).
	OrderID RunOrder = ""
	// OrderNewest is creation time, newest first; runs created at the same
	// instant come in id order. Every backend keeps an index for it per
	// owner, so a page costs the same however many runs there are.
	OrderNewest RunOrder = "newest"
)

// RunCursor is a place in the newest-first order: the run listed last.
type RunCursor struct {
	CreatedAt time.Time
	ID        string
}

// NewestBefore reports whether r comes after c in newest-first order:
// created earlier, or at the same instant with a greater id.
func (c *RunCursor) NewestBefore(r *Run) bool {
	if c == nil {
		return true
	}
	if !r.CreatedAt.Equal(c.CreatedAt) {
		return r.CreatedAt.Before(c.CreatedAt)
	}
	return r.ID > c.ID
}

// CompareNewest orders runs newest first, then by id.
func CompareNewest(a, b *Run) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Dedup maps a client's business id to the run it created. Flow and
// InputHash keep what the request meant, so that the same id sent with
// another flow or another input is refused rather than answered with a
// run it did not ask for.
// BudgetRaise is one raise of a run's budget made with a request id.
type BudgetRaise struct {
	RequestID string `json:"request_id"`
	Add       int64  `json:"add"`
}

// MaxRaises bounds Run.Raises: a client's retry of a raise comes soon
// after it, not after MaxRaises later raises of the same run.
const MaxRaises = 16

type Dedup struct {
	Owner     string `json:"owner"`
	RequestID string `json:"request_id"`
	RunID     string `json:"run_id"`
	// Flow is the flow the request named. Records written before it was
	// kept have none: a reader learns their flow from the run.
	Flow      string    `json:"flow,omitempty"`
	InputHash string    `json:"input_hash"`
	CreatedAt time.Time `json:"created_at"`
}

// TaskKind says what a task does when a worker holds it.
type TaskKind string

// The kinds of task.
const (
	// TaskStep advances a run from its continuation.
	TaskStep TaskKind = "step"
	// TaskItem runs one fan-out child that is a tool call.
	TaskItem TaskKind = "item"
	// TaskAgentCall runs one tool call an agent's turn asked for: Node,
	// Visit, Item (the turn) and Call place it, Tool names it.
	TaskAgentCall TaskKind = "agent_call"
)

// TaskListReadyByOwnerParams selects TaskListReadyByOwner's heads.
type TaskListReadyByOwnerParams struct {
	// Now: tasks ready at or before it are listed.
	Now time.Time
	// PerOwner bounds the tasks listed of each owner (0: no bound).
	PerOwner int
	// Limit bounds the tasks listed in all (0: no bound).
	Limit int
}

// TaskClaimParams names the tasks a TaskClaim takes.
type TaskClaimParams struct {
	// Now: only tasks ready at or before it are claimed.
	Now time.Time
	// Leases holds one lease per task to claim: its TaskID names the
	// task, its Attempt the attempt the task must still be at. A task
	// named twice is claimed for its first lease. At most MaxClaim.
	Leases []*Lease
}

// MaxClaim bounds the tasks one TaskClaim names.
const MaxClaim = 1024

// Task is one unit of work in the queue.
type Task struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	// Owner is the owner of the task's run: the unit the dispatcher
	// shares slots between. TaskPut takes it from the run when the task
	// names none, so a task is queued under its owner whoever wrote it;
	// records from before tasks had owners are indexed under their run's
	// owner when the store is upgraded, and listed with it.
	Owner string   `json:"owner,omitempty"`
	Kind  TaskKind `json:"kind"`
	Node  string   `json:"node,omitempty"`
	// Visit and Item locate a fan-out child's cohort item (TaskItem), or
	// with Call an agent's tool call (TaskAgentCall: Item is the turn).
	Visit int `json:"visit,omitempty"`
	Item  int `json:"item,omitempty"`
	Call  int `json:"call,omitempty"`
	// Tool is the tool an agent's call task calls.
	Tool    string `json:"tool,omitempty"`
	Attempt int    `json:"attempt"`
	// ReadyAt orders the queue; a future ReadyAt parks the task.
	ReadyAt time.Time `json:"ready_at"`
	// Leased is set while a worker holds the task (see Lease).
	Leased bool `json:"leased,omitempty"`
	// WaitChild is the child run this task waits on, indexed so the child
	// can wake it (docs/design.md §6).
	WaitChild string `json:"wait_child,omitempty"`
	// WaitKind says what the task waits for: "child", "human", "timer".
	WaitKind string `json:"wait_kind,omitempty"`
	// Woken says that what the task waits for came while a worker held
	// it: the holder must not park it past its commit (the engine's one
	// wake path sets it; putting the task unleased clears it).
	Woken bool `json:"woken,omitempty"`
	// Errors of earlier attempts, kept for the dead letter.
	Errors    []AttemptError `json:"errors,omitempty"`
	CreatedAt time.Time      `json:"created_at"`
}

// AttemptError is the error of one attempt of a task.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// Lease is a worker's hold on a task (docs/design.md §4).
type Lease struct {
	TaskID      string    `json:"task_id"`
	RunID       string    `json:"run_id"`
	Slot        int       `json:"slot"`
	BudgetSlice int64     `json:"budget_slice"`
	Deadline    time.Time `json:"deadline"`
	Attempt     int       `json:"attempt"`
	// Holder identifies the engine process that holds the lease.
	Holder string `json:"holder"`
}

// IdemState is the state of a tool call's idempotency record.
type IdemState string

// The states of an idempotency record.
const (
	IdemStarted IdemState = "started"
	IdemDone    IdemState = "done"
	// IdemNotSent: the call's last try never reached what performs it
	// (the tool said not_sent), so nothing happened and the call may be
	// made again; its next try makes the record "started" again.
	IdemNotSent IdemState = "not_sent"
)

// Idem records one logical tool call by its idempotency key. For a
// non-idempotent tool the "started" record is made durable before the call.
type Idem struct {
	Key       string          `json:"key"`
	RunID     string          `json:"run_id"`
	Node      string          `json:"node"`
	Tool      string          `json:"tool"`
	State     IdemState       `json:"state"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *RunError       `json:"error,omitempty"`
	StartedAt time.Time       `json:"started_at"`
	DoneAt    time.Time       `json:"done_at,omitzero"`
	// Holder is the engine process that wrote a started record: the one
	// whose plugins made the call. A reconcile probe asked elsewhere sees
	// another host's plugin state.
	Holder string `json:"holder,omitempty"`
}

// DeadLetter is a task that exhausted its retries.
type DeadLetter struct {
	TaskID string         `json:"task_id"`
	RunID  string         `json:"run_id"`
	Owner  string         `json:"owner"`
	Flow   string         `json:"flow"`
	Node   string         `json:"node"`
	Tool   string         `json:"tool,omitempty"`
	Errors []AttemptError `json:"errors"`
	At     time.Time      `json:"at"`
}

// DeadLetterListParams filters DeadLetterList; a zero field does not
// filter.
type DeadLetterListParams struct {
	Owner string
	// Flow and Tool keep the dead letters of that flow, of that tool.
	Flow string
	Tool string
	// Since keeps the dead letters whose At is not before it.
	Since time.Time
	Limit int
}

// Keeps says whether d passes every filter of p; the backends filter with
// it, so they agree on what a filter means.
func (p DeadLetterListParams) Keeps(d *DeadLetter) bool {
	return (p.Owner == "" || d.Owner == p.Owner) && (p.Flow == "" || d.Flow == p.Flow) &&
		(p.Tool == "" || d.Tool == p.Tool) && !d.At.Before(p.Since)
}

// Event is one entry of a run's timeline.
type Event struct {
	Seq     uint64         `json:"seq"`
	RunID   string         `json:"run_id"`
	At      time.Time      `json:"at"`
	Type    string         `json:"type"`
	Attempt int            `json:"attempt,omitempty"`
	Node    string         `json:"node,omitempty"`
	Detail  map[string]any `json:"detail,omitempty"`
}

// EventListParams selects events of one run after a sequence number.
type EventListParams struct {
	RunID    string
	AfterSeq uint64
	Limit    int
}
