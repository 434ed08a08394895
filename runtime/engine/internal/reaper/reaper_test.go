package reaper

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestOverdue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name           string
		ready, started time.Time
		now            time.Time
		timeout        time.Duration
		want           bool
	}{
		{"within the deadline", t0, t0, t0.Add(time.Minute), 10 * time.Minute, false},
		{"past it", t0, t0, t0.Add(11 * time.Minute), 10 * time.Minute, true},
		{"downtime is not queue time", t0, t0.Add(time.Hour), t0.Add(time.Hour + time.Minute), 10 * time.Minute, false},
		{"counted from the start", t0, t0.Add(time.Hour), t0.Add(time.Hour + 11*time.Minute), 10 * time.Minute, true},
		{"no deadline", t0, t0, t0.Add(1000 * time.Hour), -1, false},
	} {
		if got := Overdue(tt.ready, tt.started, tt.now, tt.timeout); got != tt.want {
			t.Errorf("%s: Overdue = %v, want %v", tt.name, got, tt.want)
		}
	}
}

type fakeEngine struct {
	st      store.Store
	timeout time.Duration
	started time.Time
	held    map[string]bool
	gone    map[string]bool
	dropped []string
}

func (f *fakeEngine) QueueTimeout() time.Duration { return f.timeout }
func (f *fakeEngine) StartedAt() time.Time        { return f.started }
func (f *fakeEngine) ListReady(ctx context.Context, before time.Time, limit int) ([]*store.Task, error) {
	var out []*store.Task
	err := f.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.TaskListReady(before, limit)
		return err
	})
	return out, err
}
func (f *fakeEngine) Dispatched(id string) bool { return f.held[id] }
func (f *fakeEngine) Drop(_ context.Context, t *store.Task) bool {
	if f.gone[t.ID] {
		return false
	}
	f.dropped = append(f.dropped, t.ID)
	return true
}
func (f *fakeEngine) Tick() time.Duration  { return 100 * time.Millisecond }
func (f *fakeEngine) Error(string, ...any) {}

func TestRunOnceDropsOnlyWhatWaitedTooLong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st := memstore.New()
	for i, ready := range map[string]time.Time{
		"old": t0, "held": t0, "leased-since": t0, "young": t0.Add(9 * time.Minute),
	} {
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.TaskPut(&store.Task{ID: i, RunID: "r_" + i, Node: "n", Kind: store.TaskStep, ReadyAt: ready, Attempt: 1})
		}); err != nil {
			t.Fatal(err)
		}
	}
	eng := &fakeEngine{st: st, timeout: 10 * time.Minute, started: t0,
		held: map[string]bool{"held": true}, gone: map[string]bool{"leased-since": true}}
	r := New(eng, clk)
	if got := r.RunOnce(ctx); got != (Result{}) {
		t.Fatalf("at the start: %+v, want nothing overdue", got)
	}
	clk.Advance(11 * time.Minute)
	got := r.RunOnce(ctx)
	if want := (Result{Overdue: 3, Dropped: 1, Held: 1}); got != want {
		t.Fatalf("pass %+v, want %+v", got, want)
	}
	if len(eng.dropped) != 1 || eng.dropped[0] != "old" {
		t.Fatalf("dropped %v, want only the old one", eng.dropped)
	}
}
