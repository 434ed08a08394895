package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/weirhq/weir/runtime/store"
)

// The functions below measure the physical limits group commit is judged
// against, on the disk that holds dir. The benchmarks of this package use
// them and report rates side by side; a benchmark driver can call them
// directly. Each returns the elapsed time for n operations.

// MeasureFsync appends 64 bytes to a file in dir and fsyncs it, n times:
// the rate any design that syncs once per commit cannot beat.
func MeasureFsync(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 64)
	start := time.Now()
	for range n {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// MeasureBadgerCommits opens a Badger in a new directory under dir with
// the store's options and commits n transactions of keysPerTxn 64-byte
// values each, from writers goroutines. With keysPerTxn 1 this is Badger's
// own commit rate with SyncWrites (one sync per transaction); with more,
// it is the most group commit can reach if each commit carried that many
// one-key writes with no overhead of its own.
func MeasureBadgerCommits(dir string, writers, keysPerTxn, n int) (time.Duration, error) {
	sub, err := os.MkdirTemp(dir, "raw-badger-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(sub)
	bo, _, _ := badgerOptions(sub, Options{}.withDefaults())
	db, err := badger.Open(bo)
	if err != nil {
		return 0, err
	}
	val := make([]byte, 64)
	d, err := parallel(writers, n, func(i int) error {
		return db.Update(func(txn *badger.Txn) error {
			for j := range keysPerTxn {
				if err := txn.Set(fmt.Appendf(nil, "k%010d-%04d", i, j), val); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return d, errors.Join(err, db.Close())
}

// MeasureUpdates calls s.Update n times from writers goroutines, the i-th
// call with fn(i).
func MeasureUpdates(ctx context.Context, s store.Store, writers, n int, fn func(i int) func(store.Tx) error) (time.Duration, error) {
	return parallel(writers, n, func(i int) error { return s.Update(ctx, fn(i)) })
}

// parallel runs op for i in [0, n) from writers goroutines and returns the
// elapsed time and the first error.
func parallel(writers, n int, op func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), first
}
