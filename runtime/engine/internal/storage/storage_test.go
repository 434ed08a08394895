package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
)

type host struct {
	needed    bool
	used      map[string]int64
	err       error
	published []map[string]int64
	measured  int
	errors    int
}

func (h *host) Needed() bool { return h.needed }
func (h *host) Measure(context.Context) (map[string]int64, error) {
	h.measured++
	return h.used, h.err
}
func (h *host) Publish(m map[string]int64) { h.published = append(h.published, m) }
func (h *host) Error(string, ...any)       { h.errors++ }

func TestPassMeasuresOnlyWhileAQuotaIsSet(t *testing.T) {
	t.Parallel()
	h := &host{used: map[string]int64{"alice": 10, "bob": 5}}
	s := New(h, clock.NewFake(time.Unix(0, 0)))
	ctx := context.Background()
	if got := s.RunOnce(ctx); got != (Result{}) || h.measured != 0 || len(h.published) != 1 || h.published[0] != nil {
		t.Fatalf("no quota: %+v, measured %d, published %v; want nothing measured and the figures cleared", got, h.measured, h.published)
	}
	h.needed = true
	if got := s.RunOnce(ctx); got != (Result{Measured: true, Owners: 2, Bytes: 15}) || h.published[1]["alice"] != 10 {
		t.Fatalf("with a quota: %+v, published %v", got, h.published)
	}
	// A store that cannot be read leaves the last figures in force.
	h.err = errors.New("disk gone")
	if got := s.RunOnce(ctx); got.Measured || len(h.published) != 2 || h.errors != 1 {
		t.Fatalf("on a read error: %+v, published %d times, %d errors logged", got, len(h.published), h.errors)
	}
}
