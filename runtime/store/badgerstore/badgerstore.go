// Package badgerstore is weir's embedded storage backend: store.Store on
// Badger (github.com/dgraph-io/badger/v4) in one data directory.
//
// Every Update goes through one committer goroutine that runs the pending
// callers' functions one after another and commits them all in a single
// Badger transaction with one sync (group commit). Each function still
// commits or fails on its own: its writes are buffered and join the shared
// transaction only if it returns nil. While one group is being synced the
// next one is already running, on top of the first one's writes, and is
// committed only if the first one was. Nothing is acknowledged before the
// sync that makes it durable.
//
// Records are stored as a version byte followed by JSON, under one key
// prefix per record kind (see keys.go), with index keys beside them for the
// task queue, the child-run wait index, leases by deadline and the run
// filters. Nothing is kept in memory that grows with the number of
// records: 100,000 tasks parked on waits live on disk and cost the queue
// scan nothing.
package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/skl"
	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
)

// Options configures Open. The zero value is the daemon's configuration.
//
// The memory figures bound what Badger keeps resident whatever the number
// of records, so that a daemon with 100,000 parked runs fits in 256 MiB:
// roughly NumMemtables×MemTableSize for write buffers, plus BlockCacheSize
// and IndexCacheSize, plus the Go heap of in-flight transactions.
// BenchmarkParked measures it with 100,000 parked runs.
type Options struct {
	// Logger receives Badger's messages: its errors and warnings at those
	// levels, its (chatty) info messages at Debug and its debug messages at
	// Trace. Nil discards them.
	Logger hclog.Logger

	// MemTableSize is the size of one in-memory write buffer (skiplist plus
	// its write-ahead log file). It also bounds one Badger transaction to
	// 15% of it, which bounds one group commit. Default 16 MiB (Badger's
	// default is 64 MiB): a 2.4 MiB group commit holds thousands of steps,
	// and one Update may write as much as on PostgreSQL (2 MiB). The
	// active buffer is about 21 MiB of live heap whatever the load; 8 MiB
	// would halve that but bound one Update to 1.2 MiB.
	MemTableSize int64
	// NumMemtables is how many write buffers may exist, the active one
	// included, before writes wait for a flush to disk. Default 3 (Badger:
	// 5); with 16 MiB buffers at most 48 MiB.
	NumMemtables int
	// BlockCacheSize caches decompressed table blocks for reads. Default
	// 8 MiB (Badger: 256 MiB); the engine reads a run's few records per
	// step, not the whole table set, and the recent ones are still in the
	// write buffers. A full scan (a listing of every run) fills it: at
	// 16 MiB a daemon with parked runs kept ~17 MiB of blocks, and the
	// collector's headroom as much again, for no measurable gain in steps/s.
	BlockCacheSize int64
	// IndexCacheSize bounds the memory for table indexes and bloom filters.
	// Default 8 MiB; Badger's default (0) keeps every table's index in
	// memory, which grows with the data.
	IndexCacheSize int64
	// ValueLogFileSize is the size of one value-log file (memory-mapped).
	// Values below Badger's value threshold (1 MiB at most, and at most
	// 15% of MemTableSize) live in the tree, so the value log only holds
	// large continuations. Default 64 MiB (Badger: 1 GiB).
	ValueLogFileSize int64

	// MinFreeBytes is the space the store keeps free on the disk of its
	// directory: a group commit that would leave less is refused with
	// store.ErrDiskFull before anything is written. Badger writes through
	// memory-mapped files, and a mapped write that meets a full disk kills
	// the process (SIGBUS) instead of returning an error; the reserve also
	// leaves room for Badger's own flushes and compactions. 0: no check.
	MinFreeBytes int64

	// MaxBatch is the most Update functions one group commit runs. Default
	// 1024. The byte size of a group commit is bounded by Badger's
	// transaction limit (see MemTableSize).
	MaxBatch int

	// UnsafeNoSync leaves each commit unsynced: an acknowledged write is
	// in the kernel's cache, not on the disk, and an OS crash or a power
	// loss loses it (a killed process alone does not). It exists to
	// measure what durability costs (bench, "cost of durability"); weir
	// serve takes it only from WEIR_UNSAFE_NO_SYNC=1 and warns.
	UnsafeNoSync bool
}

func (o Options) withDefaults() Options {
	storekit.DefaultLogger(&o.Logger)
	storekit.Default(&o.MemTableSize, 16<<20)
	storekit.Default(&o.NumMemtables, 3)
	storekit.Default(&o.BlockCacheSize, 8<<20)
	storekit.Default(&o.IndexCacheSize, 8<<20)
	storekit.Default(&o.ValueLogFileSize, 64<<20)
	storekit.Default(&o.MaxBatch, 1024)
	return o
}

// Store is store.Store on Badger.
type Store struct {
	db   *badger.DB
	opts Options

	// Badger's transaction limits (see Options.MemTableSize), with a
	// margin, and its value threshold; the committer checks them before a
	// function's writes join the batch.
	maxTxnCount int64
	maxTxnSize  int64
	vthreshold  int64

	reqs chan *storekit.Request
	quit chan struct{}
	done chan struct{}

	// gate lets Close wait for every Update and View that got past the
	// closed check, so the database is never closed under one.
	gate storekit.Gate

	commits    atomic.Uint64
	updates    atomic.Uint64
	overlapped atomic.Uint64

	// dir is the store's directory, whose disk checkFree reads.
	dir string
	// testFree, if set, stands for the free space of the disk.
	testFree atomic.Pointer[func() (int64, error)]

	// testSubmit, if set, sees every batch before it is committed; a
	// non-nil channel it returns replaces the commit (the batch is not
	// written) and delivers its outcome. Tests use it to hold or fail a
	// commit in flight.
	testSubmit func(*layer) chan error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir. If another process
// (or another Store in this one) holds dir, the error wraps
// store.ErrLocked.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()

	bo, maxTxnSize, vthreshold := badgerOptions(dir, opts)
	if err := dropEmptyWriteBufferLogs(dir); err != nil {
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	db, err := badger.Open(bo)
	if err != nil {
		if dirLocked(dir) {
			return nil, fmt.Errorf("%w: %s is held by another process (is a weir daemon running on it?): %v",
				store.ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}

	if err := checkLayout(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	if err := upgradeLayout(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("badgerstore: open %s: upgrade the layout: %w", dir, err)
	}

	s := &Store{
		db:   db,
		opts: opts,
		// 90% of Badger's limits, so our estimate never has to be exact.
		maxTxnCount: (maxTxnSize / int64(skl.MaxNodeSize)) * 9 / 10,
		maxTxnSize:  maxTxnSize * 9 / 10,
		vthreshold:  vthreshold,
		dir:         dir,
		reqs:        make(chan *storekit.Request, opts.MaxBatch),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	go s.commitLoop()
	return s, nil
}

// checkLayout refuses a directory whose key layout (kLayout) is newer than
// this weir's.
func checkLayout(db *badger.DB) error {
	return db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(kLayout))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil // written before the layout had a version: version 1
		}
		if err != nil {
			return err
		}
		b, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v, err := decodeU64("layout", b)
		if err != nil {
			return err
		}
		if v > layoutNow {
			return fmt.Errorf("%w: it has layout version %d and this weir reads version %d: run a weir at least as new as the one that wrote it",
				ErrLayoutNewer, v, layoutNow)
		}
		return nil
	})
}

// upgradeLayout brings a directory of an older layout to layoutNow: from
// version 1, it writes the rc/ index entry of every run; from version 2
// or older, the tqo/ entry of every unleased task, under the task's owner
// or else its run's; from version 3 or older, the rop/ entry of every
// run; from version 4 or older, the rpk/ entry of every parked run; then
// the version. It runs before the store takes
// writes; if it is cut short, the next open does it again (the entries it
// rewrites are the same).
func upgradeLayout(db *badger.DB) error {
	v := uint64(layoutV1)
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(kLayout))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		b, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v, err = decodeU64("layout", b)
		return err
	})
	if err != nil || v >= layoutNow {
		return err
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	err = db.View(func(txn *badger.Txn) error {
		err := eachRecord(txn, pRun, "run", func(r *store.Run) error {
			if v < layoutV2 {
				if err := wb.Set(key(pRunCreated, r.Owner, sep, newestKey(r.CreatedAt), r.ID), nil); err != nil {
					return err
				}
			}
			if v < layoutV4 {
				if err := wb.Set(key(pRunOwnerPh, r.Owner, sep, string(r.Phase), sep, r.ID), nil); err != nil {
					return err
				}
			}
			if v < layoutV5 && r.Phase == store.PhaseWaiting {
				return wb.Set(parkedKey(r), nil)
			}
			return nil
		})
		if err != nil || v >= layoutV3 {
			return err
		}
		return eachRecord(txn, pTask, "task", func(tk *store.Task) error {
			if tk.Leased {
				return nil
			}
			owner := tk.Owner
			if owner == "" {
				var err error
				if owner, err = runOwnerIn(txn, tk.RunID); err != nil {
					return err
				}
			}
			return wb.Set(key(pTaskOwner, owner, sep, timeKey(tk.ReadyAt), tk.ID), nil)
		})
	})
	if err != nil {
		return err
	}
	if err := wb.Set([]byte(kLayout), encodeU64(layoutNow)); err != nil {
		return err
	}
	return wb.Flush()
}

// eachRecord decodes every record under prefix in txn, in key order, and
// hands it to fn; a record that does not decode stops the walk with an
// error naming it as what and its id.
func eachRecord[T any](txn *badger.Txn, prefix, what string, fn func(*T) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		b, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		v := new(T)
		if err := decodeJSON(b, v); err != nil {
			return fmt.Errorf("%s %s: %w", what, it.Item().Key()[len(prefix):], err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

// runOwnerIn reads the owner of run id in txn: "" when there is no such
// run.
func runOwnerIn(txn *badger.Txn, id string) (string, error) {
	item, err := txn.Get(key(pRun, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	b, err := item.ValueCopy(nil)
	if err != nil {
		return "", err
	}
	r := new(store.Run)
	if err := decodeJSON(b, r); err != nil {
		return "", fmt.Errorf("run %s: %w", id, err)
	}
	return r.Owner, nil
}

// badgerOptions is the Badger configuration of a store in dir, with
// Badger's transaction byte limit and value threshold. opts has its
// defaults applied.
func badgerOptions(dir string, opts Options) (bo badger.Options, maxTxnSize, vthreshold int64) {
	// Badger refuses a ValueThreshold above its transaction limit.
	maxTxnSize = 15 * opts.MemTableSize / 100
	vthreshold = min(int64(1<<20), maxTxnSize)

	bo = badger.DefaultOptions(dir).
		WithLogger(badgerLogger{opts.Logger}).
		// Every commit syncs the write-ahead log before it returns. With
		// one commit per group this is one sync per group, and it is what
		// keeps every acknowledged write durable across memtable rotation:
		// Badger writes a commit's entries to one memtable (it makes room
		// before a commit, never inside one) and syncs that memtable's log
		// before answering, so when it later rotates to a new memtable the
		// old log holds nothing unsynced that was acknowledged. (Badger's
		// DB.Sync, by contrast, syncs only the current memtable's log:
		// syncing "now and then" without SyncWrites would lose writes
		// left in a rotated one.) Values at or above the value threshold
		// go to the value log, which Badger also syncs per commit but
		// whose sync error it only logs; below 1 MiB values stay in the
		// log whose sync error fails the commit.
		WithSyncWrites(!opts.UnsafeNoSync).
		// The committer is the only writer: there is nothing to conflict
		// with, and conflict tracking costs memory per transaction.
		WithDetectConflicts(false).
		WithMemTableSize(opts.MemTableSize).
		WithNumMemtables(opts.NumMemtables).
		WithBlockCacheSize(opts.BlockCacheSize).
		WithIndexCacheSize(opts.IndexCacheSize).
		WithValueLogFileSize(opts.ValueLogFileSize).
		WithValueThreshold(vthreshold).
		// Two compactors is Badger's minimum; the daemon shares its cores.
		WithNumCompactors(2).
		// Snappy, not ZSTD: ZSTD (level 1) wrote tables ~20% smaller (3.2
		// rather than 4 MiB per flushed buffer), a few MiB of mapped pages
		// per 10,000 runs, for more CPU in every compaction and read on
		// shared cores; the daemon that parked 11,000 runs was no smaller
		// with it (docs/design.md §12.2).
		WithCompression(options.Snappy).
		WithMetricsEnabled(false)
	return bo, maxTxnSize, vthreshold
}

// FreeSpace returns the bytes an unprivileged process may still write on
// the file system holding dir.
func FreeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// checkFree refuses a commit of size bytes that would leave less than
// MinFreeBytes free.
func (s *Store) checkFree(size int64) error {
	if s.opts.MinFreeBytes <= 0 {
		return nil
	}
	probe := func() (int64, error) { return FreeSpace(s.dir) }
	if f := s.testFree.Load(); f != nil {
		probe = *f
	}
	free, err := probe()
	if err != nil {
		return fmt.Errorf("badgerstore: reading the free space of the disk: %w", err)
	}
	// Badger writes a commit at least twice (its log, then a table).
	if free-2*size < s.opts.MinFreeBytes {
		return fmt.Errorf("%w: %d bytes free on the store's disk, and the store keeps %d in reserve", store.ErrDiskFull, free, s.opts.MinFreeBytes)
	}
	return nil
}

// dirLocked reports whether another open file description holds the flock
// Badger takes on its directory. Badger's own error does not keep the
// cause, so the lock is probed directly.
// dropEmptyWriteBufferLogs removes the empty write-buffer logs (*.mem) a
// kill can leave while Badger creates one: Badger's open fails on such a
// file ("Create a new file", dgraph-io/badger#2207) although it holds
// nothing. It holds Badger's own directory lock meanwhile, so a live
// process's files are never touched (a held lock: nothing is done, and
// the open reports the lock).
func dropEmptyWriteBufferLogs(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil
	}
	defer syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
	logs, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil && fi.Size() == 0 {
			if err := os.Remove(l); err != nil {
				return err
			}
		}
	}
	return nil
}

func dirLocked(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// Capabilities reports group commit.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{GroupCommit: true}
}

// Update hands fn to the committer and waits until the group commit that
// holds its writes is synced (or fn failed).
//
// fn runs on the committer goroutine, one fn at a time, so it must be
// short and must not block: every other caller's commit waits for it. It
// must not call Update on the same store (that would wait for itself).
//
// ctx is checked before fn runs: if ctx is done by then fn does not run and
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
	if err := r.Submit(s.reqs); err != nil {
		return err
	}
	return r.Wait()
}

// View runs fn against a Badger read-only snapshot, on the caller's
// goroutine.
func (s *Store) View(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.gate.Enter(ctx); err != nil {
		return err
	}
	defer s.gate.Leave()
	snap := s.db.NewTransaction(false)
	defer snap.Discard()
	t := &storeTx{kv: &kv{snap: snap, readOnly: true}, TxGuard: storekit.TxGuard{ReadOnly: true}}
	defer t.End()
	return fn(t)
}

// Close waits for in-flight Updates and Views to finish (later ones get
// store.ErrClosed), stops the committer and closes Badger.
func (s *Store) Close() error {
	if err := s.gate.Close(); err != nil {
		return err
	}
	close(s.quit)
	<-s.done
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("badgerstore: close: %w", err)
	}
	return nil
}

// Stats counts group commits. Updates/Commits is the average number of
// functions that shared one sync.
type Stats struct {
	// Commits is the number of Badger transactions committed (one sync
	// each).
	Commits uint64
	// Updates is the number of Update functions whose writes were
	// committed (functions that failed are not counted).
	Updates uint64
	// Overlapped is the number of functions that ran while the previous
	// group commit was being written and synced.
	Overlapped uint64
}

// Stats returns the counts since Open.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.commits.Load(), Updates: s.updates.Load(), Overlapped: s.overlapped.Load()}
}
