// Package storemetrics times a store's transactions for Prometheus. It
// wraps any store.Store: the engine sees the same store, and every Update
// (including its wait for the shared durable sync) and every View is
// observed in one histogram by operation and outcome. Store latency is
// the first figure to look at when steps slow down: a disk that syncs
// slowly shows here before anywhere else.
package storemetrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/runtime/store"
)

// Store is a store.Store whose transactions are timed. It is also a
// prometheus.Collector: register it to export the histogram.
type Store struct {
	store.Store
	seconds *prometheus.HistogramVec
}

var _ store.Store = (*Store)(nil)

// Buckets span a cached read (tens of microseconds) to a sync stuck behind
// a slow disk (seconds).
var Buckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// New wraps st.
func New(st store.Store) *Store {
	return &Store{Store: st, seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_store_transaction_duration_seconds",
		Help:    "Time of store transactions, from call to durable return, by operation (update, view, claim) and result (ok, error).",
		Buckets: Buckets,
	}, []string{"op", "result"})}
}

// Update times st.Update.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	start := time.Now()
	err := s.Store.Update(ctx, fn)
	s.observe("update", start, err)
	return err
}

// View times st.View.
func (s *Store) View(ctx context.Context, fn func(tx store.Tx) error) error {
	start := time.Now()
	err := s.Store.View(ctx, fn)
	s.observe("view", start, err)
	return err
}

// TaskClaim times a claim committed alone (store.Claimer): the wrapped
// store's own, or an Update of its own where it has none.
func (s *Store) TaskClaim(ctx context.Context, p store.TaskClaimParams) ([]*store.Task, error) {
	start := time.Now()
	out, err := store.ClaimAlone(ctx, s.Store, p)
	s.observe("claim", start, err)
	return out, err
}

var _ store.Claimer = (*Store)(nil)

func (s *Store) observe(op string, start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.seconds.WithLabelValues(op, result).Observe(time.Since(start).Seconds())
}

// Describe implements prometheus.Collector.
func (s *Store) Describe(ch chan<- *prometheus.Desc) { s.seconds.Describe(ch) }

// Collect implements prometheus.Collector.
func (s *Store) Collect(ch chan<- prometheus.Metric) { s.seconds.Collect(ch) }

// Wakes passes on the wrapped store's announcements (store.Waker), or
// nil if it makes none.
func (s *Store) Wakes() <-chan store.Wake {
	if w, ok := s.Store.(store.Waker); ok {
		return w.Wakes()
	}
	return nil
}

var _ store.Waker = (*Store)(nil)

// LockLost passes on the wrapped store's (store.LockHolder), or nil (a
// channel never closed) if it holds no lock.
func (s *Store) LockLost() <-chan struct{} {
	if l, ok := s.Store.(store.LockHolder); ok {
		return l.LockLost()
	}
	return nil
}

var _ store.LockHolder = (*Store)(nil)
