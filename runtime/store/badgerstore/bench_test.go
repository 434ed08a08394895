package badgerstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// BenchmarkCommit measures, in one run and on the same disk, the limits a
// durable commit is judged against and the store's Update through group
// commit:
//
//	fsync             write+fsync of a small file: the one-sync-per-commit ceiling
//	badger/writers=N  Badger transactions with SyncWrites from N goroutines
//	badger/group=64   Badger transactions of 64 keys (one sync shared by 64
//	                  one-key commits): the group-commit ceiling
//	update/writers=N  Store.Update with one small write, from N goroutines
//	update-step/...   Store.Update shaped like an engine step (continuation,
//	                  task, event)
//
// Every case reports commits/s (one-key commits for group=64); update
// cases also report how many functions shared one sync.
func BenchmarkCommit(b *testing.B) {
	report := func(b *testing.B, n int, d time.Duration) {
		b.ReportMetric(float64(n)/d.Seconds(), "commits/s")
		b.ReportMetric(0, "ns/op") // the rate is the figure; ns/op of a parallel loop misleads
	}
	b.Run("fsync", func(b *testing.B) {
		d, err := MeasureFsync(b.TempDir(), b.N)
		if err != nil {
			b.Fatal(err)
		}
		report(b, b.N, d)
	})
	for _, w := range []int{1, 64} {
		b.Run(fmt.Sprintf("badger/writers=%d", w), func(b *testing.B) {
			d, err := MeasureBadgerCommits(b.TempDir(), w, 1, b.N)
			if err != nil {
				b.Fatal(err)
			}
			report(b, b.N, d)
		})
	}
	b.Run("badger/group=64", func(b *testing.B) {
		txns := (b.N + 63) / 64
		d, err := MeasureBadgerCommits(b.TempDir(), 1, 64, txns)
		if err != nil {
			b.Fatal(err)
		}
		report(b, txns*64, d)
	})
	val := make([]byte, 64)
	for _, w := range []int{1, 64} {
		b.Run(fmt.Sprintf("update/writers=%d", w), func(b *testing.B) {
			s := openBench(b)
			d, err := MeasureUpdates(ctx, s, w, b.N, func(i int) func(store.Tx) error {
				return func(tx store.Tx) error { return tx.ContinuationPut(fmt.Sprint("r", i), val) }
			})
			if err != nil {
				b.Fatal(err)
			}
			report(b, b.N, d)
			st := s.Stats()
			b.ReportMetric(float64(st.Updates)/float64(st.Commits), "updates/sync")
		})
	}
	for _, w := range []int{16, 64} {
		b.Run(fmt.Sprintf("update-step/writers=%d", w), func(b *testing.B) {
			s := openBench(b)
			cont := make([]byte, 512)
			now := time.Now()
			d, err := MeasureUpdates(ctx, s, w, b.N, func(i int) func(store.Tx) error {
				run := fmt.Sprint("run", i%w)
				return func(tx store.Tx) error {
					return first(
						tx.ContinuationPut(run, cont),
						tx.TaskPut(&store.Task{ID: "t-" + run, RunID: run, Kind: store.TaskStep, Node: "n", ReadyAt: now, CreatedAt: now}),
						tx.EventAppend(&store.Event{RunID: run, At: now, Type: "completed", Node: "n"}))
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			report(b, b.N, d)
			st := s.Stats()
			b.ReportMetric(float64(st.Updates)/float64(st.Commits), "updates/sync")
		})
	}
}

func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}
