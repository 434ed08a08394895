// Package limits measures the physical limits weir's figures are judged
// against, on this machine and in the same run as the figures: the disk's
// fsync rate, Badger's commit rates with and without a shared sync, and a
// bare go-plugin gRPC echo. It also holds the call-timing helpers the
// benchmark scenarios share, so a figure and its limit are timed the same
// way.
package limits

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// FsyncRate is how many 64-byte append+fsync pairs per second a file in dir
// takes: no design that syncs once per commit can beat it.
func FsyncRate(dir string, n int) (float64, error) {
	d, err := badgerstore.MeasureFsync(dir, n)
	if err != nil {
		return 0, err
	}
	return float64(n) / d.Seconds(), nil
}

// BadgerSyncCommits is Badger's own rate of one-key transactions with
// SyncWrites (one WAL sync per transaction), from writers goroutines.
func BadgerSyncCommits(dir string, writers, n int) (float64, error) {
	d, err := badgerstore.MeasureBadgerCommits(dir, writers, 1, n)
	if err != nil {
		return 0, err
	}
	return float64(n) / d.Seconds(), nil
}

// GroupCommits is the rate of one-key Store.Update transactions on weir's
// Badger store from writers goroutines: concurrent commits share one sync
// (group commit), each still durable when Update returns.
func GroupCommits(ctx context.Context, dir string, writers, n int) (float64, error) {
	s, err := badgerstore.Open(filepath.Join(dir, "group-commit"), badgerstore.Options{})
	if err != nil {
		return 0, err
	}
	d, err := badgerstore.MeasureUpdates(ctx, s, writers, n, func(i int) func(store.Tx) error {
		key := fmt.Sprint("k", i)
		return func(tx store.Tx) error { return tx.MetaPut(key, []byte("v")) }
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	return float64(n) / d.Seconds(), nil
}

// Calls is the timing of a batch of calls: each call's latency and the
// wall time of the batch.
type Calls struct {
	Lat  []time.Duration // sorted
	Wall time.Duration
}

// PerSec is calls completed per second of wall time.
func (c Calls) PerSec() float64 { return float64(len(c.Lat)) / c.Wall.Seconds() }

// Quantile returns the q-quantile latency (q in [0, 1]).
func (c Calls) Quantile(q float64) time.Duration {
	if len(c.Lat) == 0 {
		return 0
	}
	i := int(q * float64(len(c.Lat)-1))
	return c.Lat[i]
}

// Add merges other into c (latencies and wall time).
func (c *Calls) Add(other Calls) {
	c.Lat = append(c.Lat, other.Lat...)
	slices.Sort(c.Lat)
	c.Wall += other.Wall
}

// Measure makes n calls of call from callers goroutines and times them.
// The first error stops the batch and is returned.
func Measure(ctx context.Context, callers, n int, call func(ctx context.Context) error) (Calls, error) {
	per := make([][]time.Duration, callers)
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for g := range callers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, n/callers+1)
			for next.Add(1) <= int64(n) && first.Load() == nil {
				t0 := time.Now()
				if err := call(ctx); err != nil {
					first.CompareAndSwap(nil, &err)
					break
				}
				lat = append(lat, time.Since(t0))
			}
			per[g] = lat
		})
	}
	wg.Wait()
	c := Calls{Wall: time.Since(start)}
	if e := first.Load(); e != nil {
		return c, *e
	}
	for _, l := range per {
		c.Lat = append(c.Lat, l...)
	}
	slices.Sort(c.Lat)
	return c, nil
}

// Side is one way of making a call, compared with others.
type Side struct {
	Name string
	Call func(ctx context.Context) error
}

// Alternate measures sides against each other fairly on a noisy machine:
// n calls of each, from callers goroutines, in alternating rounds of round
// calls, so that every side sees the same moments of the machine. It
// returns each side's timing by name.
func Alternate(ctx context.Context, callers, n, round int, sides ...Side) (map[string]Calls, error) {
	out := map[string]Calls{}
	for done := 0; done < n; done += round {
		k := min(round, n-done)
		for _, s := range sides {
			c, err := Measure(ctx, callers, k, s.Call)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.Name, err)
			}
			acc := out[s.Name]
			acc.Add(c)
			out[s.Name] = acc
		}
	}
	return out, nil
}
