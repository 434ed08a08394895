package storemetrics

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// Every transaction is observed once, by operation and outcome, and the
// wrapped store's answers pass through unchanged.
func TestTimesTransactions(t *testing.T) {
	bst, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bst.Close()
	s := New(bst)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.MetaPut("k", []byte("v")) }); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Update returned %v, want the function's error", err)
	}
	var got []byte
	if err := s.View(ctx, func(tx store.Tx) error {
		var err error
		got, err = tx.MetaGet("k")
		return err
	}); err != nil || string(got) != "v" {
		t.Errorf("View read %q, %v", got, err)
	}
	if err := s.View(ctx, func(tx store.Tx) error { return tx.MetaPut("k", nil) }); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("a write in View: %v, want ErrReadOnly", err)
	}

	if n := testutil.CollectAndCount(s); n != 4 {
		t.Errorf("%d series, want 4 (update and view, ok and error)", n)
	}
	for _, c := range []struct {
		op, result string
		want       uint64
	}{{"update", "ok", 3}, {"update", "error", 1}, {"view", "ok", 1}, {"view", "error", 1}} {
		var m dto.Metric
		if err := s.seconds.WithLabelValues(c.op, c.result).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetHistogram().GetSampleCount(); got != c.want {
			t.Errorf("%s %s: %d observations, want %d", c.op, c.result, got, c.want)
		}
	}
	if problems, err := testutil.CollectAndLint(s); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}
