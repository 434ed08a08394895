package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
)

// recordV1 is the format version of the records written today, kept in
// each row's v column; a reader refuses a version it does not know.
const recordV1 = 1

var (
	// errBadVersion: a row holds a record format this weir does not know.
	errBadVersion = errors.New("pgstore: record has an unknown format version")
)

// querier is what a transaction runs statements on.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// storeTx implements store.Tx on one PostgreSQL transaction. Each method
// first checks that the transaction is still open: fn must not retain tx.
//
// A statement that fails aborts the transaction (up to the function's
// savepoint), so the first such error is kept: the function's writes
// cannot commit even if it ignores the error. Conditions the contract
// expects (not found, exists) are never statement errors: they are read
// from the rows a statement touched.
//
// Writes whose outcome the function does not need (puts, which insert or
// replace, and the retention deletes) are queued and sent together, in
// one round trip, before the next statement that reads or when the
// function ends: a step's writes cost one round trip, not one each. Their
// failure is a database failure, which fails the function all the same.
type storeTx struct {
	q     querier
	ctx   context.Context
	batch *pgx.Batch // queued writes not sent yet
	storekit.TxGuard

	dbErr    error // the first statement error
	tooLarge error // set when the writes passed MaxUpdateBytes

	written map[string]int // bytes per record written, by table and key
	size    int

	// shared: announce wake-ups (Store.Wakes) with the commit.
	shared bool
	// orderEvents: lock each run's numbering before an event is appended
	// (several transactions may commit at once: several daemons, or one
	// transaction per Update).
	orderEvents bool
	wakes       map[string]bool // payloads to announce if fn succeeds
}

// wake queues an announcement to send with this function's writes.
func (t *storeTx) wake(payload string) {
	if !t.shared {
		return
	}
	if t.wakes == nil {
		t.wakes = map[string]bool{}
	}
	t.wakes[payload] = true
}

// queueWakes adds the function's announcements to its queued writes:
// NOTIFY is transactional, so they reach the listeners only if the
// writes commit (and not at all if the function is rolled back).
func (t *storeTx) queueWakes() {
	for p := range t.wakes {
		t.put(`SELECT pg_notify($1, current_schema() || '/' || $2)`, wakeChannel, p)
	}
	t.wakes = nil
}

var _ store.Tx = (*storeTx)(nil)

// sticky is the error that keeps this function's writes from committing.
func (t *storeTx) sticky() error {
	if t.dbErr != nil {
		return t.dbErr
	}
	return t.tooLarge
}

// writable is the first check of every write method: the guard's, then
// the refusal of a function that already wrote too much.
func (t *storeTx) writable() error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.tooLarge
}

// fail records a statement error and returns it wrapped.
func (t *storeTx) fail(err error) error {
	if t.dbErr == nil {
		t.dbErr = err
	}
	return fmt.Errorf("pgstore: %w", err)
}

// put queues a write whose outcome nothing waits for.
func (t *storeTx) put(sql string, args ...any) *pgx.QueuedQuery {
	if t.batch == nil {
		t.batch = &pgx.Batch{}
	}
	return t.batch.Queue(sql, args...)
}

// flush sends the queued writes, in one round trip.
func (t *storeTx) flush() error {
	b := t.batch
	if b == nil {
		return nil
	}
	t.batch = nil
	if err := t.q.SendBatch(t.ctx, b).Close(); err != nil {
		return t.fail(err)
	}
	return nil
}

// errRow is a row whose Scan fails with the error that kept the query
// from being sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// The statements of the Tx methods, each after the queued writes.

func (t *storeTx) exec(sql string, args ...any) (int64, error) {
	if err := t.flush(); err != nil {
		return 0, err
	}
	tag, err := t.q.Exec(t.ctx, sql, args...)
	if err != nil {
		return 0, t.fail(err)
	}
	return tag.RowsAffected(), nil
}

func (t *storeTx) queryRow(sql string, args ...any) pgx.Row {
	if err := t.flush(); err != nil {
		return errRow{err}
	}
	return t.q.QueryRow(t.ctx, sql, args...)
}

func (t *storeTx) query(sql string, args ...any) (pgx.Rows, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	return t.q.Query(t.ctx, sql, args...)
}

// charge counts n bytes written to the record named by key and refuses
// the write when the function's writes pass MaxUpdateBytes.
func (t *storeTx) charge(key string, n int) error {
	if t.written == nil {
		t.written = map[string]int{}
	}
	n += len(key)
	t.size += n - t.written[key]
	t.written[key] = n
	if t.size > MaxUpdateBytes {
		t.tooLarge = fmt.Errorf("pgstore: one Update writes %d bytes, more than the %d one Update may (MaxUpdateBytes): %w",
			t.size, MaxUpdateBytes, store.ErrTooLarge)
		return t.tooLarge
	}
	return nil
}

// text reports whether every s can be a value of a text column: ids
// refused by store.CheckID never reach a statement, and a read that names
// one finds nothing.
func text(ss ...string) bool {
	for _, s := range ss {
		if strings.Contains(s, "\x00") || !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func notFound(what string) error { return fmt.Errorf("%s: %w", what, store.ErrNotFound) }

// putRecord queues sql with args and then the version and data of rec
// (encodeCharged) as its last two parameters.
func (t *storeTx) putRecord(key string, rec any, sql string, args ...any) error {
	data, err := t.encodeCharged(key, rec)
	if err != nil {
		return err
	}
	t.put(sql, append(args, recordV1, data)...)
	return nil
}

// encodeCharged encodes rec and charges it to the Update under key (the
// bytes one Update may write, MaxUpdateBytes).
func (t *storeTx) encodeCharged(key string, rec any) ([]byte, error) {
	data, err := encode(rec)
	if err != nil {
		return nil, err
	}
	if err := t.charge(key, len(data)); err != nil {
		return nil, err
	}
	return data, nil
}

func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("pgstore: encode: %w", err)
	}
	return b, nil
}

func decode(v int16, data []byte, dst any) error {
	if v != recordV1 {
		return versionError(recordName(dst), v)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return fmt.Errorf("pgstore: decode %s: %w", recordName(dst), err)
	}
	return nil
}

// versionError refuses a record of a format this weir does not know
// (written by a newer release), naming it and both versions.
func versionError(what string, v int16) error {
	return fmt.Errorf("%w: %s record has format version %d, this weir reads version %d (was the database written by a newer weir?)",
		errBadVersion, what, v, recordV1)
}

// recordName names the record type dst points to, for versionError.
func recordName(dst any) string {
	n := fmt.Sprintf("%T", dst)
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		n = n[i+1:]
	}
	return n
}

// getRecord reads the one record a query selects (v, data) into dst, or
// returns ErrNotFound.
func (t *storeTx) getRecord(dst any, sql string, args ...any) error {
	var v int16
	var data []byte
	err := t.queryRow(sql, args...).Scan(&v, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return t.fail(err)
	}
	return decode(v, data, dst)
}

// getOne reads the one record (v, data) a query finds into a new T:
// ErrNotFound when there is none, or when a key cannot be stored text
// (no record can have it).
func getOne[T any](t *storeTx, keys []string, sql string, args ...any) (*T, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(keys...) {
		return nil, store.ErrNotFound
	}
	r := new(T)
	if err := t.getRecord(r, sql, args...); err != nil {
		return nil, err
	}
	return r, nil
}

// listRecords decodes every row (v, data) a query returns into a new T,
// after the read check (a List method may call it alone).
func listRecords[T any](t *storeTx, sql string, args ...any) ([]*T, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	return queryRecords[T, struct{}](t, nil, sql, args...)
}

// queryRecords decodes every row a query returns into a new T: rows of
// (v, data), or with lead set, of (k, v, data), where lead(r, k) then
// gives the record the column it does not carry itself (an event's seq,
// a task's owner).
func queryRecords[T, K any](t *storeTx, lead func(r *T, k K), sql string, args ...any) ([]*T, error) {
	rows, err := t.query(sql, args...)
	if err != nil {
		return nil, t.fail(err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		var k K
		var v int16
		var data []byte
		dest := []any{&v, &data}
		if lead != nil {
			dest = []any{&k, &v, &data}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, t.fail(err)
		}
		r := new(T)
		if err := decode(v, data, r); err != nil {
			return nil, err
		}
		if lead != nil {
			lead(r, k)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(err)
	}
	return out, nil
}

// limitClause is the LIMIT of a list: none for limit <= 0.
func limitClause(limit int) string {
	if limit <= 0 {
		return ""
	}
	return fmt.Sprintf(" LIMIT %d", limit)
}

// The range of times nanos keeps exactly.
var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// nanos is t as nanoseconds since 1970 for the columns that order records
// by time, saturated outside the years 1677 to 2262: the zero time (ready
// since forever) is the least value.
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// ---- flow versions and sources ----

func (t *storeTx) FlowVersionPut(v *store.FlowVersion) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("flow version", v.Name, v.Hash); err != nil {
		return err
	}
	var latest int64
	err := t.queryRow(`SELECT seq FROM flow_latest WHERE name = $1`, v.Name).Scan(&latest)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return t.fail(err)
	}
	if v.Seq == 0 {
		v.Seq = uint64(latest) + 1
	}
	data, err := t.encodeCharged("fv\x00"+v.Name+"\x00"+v.Hash, v)
	if err != nil {
		return err
	}
	t.put(`INSERT INTO flow_versions (name, hash, seq, v, data) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name, hash) DO UPDATE SET seq = excluded.seq, v = excluded.v, data = excluded.data`,
		v.Name, v.Hash, int64(v.Seq), recordV1, data)
	if int64(v.Seq) > latest {
		t.put(`INSERT INTO flow_latest (name, seq, hash) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`, v.Name, int64(v.Seq), v.Hash)
	}
	return nil
}

func (t *storeTx) FlowVersionGet(name, hash string) (*store.FlowVersion, error) {
	return getOne[store.FlowVersion](t, []string{name, hash}, `SELECT v, data FROM flow_versions WHERE name = $1 AND hash = $2`, name, hash)
}

func (t *storeTx) FlowVersionLatest(name string) (*store.FlowVersion, error) {
	return getOne[store.FlowVersion](t, []string{name}, `SELECT fv.v, fv.data FROM flow_latest l
		JOIN flow_versions fv ON fv.name = l.name AND fv.hash = l.hash WHERE l.name = $1`, name)
}

func (t *storeTx) FlowVersionList() ([]*store.FlowVersion, error) {
	return listRecords[store.FlowVersion](t, `SELECT fv.v, fv.data FROM flow_latest l
		JOIN flow_versions fv ON fv.name = l.name AND fv.hash = l.hash ORDER BY l.name`)
}

func (t *storeTx) FlowNameList(p store.FlowNameListParams) ([]string, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(p.After) {
		return []string{}, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = math.MaxInt32
	}
	rows, err := t.query(`SELECT name FROM flow_latest WHERE name > $1 ORDER BY name LIMIT $2`, p.After, limit)
	if err != nil {
		return nil, t.fail(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, t.fail(err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(err)
	}
	return out, nil
}

func (t *storeTx) FlowVersionHistory(name string, limit int) ([]*store.FlowVersion, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(name) {
		return []*store.FlowVersion{}, nil
	}
	if limit <= 0 {
		limit = math.MaxInt32
	}
	return listRecords[store.FlowVersion](t, `SELECT v, data FROM flow_versions WHERE name = $1 ORDER BY seq DESC, hash LIMIT $2`, name, limit)
}

func (t *storeTx) SourcePut(s *store.Source) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("source hash", s.Hash); err != nil {
		return err
	}
	return t.putRecord("s\x00"+s.Hash, s, `INSERT INTO sources (hash, v, data) VALUES ($1, $2, $3)
		ON CONFLICT (hash) DO UPDATE SET v = excluded.v, data = excluded.data`, s.Hash)
}

func (t *storeTx) SourceGet(hash string) (*store.Source, error) {
	return getOne[store.Source](t, []string{hash}, `SELECT v, data FROM sources WHERE hash = $1`, hash)
}

// ---- runs ----

// finishedNanos is the finished_ns column of r: NULL while unfinished.
func finishedNanos(r *store.Run) *int64 {
	if r.FinishedAt.IsZero() {
		return nil
	}
	n := nanos(r.FinishedAt)
	return &n
}

// writeRun is the write of r by RunInsert and RunUpdate: the write check,
// r's ids, its bytes charged, then sql with r's columns as $1 to $11 (id,
// owner, phase, parent_run_id, finished_ns, v, data, created_ns, flow,
// version, position). It returns the rows sql wrote.
func (t *storeTx) writeRun(r *store.Run, sql string) (int64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	if err := store.CheckRun(r); err != nil {
		return 0, err
	}
	data, err := t.encodeCharged("r\x00"+r.ID, r)
	if err != nil {
		return 0, err
	}
	return t.exec(sql, r.ID, r.Owner, string(r.Phase), r.ParentRunID, finishedNanos(r), recordV1, data, nanos(r.CreatedAt), r.Flow, r.Version, r.Position)
}

func (t *storeTx) RunInsert(r *store.Run) error {
	n, err := t.writeRun(r, `INSERT INTO runs (id, owner, phase, parent_run_id, finished_ns, v, data, created_ns, flow, version, position) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (id) DO NOTHING`)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %s: %w", r.ID, store.ErrExists)
	}
	return nil
}

func (t *storeTx) RunGet(id string) (*store.Run, error) {
	return getOne[store.Run](t, []string{id}, `SELECT v, data FROM runs WHERE id = $1`, id)
}

func (t *storeTx) RunUpdate(r *store.Run) error {
	n, err := t.writeRun(r, `UPDATE runs SET owner = $2, phase = $3, parent_run_id = $4, finished_ns = $5, v = $6, data = $7, created_ns = $8, flow = $9, version = $10, position = $11 WHERE id = $1`)
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound("run " + r.ID)
	}
	if r.CancelRequested {
		t.wake(wakeCancel + r.ID)
	}
	if r.Phase.Terminal() {
		// A wait held on the run on any daemon ends now (one NOTIFY a
		// run, not one a step).
		t.wake(wakeFinished + r.ID)
	}
	return nil
}

func (t *storeTx) RunDelete(id string) error {
	return t.deleteOne("run "+id, `DELETE FROM runs WHERE id = $1`, id)
}

// deleteOne is a Delete method: the write check, then a DELETE of one
// record, returning ErrNotFound when it deleted nothing.
func (t *storeTx) deleteOne(what, sql string, args ...any) error {
	if err := t.writable(); err != nil {
		return err
	}
	for _, a := range args {
		if s, ok := a.(string); ok && !text(s) {
			return notFound(what)
		}
	}
	n, err := t.exec(sql, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound(what)
	}
	return nil
}

// RunList filters and orders in one query; the planner walks the index of
// the most selective filter (parent, owner or phase) in id order, or the
// owner's runs_owner_created index newest first.
func (t *storeTx) RunList(p store.RunListParams) ([]*store.Run, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(p.Owner, string(p.Phase), p.ParentRunID, p.Flow) {
		return nil, nil
	}
	if !text(p.After) {
		return nil, fmt.Errorf("%w: the run id to list after", store.ErrBadID)
	}
	if p.Before != nil && !text(p.Before.ID) {
		return nil, fmt.Errorf("%w: the run id to list before", store.ErrBadID)
	}
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if p.Owner != "" {
		add("owner = $%d", p.Owner)
	}
	if p.Phase != "" {
		add("phase = $%d", string(p.Phase))
	}
	if p.ParentRunID != "" {
		add("parent_run_id = $%d", p.ParentRunID)
	}
	if !p.FinishedBefore.IsZero() {
		add("finished_ns < $%d", nanos(p.FinishedBefore))
	}
	if p.Flow != "" {
		add("flow = $%d", p.Flow)
	}
	if p.After != "" {
		add("id > $%d", p.After)
	}
	if p.Before != nil {
		// Created earlier, or at the same instant with a greater id.
		args = append(args, nanos(p.Before.CreatedAt), p.Before.ID)
		where = append(where, fmt.Sprintf("(created_ns < $%d OR (created_ns = $%d AND id > $%d))", len(args)-1, len(args)-1, len(args)))
	}
	sql := "SELECT v, data FROM runs"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	order := " ORDER BY id"
	if p.Order == store.OrderNewest {
		order = " ORDER BY created_ns DESC, id" // the runs_owner_created index
	}
	return listRecords[store.Run](t, sql+order+limitClause(p.Limit), args...)
}

// RunParkedGroups reads the runs_parked index as a loose index scan: each
// step of the recursion takes the first row past the group before, so a
// group of 10,000 runs costs one index probe, not 10,000 rows.
func (t *storeTx) RunParkedGroups(p store.RunParkedGroupsParams) ([]store.ParkedGroup, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(p.Flow) || (p.After != nil && !text(p.After.Version, p.After.Position)) {
		return nil, nil
	}
	// Without a cursor the first step starts at ('', ''), which every
	// group is at or past.
	after := store.ParkedGroupCursor{}
	first := `(SELECT version, position, id FROM runs WHERE phase = 'waiting' AND flow = $1 AND (version, position) >= ($2, $3) ORDER BY version, position, id LIMIT 1)`
	if p.After != nil {
		after = *p.After
		first = strings.Replace(first, ">=", ">", 1)
	}
	rows, err := t.query(`WITH RECURSIVE g(version, position, id) AS (`+first+`
		UNION ALL
		SELECT x.version, x.position, x.id FROM g, LATERAL (SELECT version, position, id FROM runs
			WHERE phase = 'waiting' AND flow = $1 AND (version, position) > (g.version, g.position)
			ORDER BY version, position, id LIMIT 1) x)
		SELECT version, position, id FROM g`+limitClause(p.Limit), p.Flow, after.Version, after.Position)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ParkedGroup
	for rows.Next() {
		var g store.ParkedGroup
		if err := rows.Scan(&g.Version, &g.Position, &g.First); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// RunParkedList reads one group of the runs_parked index, ids only.
func (t *storeTx) RunParkedList(p store.RunParkedListParams) ([]string, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(p.Flow, p.Version, p.Position, p.After) {
		return nil, nil
	}
	rows, err := t.query(`SELECT id FROM runs WHERE phase = 'waiting' AND flow = $1 AND version = $2 AND position = $3 AND id > $4 ORDER BY id`+limitClause(p.Limit),
		p.Flow, p.Version, p.Position, p.After)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// ---- continuations ----

func (t *storeTx) ContinuationPut(runID string, data []byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("run id", runID); err != nil {
		return err
	}
	if err := t.charge("c\x00"+runID, len(data)); err != nil {
		return err
	}
	if data == nil {
		data = []byte{}
	}
	t.put(`INSERT INTO continuations (run_id, v, data) VALUES ($1, $2, $3)
		ON CONFLICT (run_id) DO UPDATE SET v = excluded.v, data = excluded.data`, runID, recordV1, data)
	return nil
}

func (t *storeTx) ContinuationGet(runID string) ([]byte, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(runID) {
		return nil, store.ErrNotFound
	}
	var v int16
	var data []byte
	err := t.queryRow(`SELECT v, data FROM continuations WHERE run_id = $1`, runID).Scan(&v, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, t.fail(err)
	}
	if v != recordV1 {
		return nil, versionError("continuation", v)
	}
	return data, nil // scanned into a new slice: the caller's to keep
}

func (t *storeTx) ContinuationDelete(runID string) error {
	return t.deleteOne("continuation", `DELETE FROM continuations WHERE run_id = $1`, runID)
}

// ---- dedup ----

func (t *storeTx) DedupGet(owner, requestID string) (*store.Dedup, error) {
	return getOne[store.Dedup](t, []string{owner, requestID}, `SELECT v, data FROM dedup WHERE owner = $1 AND request_id = $2`, owner, requestID)
}

func (t *storeTx) DedupPut(d *store.Dedup) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckDedup(d); err != nil {
		return err
	}
	return t.putRecord("d\x00"+d.Owner+"\x00"+d.RequestID, d, `INSERT INTO dedup (owner, request_id, v, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (owner, request_id) DO UPDATE SET v = excluded.v, data = excluded.data`, d.Owner, d.RequestID)
}

func (t *storeTx) DedupDelete(owner, requestID string) error {
	return t.deleteOne("dedup key", `DELETE FROM dedup WHERE owner = $1 AND request_id = $2`, owner, requestID)
}

// ---- tasks ----

func (t *storeTx) TaskPut(tk *store.Task) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckTask(tk); err != nil {
		return err
	}
	data, err := t.encodeCharged("t\x00"+tk.ID, tk)
	if err != nil {
		return err
	}
	// A task that names no owner is its run's, read in the statement
	// itself: no round trip more for acceptance.
	t.put(`INSERT INTO tasks (id, run_id, ready_ns, leased, wait_child, v, data, owner) VALUES ($1, $2, $3, $4, $5, $6, $7,
			coalesce(nullif($8, ''), (SELECT owner FROM runs WHERE id = $2), ''))
		ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, ready_ns = excluded.ready_ns, leased = excluded.leased,
			wait_child = excluded.wait_child, v = excluded.v, data = excluded.data, owner = excluded.owner`,
		tk.ID, tk.RunID, nanos(tk.ReadyAt), tk.Leased, tk.WaitChild, recordV1, data, tk.Owner)
	if !tk.Leased && !tk.ReadyAt.After(time.Now()) {
		t.wake(wakeReady)
	}
	return nil
}

func (t *storeTx) TaskGet(id string) (*store.Task, error) {
	return getOne[store.Task](t, []string{id}, `SELECT v, data FROM tasks WHERE id = $1`, id)
}

func (t *storeTx) TaskDelete(id string) error {
	return t.deleteOne("task "+id, `DELETE FROM tasks WHERE id = $1`, id)
}

// TaskListReady walks the partial index of unleased tasks by ready time
// and stops at the first one after now: parked tasks (ready in the future)
// and leased ones (not in the index) cost nothing.
func (t *storeTx) TaskListReady(now time.Time, limit int) ([]*store.Task, error) {
	return listRecords[store.Task](t, `SELECT v, data FROM tasks WHERE NOT leased AND ready_ns <= $1
		ORDER BY ready_ns, id`+limitClause(limit), nanos(now))
}

// TaskListReadyByOwner finds the owners with ready work by a skip scan of
// the (owner, ready_ns, id) index of unleased tasks (one index probe per
// owner, however many tasks each has), reads each owner's heads through
// LATERAL, and orders the owners by their oldest head. In a fleet every
// daemon reads the same heads from this one statement.
func (t *storeTx) TaskListReadyByOwner(p store.TaskListReadyByOwnerParams) ([]*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	var perOwner, limit any
	if p.PerOwner > 0 {
		perOwner = p.PerOwner
	}
	if p.Limit > 0 {
		limit = p.Limit
	}
	return queryRecords(t, func(tk *store.Task, owner string) {
		tk.Owner = owner // the record may name none: the column is its run's
	}, `WITH RECURSIVE owners(owner) AS (
			(SELECT owner FROM tasks WHERE NOT leased AND ready_ns <= $1 ORDER BY owner LIMIT 1)
			UNION ALL
			SELECT (SELECT t.owner FROM tasks t WHERE NOT t.leased AND t.ready_ns <= $1 AND t.owner > o.owner ORDER BY t.owner LIMIT 1)
			FROM owners o WHERE o.owner IS NOT NULL
		)
		SELECT h.owner, h.v, h.data FROM owners o CROSS JOIN LATERAL (
			SELECT t.owner, t.ready_ns, t.id, t.v, t.data FROM tasks t
			WHERE NOT t.leased AND t.owner = o.owner AND t.ready_ns <= $1
			ORDER BY t.ready_ns, t.id LIMIT $2::bigint) h
		WHERE o.owner IS NOT NULL
		WINDOW w AS (PARTITION BY h.owner ORDER BY h.ready_ns, h.id)
		ORDER BY first_value(h.ready_ns) OVER w, first_value(h.id) OVER w, h.ready_ns, h.id
		LIMIT $3::bigint`, nanos(p.Now), perOwner, limit)
}

func (t *storeTx) TaskListByRun(runID string) ([]*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(runID) {
		return nil, nil
	}
	return listRecords[store.Task](t, `SELECT v, data FROM tasks WHERE run_id = $1 ORDER BY id`, runID)
}

func (t *storeTx) TaskByChild(childRunID string) (*store.Task, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if childRunID == "" || !text(childRunID) {
		return nil, notFound("task waiting on " + childRunID)
	}
	tk := new(store.Task)
	// The repeated condition lets a generic plan use the partial index.
	err := t.getRecord(tk, `SELECT v, data FROM tasks WHERE wait_child = $1 AND wait_child <> '' ORDER BY id LIMIT 1`, childRunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("task waiting on " + childRunID)
	}
	if err != nil {
		return nil, err
	}
	return tk, nil
}

// TaskCount counts the rows (an index-only scan): a counter row kept in
// step would be written by every task change and make all of them
// conflict with each other.
func (t *storeTx) TaskCount() (queued, leased int, err error) {
	if err := t.Open(); err != nil {
		return 0, 0, err
	}
	err = t.queryRow(`SELECT count(*) FILTER (WHERE NOT leased), count(*) FILTER (WHERE leased) FROM tasks`).Scan(&queued, &leased)
	if err != nil {
		return 0, 0, t.fail(err)
	}
	return queued, leased, nil
}

// ---- leases ----

func (t *storeTx) LeasePut(l *store.Lease) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("lease task id", l.TaskID); err != nil {
		return err
	}
	return t.putRecord("l\x00"+l.TaskID, l, `INSERT INTO leases (task_id, deadline_ns, v, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (task_id) DO UPDATE SET deadline_ns = excluded.deadline_ns, v = excluded.v, data = excluded.data`,
		l.TaskID, nanos(l.Deadline))
}

func (t *storeTx) LeaseGet(taskID string) (*store.Lease, error) {
	return getOne[store.Lease](t, []string{taskID}, `SELECT v, data FROM leases WHERE task_id = $1`, taskID)
}

func (t *storeTx) LeaseDelete(taskID string) error {
	return t.deleteOne("lease of "+taskID, `DELETE FROM leases WHERE task_id = $1`, taskID)
}

func (t *storeTx) LeaseListExpired(now time.Time, limit int) ([]*store.Lease, error) {
	return listRecords[store.Lease](t, `SELECT v, data FROM leases WHERE deadline_ns < $1
		ORDER BY deadline_ns, task_id`+limitClause(limit), nanos(now))
}

func (t *storeTx) LeaseList() ([]*store.Lease, error) {
	return listRecords[store.Lease](t, `SELECT v, data FROM leases ORDER BY task_id`)
}

// ---- idempotency records ----

func (t *storeTx) IdemGet(key string) (*store.Idem, error) {
	return getOne[store.Idem](t, []string{key}, `SELECT v, data FROM idem WHERE key = $1`, key)
}

func (t *storeTx) IdemPut(r *store.Idem) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("idempotency key", r.Key); err != nil {
		return err
	}
	return t.putRecord("i\x00"+r.Key, r, `INSERT INTO idem (key, v, data) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET v = excluded.v, data = excluded.data`, r.Key)
}

// ---- dead letters ----

func (t *storeTx) DeadLetterPut(d *store.DeadLetter) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckDeadLetter(d); err != nil {
		return err
	}
	return t.putRecord("dl\x00"+d.TaskID, d, `INSERT INTO dead_letters (task_id, owner, at_ns, v, data) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner, at_ns = excluded.at_ns, v = excluded.v, data = excluded.data`,
		d.TaskID, d.Owner, nanos(d.At))
}

// DeadLetterList filters flow and tool on the record itself (its JSON):
// the table keeps neither in a column, and a dead letter's owner and time
// narrow the scan through the indexes first.
func (t *storeTx) DeadLetterList(p store.DeadLetterListParams) ([]*store.DeadLetter, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(p.Owner, p.Flow, p.Tool) {
		return nil, nil
	}
	var where []string
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if p.Owner != "" {
		arg("owner = $%d", p.Owner)
	}
	if !p.Since.IsZero() {
		arg("at_ns >= $%d", nanos(p.Since))
	}
	if p.Flow != "" {
		arg("convert_from(data, 'UTF8')::jsonb->>'flow' = $%d", p.Flow)
	}
	if p.Tool != "" {
		arg("convert_from(data, 'UTF8')::jsonb->>'tool' = $%d", p.Tool)
	}
	sql := `SELECT v, data FROM dead_letters`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, " AND ")
	}
	return listRecords[store.DeadLetter](t, sql+` ORDER BY at_ns, task_id`+limitClause(p.Limit), args...)
}

func (t *storeTx) DeadLetterGet(taskID string) (*store.DeadLetter, error) {
	return getOne[store.DeadLetter](t, []string{taskID}, `SELECT v, data FROM dead_letters WHERE task_id = $1`, taskID)
}

func (t *storeTx) DeadLetterDelete(taskID string) error {
	err := t.deleteOne("dead letter of "+taskID, `DELETE FROM dead_letters WHERE task_id = $1`, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// ---- events ----

// EventAppend numbers the event from the events_seq sequence in the same
// statement that inserts it. The record is kept without its Seq, which is
// the row's key and set on every read.
func (t *storeTx) EventAppend(e *store.Event) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("event run id", e.RunID); err != nil {
		return err
	}
	rec := *e
	rec.Seq = 0
	// Events are only added: each counts on its own.
	data, err := t.encodeCharged(fmt.Sprintf("ev\x00%d", len(t.written)), &rec)
	if err != nil {
		return err
	}
	if t.orderEvents {
		// Held to the commit: a transaction appending to the same run
		// waits, then draws a higher number and commits after this one, so
		// a reader following AfterSeq never passes over a number that
		// commits later.
		t.put(`SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || '/' || $2))`, int32(eventLock), e.RunID)
	}
	// Sent with the queued writes, in their round trip.
	var seq int64
	t.put(`INSERT INTO events (seq, run_id, v, data) VALUES (nextval('events_seq'), $1, $2, $3) RETURNING seq`,
		e.RunID, recordV1, data).QueryRow(func(row pgx.Row) error { return row.Scan(&seq) })
	if err := t.flush(); err != nil {
		return err
	}
	e.Seq = uint64(seq)
	return nil
}

func (t *storeTx) EventList(p store.EventListParams) ([]*store.Event, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if p.AfterSeq >= math.MaxInt64 || !text(p.RunID) {
		return nil, nil
	}
	return queryRecords(t, func(e *store.Event, seq int64) { e.Seq = uint64(seq) },
		`SELECT seq, v, data FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq`+limitClause(p.Limit),
		p.RunID, int64(p.AfterSeq))
}

// ---- cohorts and agent turns ----

func (t *storeTx) CohortPut(c *store.Cohort) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("cohort run/node", c.RunID, c.Node); err != nil {
		return err
	}
	return t.putRecord(fmt.Sprintf("co\x00%s\x00%s\x00%d", c.RunID, c.Node, c.Visit), c, `INSERT INTO cohorts (run_id, node, visit, v, data) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (run_id, node, visit) DO UPDATE SET v = excluded.v, data = excluded.data`,
		c.RunID, c.Node, int64(c.Visit))
}

func (t *storeTx) CohortGet(runID, node string, visit int) (*store.Cohort, error) {
	return getOne[store.Cohort](t, []string{runID, node}, `SELECT v, data FROM cohorts WHERE run_id = $1 AND node = $2 AND visit = $3`, runID, node, int64(visit))
}

func (t *storeTx) CohortItemPut(it *store.CohortItem) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckCohortItem(it); err != nil {
		return err
	}
	return t.putRecord(fmt.Sprintf("ci\x00%s\x00%s\x00%d\x00%d", it.RunID, it.Node, it.Visit, it.Index), it, `INSERT INTO cohort_items (run_id, node, visit, idx, v, data) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (run_id, node, visit, idx) DO UPDATE SET v = excluded.v, data = excluded.data`,
		it.RunID, it.Node, int64(it.Visit), int64(it.Index))
}

func (t *storeTx) CohortItemGet(runID, node string, visit, index int) (*store.CohortItem, error) {
	return getOne[store.CohortItem](t, []string{runID, node}, `SELECT v, data FROM cohort_items WHERE run_id = $1 AND node = $2 AND visit = $3 AND idx = $4`,
		runID, node, int64(visit), int64(index))
}

func (t *storeTx) CohortItemList(runID, node string, visit int) ([]*store.CohortItem, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(runID, node) {
		return nil, nil
	}
	return listRecords[store.CohortItem](t, `SELECT v, data FROM cohort_items WHERE run_id = $1 AND node = $2 AND visit = $3 ORDER BY idx`,
		runID, node, int64(visit))
}

func (t *storeTx) AgentTurnPut(at *store.AgentTurn) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckAgentTurn(at); err != nil {
		return err
	}
	return t.putRecord(fmt.Sprintf("at\x00%s\x00%s\x00%d\x00%d", at.RunID, at.Node, at.Visit, at.Turn), at, `INSERT INTO agent_turns (run_id, node, visit, turn, v, data) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (run_id, node, visit, turn) DO UPDATE SET v = excluded.v, data = excluded.data`,
		at.RunID, at.Node, int64(at.Visit), int64(at.Turn))
}

func (t *storeTx) AgentTurnGet(runID, node string, visit, turn int) (*store.AgentTurn, error) {
	return getOne[store.AgentTurn](t, []string{runID, node}, `SELECT v, data FROM agent_turns WHERE run_id = $1 AND node = $2 AND visit = $3 AND turn = $4`,
		runID, node, int64(visit), int64(turn))
}

func (t *storeTx) AgentTurnList(p store.AgentTurnListParams) ([]*store.AgentTurn, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(p.RunID, p.Node) {
		return nil, nil
	}
	return listRecords[store.AgentTurn](t, `SELECT v, data FROM agent_turns WHERE run_id = $1 AND node = $2 AND visit = $3 ORDER BY turn`,
		p.RunID, p.Node, int64(p.Visit))
}

// ---- retention ----

// deleteRun deletes every row of a run from the tables named.
func (t *storeTx) deleteRun(runID string, tables ...string) error {
	if err := t.writable(); err != nil {
		return err
	}
	if !text(runID) {
		return nil
	}
	for _, table := range tables {
		t.put(`DELETE FROM `+table+` WHERE run_id = $1`, runID)
	}
	return nil
}

func (t *storeTx) EventDeleteRun(runID string) error { return t.deleteRun(runID, "events") }

func (t *storeTx) EventDeleteBefore(runID string, beforeSeq uint64) error {
	if err := t.writable(); err != nil {
		return err
	}
	if !text(runID) || beforeSeq == 0 {
		return nil
	}
	if beforeSeq > math.MaxInt64 {
		beforeSeq = math.MaxInt64
	}
	t.put(`DELETE FROM events WHERE run_id = $1 AND seq < $2`, runID, int64(beforeSeq))
	return nil
}

func (t *storeTx) CohortDeleteRun(runID string) error {
	return t.deleteRun(runID, "cohorts", "cohort_items")
}

func (t *storeTx) AgentTurnDeleteRun(runID string) error { return t.deleteRun(runID, "agent_turns") }

// idemRange is the key range of a run's idempotency records: keys that
// start with runID + "/", which in the "C" collation sort from that prefix
// up to runID + "0" ('0' follows '/').
func idemRange(runID string) (lower, upper string) { return runID + "/", runID + "0" }

func (t *storeTx) IdemDeleteRun(runID string) error {
	if err := t.writable(); err != nil {
		return err
	}
	if !text(runID) {
		return nil
	}
	lo, hi := idemRange(runID)
	t.put(`DELETE FROM idem WHERE key >= $1 AND key < $2`, lo, hi)
	return nil
}

func (t *storeTx) IdemListRun(runID string) ([]*store.Idem, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(runID) {
		return nil, nil
	}
	lo, hi := idemRange(runID)
	return listRecords[store.Idem](t, `SELECT v, data FROM idem WHERE key >= $1 AND key < $2 ORDER BY key`, lo, hi)
}

// ---- meta ----

func (t *storeTx) MetaGet(key string) ([]byte, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	if !text(key) {
		return nil, store.ErrNotFound
	}
	var value []byte
	err := t.queryRow(`SELECT value FROM meta WHERE key = $1`, key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, t.fail(err)
	}
	return value, nil
}

func (t *storeTx) MetaPut(key string, value []byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("meta key", key); err != nil {
		return err
	}
	if err := t.charge("m\x00"+key, len(value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	t.put(`INSERT INTO meta (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	return nil
}

// RunCount counts the runs in one phase on the phase index
// (store.RunCounter), without reading their records.
func (t *storeTx) RunCount(phase store.Phase) (int, error) {
	if err := t.Open(); err != nil {
		return 0, err
	}
	if !text(string(phase)) {
		return 0, nil
	}
	var n int
	if err := t.queryRow(`SELECT count(*) FROM runs WHERE phase = $1`, string(phase)).Scan(&n); err != nil {
		return 0, t.fail(err)
	}
	return n, nil
}

// OwnerRunCount counts owner's runs in one phase on the (owner, phase)
// index (store.RunCounter).
func (t *storeTx) OwnerRunCount(owner string, phase store.Phase) (int, error) {
	if err := t.Open(); err != nil {
		return 0, err
	}
	if !text(owner, string(phase)) {
		return 0, nil
	}
	var n int
	if err := t.queryRow(`SELECT count(*) FROM runs WHERE owner = $1 AND phase = $2`, owner, string(phase)).Scan(&n); err != nil {
		return 0, t.fail(err)
	}
	return n, nil
}

var _ store.RunCounter = (*storeTx)(nil)

// claimSQL claims the tasks named by $1 (ids), each at the attempt in $2
// and ready by the time in $5, with the leases $3 (deadlines) and $4
// (records), in one statement: the inner SELECT takes each free row with
// FOR UPDATE SKIP LOCKED, so a row another transaction is claiming or
// changing now is passed over at once rather than waited for; at READ
// COMMITTED (a claim committed alone, Store.TaskClaim) a row that changed
// since the statement began is read again as committed and checked
// again, so two claims never both take one task. The task's record says
// leased too (jsonb_set on its JSON), for every reader of the record.
// Rows of another record version are left alone.
const claimSQL = `WITH want AS (
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $5::bigint[]) AS w(id, attempt, deadline_ns, lease, now_ns)
	), claimed AS (
		UPDATE tasks t SET leased = true,
			data = convert_to(jsonb_set(convert_from(t.data, 'UTF8')::jsonb, '{leased}', 'true')::text, 'UTF8')
		FROM want w
		WHERE t.id = w.id AND NOT t.leased AND t.id IN (
			SELECT q.id FROM tasks q JOIN want w2 ON q.id = w2.id
			WHERE NOT q.leased AND q.ready_ns <= w2.now_ns AND q.v = $6
				AND (convert_from(q.data, 'UTF8')::jsonb->>'attempt')::bigint = w2.attempt
			FOR UPDATE OF q SKIP LOCKED)
		RETURNING t.id, t.v, t.data, w.deadline_ns, w.lease
	), leased AS (
		INSERT INTO leases (task_id, deadline_ns, v, data) SELECT id, deadline_ns, $6, lease FROM claimed
		ON CONFLICT (task_id) DO UPDATE SET deadline_ns = excluded.deadline_ns, v = excluded.v, data = excluded.data
	)
	SELECT id, v, data FROM claimed`

// claimRow is one task a claim statement names: its lease's record and
// the time it must be ready by.
type claimRow struct {
	lease *store.Lease
	data  []byte
	now   int64
}

// claimRows adds p's tasks to rows, each once (named twice, a task is
// claimed for its first lease; seen holds the ids already named), and
// returns the ids it added, in order. charge counts the leases' bytes
// against the Update's (MaxUpdateBytes).
func (t *storeTx) claimRows(p store.TaskClaimParams, seen map[string]bool, rows []claimRow, charge bool) ([]claimRow, []string, error) {
	var ids []string
	for _, l := range p.Leases {
		if seen[l.TaskID] {
			continue
		}
		seen[l.TaskID] = true
		var data []byte
		var err error
		if charge {
			data, err = t.encodeCharged("l\x00"+l.TaskID, l)
		} else {
			data, err = encode(l)
		}
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, claimRow{lease: l, data: data, now: nanos(p.Now)})
		ids = append(ids, l.TaskID)
	}
	return rows, ids, nil
}

// claim runs claimSQL for rows and returns the tasks it claimed by id.
func (t *storeTx) claim(rows []claimRow) (map[string]*store.Task, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	ids, attempts, deadlines, leases, nows := make([]string, len(rows)), make([]int64, len(rows)), make([]int64, len(rows)), make([][]byte, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		ids[i], attempts[i], deadlines[i], leases[i], nows[i] = r.lease.TaskID, int64(r.lease.Attempt), nanos(r.lease.Deadline), r.data, r.now
	}
	got, err := queryRecords(t, func(tk *store.Task, id string) { tk.ID = id }, claimSQL,
		ids, attempts, deadlines, leases, nows, recordV1)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*store.Task, len(got))
	for _, tk := range got {
		byID[tk.ID] = tk
	}
	return byID, nil
}

// inOrder is the tasks of byID named by ids, in that order.
func inOrder(ids []string, byID map[string]*store.Task) []*store.Task {
	out := []*store.Task{}
	for _, id := range ids {
		if tk := byID[id]; tk != nil {
			out = append(out, tk)
		}
	}
	return out
}

// TaskClaim claims in one statement (claimSQL): one round trip whatever
// the number of tasks, and inside an Update the same checks a
// serializable transaction keeps (a row claimed since its snapshot is a
// serialization failure, run again).
func (t *storeTx) TaskClaim(p store.TaskClaimParams) ([]*store.Task, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	if err := store.CheckTaskClaim(p); err != nil {
		return nil, err
	}
	rows, ids, err := t.claimRows(p, map[string]bool{}, nil, true)
	if err != nil {
		return nil, err
	}
	byID, err := t.claim(rows)
	if err != nil {
		return nil, err
	}
	return inOrder(ids, byID), nil
}

// ---- the fleet's roll (store.Roll) ----

var _ store.Roll = (*storeTx)(nil)

func (t *storeTx) DaemonPut(d *store.Daemon) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("daemon id", d.ID); err != nil {
		return err
	}
	return t.putRecord("dm\x00"+d.ID, d, `INSERT INTO daemons (id, seen_ns, v, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET seen_ns = excluded.seen_ns, v = excluded.v, data = excluded.data`,
		d.ID, nanos(d.SeenAt))
}

func (t *storeTx) DaemonDelete(id string) error {
	return t.deleteOne("daemon "+id, `DELETE FROM daemons WHERE id = $1`, id)
}

func (t *storeTx) DaemonList() ([]*store.Daemon, error) {
	return listRecords[store.Daemon](t, `SELECT v, data FROM daemons ORDER BY id`)
}
