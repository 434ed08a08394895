// Package pgstore is weir's PostgreSQL storage backend: store.Store on
// PostgreSQL (pgx and its pool), for a team whose daemons share one
// database instead of each keeping an embedded Badger directory.
//
// The schema is a set of versioned SQL migrations embedded in the binary
// (migrations/), applied by Open under an advisory lock; a database whose
// schema is newer than the binary is refused (ErrSchemaNewer). Each record
// kind has a table that keeps the record whole as JSON beside the columns
// the store looks it up and orders it by.
//
// Every Update runs in a SERIALIZABLE transaction: a function is isolated
// from every other writer, of this process or another, and when PostgreSQL
// reports a serialization failure or a deadlock (40001, 40P01) the
// transaction is rolled back and the functions are run again, which the
// store contract allows (fns have no effects outside the transaction).
// The one statement outside them is a claim committed alone
// (Store.TaskClaim, claim.go): READ COMMITTED with FOR UPDATE SKIP
// LOCKED, so daemons racing for the same tasks pass over each other's.
//
// By default Updates are group-committed: one committer runs the pending
// functions one after another in a single transaction, each behind a
// savepoint so that a failing function leaves nothing while the others
// commit, and answers them all after the one COMMIT. That is one commit
// round trip and one WAL flush for many steps. With Options.MaxBatch 1
// every Update is its own transaction on a pooled connection instead.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

// MaxUpdateBytes bounds what one Update writes: the bytes of the keys and
// records it puts (a record put twice counts once, at its last size). It
// is about what one transaction of the embedded Badger store holds with
// its default options, so a step one backend accepts the other accepts
// too; a function over it fails alone with store.ErrTooLarge and nothing
// it wrote is kept.
const MaxUpdateBytes = 2 << 20

// MaxConflictRetries bounds how many times one Update is run again after
// serialization failures or deadlocks before its error is returned.
const MaxConflictRetries = 1000

// Defaults of Options. A group commit of more than 64 functions would
// hold more than 64 subtransactions, past the cache PostgreSQL keeps per
// transaction: every snapshot taken meanwhile would then look subtransactions
// up on disk, slowing every reader.
const (
	DefaultMaxBatch = 64
	DefaultMaxConns = 8
	// DefaultLockWait covers the moment between a daemon's death and the
	// end of its session on the server, which releases its lock.
	DefaultLockWait = 5 * time.Second
	// DefaultLockCheck is how often the store asks the server whether the
	// session holding its lock still holds it.
	DefaultLockCheck = 5 * time.Second
)

// ErrLockLost: the session that held the store's advisory lock ended (it
// was terminated, the server restarted, idle_session_timeout ended it).
// Another daemon may hold the lock by now, so taking it again is unsafe:
// the store refuses every Update and View from then on, and the daemon
// must stop.
var ErrLockLost = errors.New("pgstore: the session holding the store's lock ended")

// IdleInTransactionTimeout is the server's idle_in_transaction_session_timeout
// for a shared store's sessions (unless the URL sets it): a daemon of a
// fleet that stalls inside a transaction (paused, swapped out) would hold
// row locks the other daemons wait for; past this the server ends its
// session and the locks go. The stalled daemon's next write then fails
// and it closes admission (E_STORAGE) until restarted.
const IdleInTransactionTimeout = 30 * time.Second

// Options configures Open. The zero value is the daemon's configuration.
type Options struct {
	// Logger receives the store's notices (migrations applied). Nil
	// discards them.
	Logger hclog.Logger
	// MaxBatch is the most Update functions one group commit runs.
	// Default DefaultMaxBatch; 1 gives every Update its own transaction.
	MaxBatch int
	// Shared lets several stores, and so several daemons (a fleet), use
	// one schema at once: the store then reports Capabilities.Shared,
	// announces wake-ups to every store on the schema (LISTEN/NOTIFY, see
	// Wakes) and numbers each run's events under a lock so they commit in
	// order. Without it Open holds an advisory lock for the store's life
	// and a second Open of the same schema fails with store.ErrLocked, as
	// a second open of a Badger directory does. Shared stores hold the
	// same lock shared: a fleet and an unshared store never open one
	// schema together (the unshared one would rescue the fleet's live
	// leases at its start).
	Shared bool
	// LockWait is how long Open waits for the lock of an unshared store
	// held by another session before it fails. Default DefaultLockWait.
	LockWait time.Duration
	// LockCheck is how often the store checks that its lock's session
	// still holds the lock. Default DefaultLockCheck.
	LockCheck time.Duration
	// MaxConns is the size of the connection pool unless the URL sets
	// pool_max_conns. Group commit uses one connection for writes; Views
	// and Updates without group commit use the others. Default
	// DefaultMaxConns; at least 2.
	MaxConns int32

	// known, if set, limits the migrations this store knows to the first
	// known: a test plays the weir of an earlier release with it.
	known int
}

func (o Options) withDefaults() Options {
	storekit.DefaultLogger(&o.Logger)
	storekit.Default(&o.MaxBatch, DefaultMaxBatch)
	storekit.Default(&o.MaxConns, DefaultMaxConns)
	storekit.Default(&o.LockWait, DefaultLockWait)
	storekit.Default(&o.LockCheck, DefaultLockCheck)
	o.MaxConns = max(o.MaxConns, 2)
	return o
}

// Store is store.Store on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	lock *pgx.Conn // holds the store's advisory lock (shared when Shared)
	// lockMu serialises the lock connection's users (the watcher, Close);
	// lost is set, and lostCh closed, once the lock's session is gone.
	lockMu    sync.Mutex
	lost      atomic.Pointer[error]
	lostCh    chan struct{}
	watchDone chan struct{}

	reqs chan *request // to the committer; nil without group commit
	quit chan struct{}
	done chan struct{}

	// claims carries claims committed alone to the claimer (claim.go);
	// claimDone closes when it has stopped.
	claims    chan *claimReq
	claimDone chan struct{}

	// gate lets Close wait for every Update and View that got past the
	// closed check, so the pool is never closed under one; once the lock
	// is lost it refuses them all (lostErr).
	gate storekit.Gate

	commits   atomic.Uint64
	updates   atomic.Uint64
	conflicts atomic.Uint64
	claimed   atomic.Uint64

	// wakes carries the announcements the listener receives (Shared
	// only); listenDone closes when the listener has stopped.
	wakes      chan store.Wake
	listenDone chan struct{}
	rawURL     string
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at rawURL (postgres://user:pass@host/db,
// with search_path=SCHEMA to keep weir's tables in a schema of their own),
// migrates its schema and returns the store. Errors never quote the URL's
// password.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx's parse errors can quote the URL: say only what it is.
		return nil, fmt.Errorf("pgstore: the store URL %s is not a valid PostgreSQL connection string", storeurl.Redact(rawURL))
	}
	if !hasParam(rawURL, "pool_max_conns") {
		cfg.MaxConns = opts.MaxConns
	}
	if _, set := cfg.ConnConfig.RuntimeParams["default_transaction_isolation"]; !set {
		// A claim committed alone (TaskClaim) is one statement outside any
		// BEGIN; every other transaction names its level.
		cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	}
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; opts.Shared && !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(IdleInTransactionTimeout.Milliseconds())
	}
	cfg.MaxConns = max(cfg.MaxConns, 2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", storeurl.Redact(rawURL), err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connecting to %s: %w", storeurl.Redact(rawURL), err)
	}
	var applied []int
	var newer int
	ms, err := migrations()
	if err == nil && opts.known > 0 {
		ms = ms[:min(opts.known, len(ms))]
	}
	if err == nil {
		err = checkDurable(ctx, conn.Conn())
	}
	if err == nil {
		applied, newer, err = migrate(ctx, conn.Conn(), ms)
	}
	if err != nil {
		conn.Release()
		pool.Close()
		return nil, err
	}
	// The lock lives as long as this session: the connection leaves the
	// pool and is closed by Close.
	lock := conn.Hijack()
	if err := takeLock(ctx, lock, opts.LockWait, opts.Shared); err != nil {
		lock.Close(ctx)
		pool.Close()
		if errors.Is(err, store.ErrLocked) {
			return nil, fmt.Errorf("pgstore: %s: %w", storeurl.Redact(rawURL), err)
		}
		return nil, fmt.Errorf("pgstore: taking the store's lock: %w", err)
	}
	if len(applied) > 0 {
		opts.Logger.Info("schema migrated", "versions", applied, "database", storeurl.Redact(rawURL))
	}
	if newer > 0 {
		opts.Logger.Warn("the schema was expanded by a newer weir; this one still runs on it: upgrade it",
			"schema_version", newer, "known_up_to", len(ms), "database", storeurl.Redact(rawURL))
	}
	s := &Store{pool: pool, opts: opts, lock: lock, quit: make(chan struct{}), done: make(chan struct{}), rawURL: rawURL,
		lostCh: make(chan struct{}), watchDone: make(chan struct{})}
	s.gate.Refused = s.lostErr
	go s.watchLock()
	if opts.Shared {
		s.wakes = make(chan store.Wake, wakeBuffer)
		s.listenDone = make(chan struct{})
		ready := make(chan error, 1)
		go s.listen(ready)
		if err := <-ready; err != nil {
			close(s.quit)
			<-s.listenDone
			pool.Close()
			return nil, err
		}
	}
	s.claims, s.claimDone = make(chan *claimReq, maxClaimBatch), make(chan struct{})
	go s.claimLoop()
	if opts.MaxBatch > 1 {
		s.reqs = make(chan *request, opts.MaxBatch)
		go s.commitLoop()
	} else {
		close(s.done)
	}
	return s, nil
}

// ErrNotDurable: the database would acknowledge a COMMIT before it is
// on disk, so a crash of the server could lose steps weir acknowledged.
var ErrNotDurable = errors.New("pgstore: synchronous_commit is off")

// checkDurable refuses a session whose COMMIT returns before the WAL is
// flushed: weir acknowledges a step when its COMMIT returns.
func checkDurable(ctx context.Context, conn *pgx.Conn) error {
	var sc string
	if err := conn.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&sc); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if sc == "off" {
		return fmt.Errorf("%w for weir's role or database: a crash of the server could lose steps weir acknowledged; set it on (ALTER ROLE ... SET synchronous_commit = on)", ErrNotDurable)
	}
	return nil
}

// takeLock takes the store's advisory lock on conn's schema, waiting up
// to wait for a holder to go: a daemon killed a moment ago holds it until
// the server has noticed and ended its session. Shared stores (a fleet)
// take it shared, so a fleet and a daemon that expects the schema to
// itself never run at once.
func takeLock(ctx context.Context, conn *pgx.Conn, wait time.Duration, shared bool) error {
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", max(wait.Milliseconds(), 1))); err != nil {
		return err
	}
	fn := "pg_advisory_lock"
	if shared {
		fn = "pg_advisory_lock_shared"
	}
	_, err := conn.Exec(ctx, `SELECT `+fn+`($1, hashtext(current_schema()))`, int32(storeLock))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
		if shared {
			return fmt.Errorf("schema %q is in use by a weir daemon that is not in a fleet (its store is not shared) (%w)", schema, store.ErrLocked)
		}
		return fmt.Errorf("schema %q is in use by another weir daemon (%w)", schema, store.ErrLocked)
	}
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "RESET lock_timeout")
	return err
}

func hasParam(rawURL, name string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has(name)
}

// Capabilities reports group commit unless MaxBatch is 1, and Shared.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{GroupCommit: s.reqs != nil, Shared: s.opts.Shared}
}

// lostErr is the error every call gets once the lock is lost, or nil.
func (s *Store) lostErr() error {
	if err := s.lost.Load(); err != nil {
		return *err
	}
	return nil
}

// request is one Update waiting for its transaction; its Failed is fn's
// own error in the last attempt.
type request = storekit.Request

// PanicError carries a panic raised by an Update function on the
// committer goroutine back to the caller, which panics with it.
type PanicError = storekit.PanicError

// Update runs fn in a SERIALIZABLE transaction and returns once it is
// committed (or fn failed). With group commit fn runs on the committer
// goroutine beside other callers' functions, so it must be short and must
// not block. fn may run more than once (after a serialization failure).
//
// ctx is checked before fn runs: if it is done by then fn does not run and
// ctx's error is returned. Once fn has run, Update waits for the commit
// whatever ctx says, because returning early would report as failed a
// write that may yet become durable. A panic in fn is re-raised in the
// caller's goroutine.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.gate.Enter(ctx); err != nil {
		return err
	}
	defer s.gate.Leave()
	r := storekit.NewRequest(ctx, fn)
	if s.reqs == nil {
		s.run([]*request{r})
	} else if err := r.Submit(s.reqs); err != nil {
		return err
	}
	return r.Wait()
}

// commitLoop takes a request, adds those already queued behind it (up to
// MaxBatch) and runs them as one group commit. Requests that arrive while
// a group commits wait and form the next group: the group size follows
// the load, without any timer.
func (s *Store) commitLoop() {
	defer close(s.done)
	for {
		var batch []*request
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case <-s.quit:
			return
		}
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.run(batch)
	}
}

// run commits the functions of reqs in one transaction, running them all
// again while the transaction fails with a serialization failure or a
// deadlock, and answers every caller.
func (s *Store) run(reqs []*request) {
	backoff := time.Millisecond
	for attempt := 0; ; attempt++ {
		live := reqs[:0:0]
		for _, r := range reqs {
			if err := r.Ctx.Err(); err != nil {
				r.Res <- err // fn's writes of any earlier attempt were rolled back
				continue
			}
			live = append(live, r)
		}
		reqs = live
		if len(reqs) == 0 {
			return
		}
		err := s.attempt(reqs)
		if err == nil {
			if slices.ContainsFunc(reqs, func(r *request) bool { return r.Failed == nil }) {
				s.commits.Add(1)
			}
			for _, r := range reqs {
				if r.Failed != nil {
					r.Res <- r.Failed
					continue
				}
				s.updates.Add(1)
				r.Res <- nil
			}
			return
		}
		if isConflict(err) && attempt < MaxConflictRetries {
			s.conflicts.Add(1)
			// Jittered backoff: the transactions that collided should
			// not collide again on the next try.
			time.Sleep(backoff/2 + rand.N(backoff))
			backoff = min(2*backoff, 50*time.Millisecond)
			continue
		}
		if isConflict(err) {
			err = fmt.Errorf("pgstore: still conflicting after %d tries: %w", attempt+1, err)
		}
		for _, r := range reqs {
			r.Res <- err
		}
		return
	}
}

// attempt runs reqs' functions in one SERIALIZABLE transaction and commits
// it. A function that fails (or panics) is rolled back to its savepoint
// and its error kept in failed; the others commit. It returns the
// transaction's error: a serialization failure (retry everything), or any
// other failure of the database (every caller gets it).
func (s *Store) attempt(reqs []*request) error {
	// The statements are the whole group's: no caller's cancellation may
	// break them (Update waits for the outcome once fn ran).
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return fmt.Errorf("pgstore: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	// In a group each function runs behind the savepoint fn, so that one
	// that fails is rolled back alone. ROLLBACK TO keeps the savepoint for
	// the next function; after one that succeeded, RELEASE and a new
	// SAVEPOINT go with its last writes.
	grouped := len(reqs) > 1
	if grouped {
		if _, err := tx.Exec(ctx, "SAVEPOINT fn"); err != nil {
			return fmt.Errorf("pgstore: savepoint: %w", err)
		}
	}
	for i, r := range reqs {
		r.Failed, r.Panicked = nil, nil
		t := &storeTx{q: tx, ctx: ctx, shared: s.opts.Shared, orderEvents: s.opts.Shared || s.reqs == nil}
		ferr := r.Call(t)
		t.End()
		last := i == len(reqs)-1
		if ferr == nil && t.sticky() == nil {
			t.queueWakes()
			// The function's queued writes go now, and in a group the
			// next function's savepoint with them: one round trip.
			if grouped && !last {
				t.put("RELEASE SAVEPOINT fn")
				t.put("SAVEPOINT fn")
			}
			_ = t.flush() // a failure is kept as t.dbErr
		}
		t.batch = nil // a failed function's writes are never sent
		if t.dbErr != nil && isConflict(t.dbErr) {
			return t.dbErr
		}
		if ferr == nil && t.sticky() != nil {
			// fn went on after a write failed: none of it may commit.
			ferr = t.sticky()
		}
		switch {
		case ferr != nil && !grouped:
			r.Failed = ferr
			return nil // nothing to commit; the deferred rollback ends it
		case ferr != nil:
			r.Failed = ferr
			// The savepoint fn is the one this function ran behind,
			// even when the flush that would release it failed first.
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT fn"); err != nil {
				return fmt.Errorf("pgstore: rollback to savepoint: %w", err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	return nil
}

// isConflict reports a serialization failure or a deadlock: PostgreSQL
// rolled the transaction back and running it again may succeed.
func isConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// View runs fn in a REPEATABLE READ, READ ONLY transaction: one snapshot
// of the committed state, on the caller's goroutine.
func (s *Store) View(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.gate.Enter(ctx); err != nil {
		return err
	}
	defer s.gate.Leave()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgstore: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	t := &storeTx{q: tx, ctx: ctx, TxGuard: storekit.TxGuard{ReadOnly: true}}
	defer t.End()
	return fn(t)
}

// Close waits for in-flight Updates and Views to finish (later ones get
// store.ErrClosed), stops the committer and closes the pool.
func (s *Store) Close() error {
	if err := s.gate.Close(); err != nil {
		return err
	}
	close(s.quit)
	<-s.done
	<-s.claimDone
	<-s.watchDone
	st := s.Stats()
	s.opts.Logger.Info("store closed", "commits", st.Commits, "updates", st.Updates, "conflicts", st.Conflicts, "claimed", st.Claims)
	if s.listenDone != nil {
		<-s.listenDone
	}
	s.pool.Close()
	if s.lock != nil && s.lost.Load() != nil {
		_ = s.lock.Close(context.Background()) // its session, and the lock, are gone
	} else if s.lock != nil {
		// Unlocked explicitly: the server ends a closed session's backend
		// (and so drops its locks) only some time after the close, and a
		// store opened again at once must find the schema free.
		ctx := context.Background()
		fn := "pg_advisory_unlock"
		if s.opts.Shared {
			fn = "pg_advisory_unlock_shared"
		}
		_, uerr := s.lock.Exec(ctx, `SELECT `+fn+`($1, hashtext(current_schema()))`, int32(storeLock))
		if err := errors.Join(uerr, s.lock.Close(ctx)); err != nil {
			return fmt.Errorf("pgstore: close: %w", err)
		}
	}
	return nil
}

// LockLost is closed once the session holding the store's lock has
// ended; every Update and View then fails with ErrLockLost. The daemon
// closes admission and stops.
func (s *Store) LockLost() <-chan struct{} { return s.lostCh }

// watchLock checks the lock's session every LockCheck until Close, and
// stops at the first loss.
func (s *Store) watchLock() {
	defer close(s.watchDone)
	t := time.NewTicker(s.opts.LockCheck)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			if s.checkLock(context.Background()) != nil {
				return
			}
		}
	}
}

// checkLock asks the server whether the lock's session still holds the
// store's lock, and on a loss records it (once) and returns it.
func (s *Store) checkLock(ctx context.Context) error {
	if err := s.lost.Load(); err != nil {
		return *err
	}
	ctx, cancel := context.WithTimeout(ctx, max(s.opts.LockCheck, time.Second))
	defer cancel()
	s.lockMu.Lock()
	var held bool
	err := s.lock.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND classid = $1 AND granted)`, storeLock).Scan(&held)
	s.lockMu.Unlock()
	switch {
	case err == nil && held:
		return nil
	case err == nil:
		err = fmt.Errorf("%w: the session no longer holds it", ErrLockLost)
	case errors.Is(err, context.DeadlineExceeded) && !s.lock.IsClosed():
		return nil // a slow answer on a live session is not a loss; the next check asks again
	default:
		err = fmt.Errorf("%w (%v); another daemon may hold it now: stop this one, and start it again once the other is known", ErrLockLost, err)
	}
	s.opts.Logger.Error("the store's lock is lost: refusing every read and write", "error", err, "database", storeurl.Redact(s.rawURL))
	if s.lost.CompareAndSwap(nil, &err) {
		close(s.lostCh)
	}
	return err
}

// Stats counts commits. Updates/Commits is the average number of
// functions that shared one transaction.
type Stats struct {
	// Commits is the number of transactions committed.
	Commits uint64
	// Updates is the number of Update functions whose writes were
	// committed (functions that failed are not counted).
	Updates uint64
	// Conflicts is the number of transactions run again after a
	// serialization failure or a deadlock.
	Conflicts uint64
	// Claims is the number of tasks claimed by claims committed alone
	// (TaskClaim), each claim one statement and one commit of its own.
	Claims uint64
}

// Stats returns the counts since Open.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.commits.Load(), Updates: s.updates.Load(), Conflicts: s.conflicts.Load(), Claims: s.claimed.Load()}
}
