package pgstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// warm runs a few steps from every writer first, so that the pool has
// opened its connections (a server process each) before the clock runs.
func warm(b *testing.B, s *Store, writers int) {
	b.Helper()
	if _, err := badgerstore.MeasureUpdates(ctx, s, writers, 4*writers, badgerstore.StepUpdates(writers)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCommit measures step-shaped Updates from 1 and 64 goroutines
// with group commit (the default) and with one transaction per Update
// (MaxBatch 1, a pool of 64 connections), in one run on one database,
// and reports steps/s and how many Updates shared one COMMIT.
func BenchmarkCommit(b *testing.B) {
	for _, w := range []int{1, 64} {
		for _, mode := range []struct {
			name string
			opts Options
		}{{"group", Options{}}, {"single", Options{MaxBatch: 1, MaxConns: 64}}} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode.name, w), func(b *testing.B) {
				s := openURL(b, pgtest.Schema(b), mode.opts)
				warm(b, s, w)
				before := s.Stats()
				d, err := badgerstore.MeasureUpdates(ctx, s, w, b.N, badgerstore.StepUpdates(w))
				if err != nil {
					b.Fatal(err)
				}
				st := s.Stats()
				st.Updates -= before.Updates
				st.Commits -= before.Commits
				b.ReportMetric(float64(b.N)/d.Seconds(), "steps/s")
				b.ReportMetric(float64(st.Updates)/float64(max(st.Commits, 1)), "updates/commit")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkGroupVsSingle measures 64 writers with and without group
// commit in interleaved rounds, so both see the same machine, and reports
// the ratio. Run it with -benchtime 1x.
func BenchmarkGroupVsSingle(b *testing.B) {
	const writers, steps, rounds = 64, 2000, 5
	for range b.N {
		var group, single time.Duration
		for range rounds {
			for _, mode := range []Options{{}, {MaxBatch: 1, MaxConns: writers}} {
				s := openURL(b, pgtest.Schema(b), mode)
				warm(b, s, writers)
				d, err := badgerstore.MeasureUpdates(ctx, s, writers, steps, badgerstore.StepUpdates(writers))
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
				if mode.MaxBatch == 1 {
					single += d
				} else {
					group += d
				}
			}
		}
		n := float64(steps * rounds)
		b.ReportMetric(n/group.Seconds(), "group-steps/s")
		b.ReportMetric(n/single.Seconds(), "single-steps/s")
		b.ReportMetric(single.Seconds()/group.Seconds(), "group/single")
		b.ReportMetric(0, "ns/op")
	}
}
