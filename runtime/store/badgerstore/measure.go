package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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

// Limits is one measurement of Update's group commit against the physical
// limits of the disk under dir. Rates are commits per second, each the
// median of interleaved rounds, so that a disk whose speed drifts (shared
// machines) moves all of them together and the ratios hold.
type Limits struct {
	// Fsync: write+fsync of a small file, one after another.
	Fsync float64
	// Badger1 and Badger64: one-key Badger transactions with SyncWrites
	// from 1 and 64 goroutines (one sync per transaction).
	Badger1, Badger64 float64
	// BadgerGroup64: one-key commits carried 64 to a Badger transaction
	// from one goroutine: one sync shared by 64 commits, no overhead of
	// the store's own.
	BadgerGroup64 float64
	// Update1 and Update64: Store.Update with one small write, from 1 and
	// 64 goroutines.
	Update1, Update64 float64
	// UpdatesPerSync is how many of Update64's functions shared a sync.
	UpdatesPerSync float64
	// Step64: Store.Update shaped like an engine step (a 512-byte
	// continuation, the task replaced, an event appended) from 64
	// goroutines.
	Step64 float64
}

// MeasureLimits measures Limits in rounds rounds (at least 1) on a disk
// directory dir.
func MeasureLimits(dir string, rounds int) (Limits, error) {
	rounds = max(rounds, 1)
	var samples [8][]float64
	rate := func(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
	val := make([]byte, 64)
	for range rounds {
		d, err := MeasureFsync(dir, 1000)
		if err != nil {
			return Limits{}, err
		}
		samples[0] = append(samples[0], rate(1000, d))
		for i, w := range []int{1, 64} {
			n := 1000 * w / min(w, 4) // more work where more writers share
			d, err := MeasureBadgerCommits(dir, w, 1, n)
			if err != nil {
				return Limits{}, err
			}
			samples[1+i] = append(samples[1+i], rate(n, d))
		}
		d, err = MeasureBadgerCommits(dir, 1, 64, 500)
		if err != nil {
			return Limits{}, err
		}
		samples[3] = append(samples[3], rate(500*64, d))
		for i, w := range []int{1, 64} {
			n := 1000 * w / min(w, 2)
			sub, err := os.MkdirTemp(dir, "update-*")
			if err != nil {
				return Limits{}, err
			}
			s, err := Open(sub, Options{})
			if err != nil {
				return Limits{}, err
			}
			d, err := MeasureUpdates(context.Background(), s, w, n, func(i int) func(store.Tx) error {
				return func(tx store.Tx) error { return tx.ContinuationPut(fmt.Sprint("r", i), val) }
			})
			st := s.Stats()
			err = errors.Join(err, s.Close(), os.RemoveAll(sub))
			if err != nil {
				return Limits{}, err
			}
			samples[4+i] = append(samples[4+i], rate(n, d))
			if w == 64 {
				samples[6] = append(samples[6], float64(st.Updates)/float64(st.Commits))
			}
		}
		r, err := measureSteps(dir, 64, 20000)
		if err != nil {
			return Limits{}, err
		}
		samples[7] = append(samples[7], r)
	}
	med := func(xs []float64) float64 {
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	return Limits{
		Fsync: med(samples[0]), Badger1: med(samples[1]), Badger64: med(samples[2]),
		BadgerGroup64: med(samples[3]), Update1: med(samples[4]), Update64: med(samples[5]),
		UpdatesPerSync: med(samples[6]), Step64: med(samples[7]),
	}, nil
}

// StepUpdates returns, for MeasureUpdates, Update functions shaped like
// an engine step of run i%runs: the continuation, the step task and one
// event, as every step-rate figure of the stores measures them.
func StepUpdates(runs int) func(i int) func(store.Tx) error {
	cont := make([]byte, 512)
	now := time.Now()
	return func(i int) func(store.Tx) error {
		run := fmt.Sprint("run", i%runs)
		return func(tx store.Tx) error {
			return errors.Join(
				tx.ContinuationPut(run, cont),
				tx.TaskPut(&store.Task{ID: "t-" + run, RunID: run, Kind: store.TaskStep, Node: "n", ReadyAt: now, CreatedAt: now}),
				tx.EventAppend(&store.Event{RunID: run, At: now, Type: "completed", Node: "n"}))
		}
	}
}

// measureSteps runs n step-shaped Updates from writers goroutines on a new
// store under dir and returns their rate.
func measureSteps(dir string, writers, n int) (float64, error) {
	sub, err := os.MkdirTemp(dir, "steps-*")
	if err != nil {
		return 0, err
	}
	s, err := Open(sub, Options{})
	if err != nil {
		return 0, err
	}
	d, err := MeasureUpdates(context.Background(), s, writers, n, StepUpdates(writers))
	if err = errors.Join(err, s.Close(), os.RemoveAll(sub)); err != nil {
		return 0, err
	}
	return float64(n) / d.Seconds(), nil
}
