package traceexport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/telemetry"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const outbox = "trace-outbox"

type quietEngine struct{ holder string }

func (q quietEngine) Holder() string     { return q.holder }
func (quietEngine) Info(string, ...any)  {}
func (quietEngine) Error(string, ...any) {}

// fakeExporter keeps what it is given, or refuses it.
type fakeExporter struct {
	queue   int
	fail    bool
	skip    map[trace.TraceID]bool // not sampled
	exports [][]telemetry.Span
}

func (f *fakeExporter) Sampled(tid trace.TraceID) bool { return !f.skip[tid] }
func (f *fakeExporter) QueueSize() int                 { return f.queue }
func (f *fakeExporter) Export(_ context.Context, spans []telemetry.Span) error {
	if f.fail {
		return errors.New("collector down")
	}
	f.exports = append(f.exports, spans)
	return nil
}

type bundle struct {
	st  *memstore.Store
	exp *fakeExporter
	clk *clock.Fake
	svc *Service
}

func setup(t *testing.T) *bundle {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	exp := &fakeExporter{queue: 100, skip: map[trace.TraceID]bool{}}
	clk := clock.NewFake(t0)
	return &bundle{st: st, exp: exp, clk: clk, svc: New(quietEngine{"h1"}, st, clk, exp, outbox)}
}

// finished journals a run of one task (three spans) and its outbox
// entry, as a terminal transaction with tracing on does.
func (b *bundle) finished(t *testing.T, id string) {
	t.Helper()
	err := b.st.Update(context.Background(), func(tx store.Tx) error {
		for _, e := range []*store.Event{{Type: telemetry.EvAccepted}, {Type: telemetry.EvLeased, Node: "a", Attempt: 1},
			{Type: telemetry.EvNodeDone, Node: "a", Attempt: 1}, {Type: telemetry.EvNodeDone, Node: "b", Attempt: 1}, {Type: telemetry.EvCompleted}} {
			e.RunID, e.At = id, t0
			if err := tx.EventAppend(e); err != nil {
				return err
			}
		}
		return tx.EventAppend(&store.Event{RunID: outbox, Type: "trace_due", At: t0, Detail: map[string]any{"run": id}})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) entries(t *testing.T) int {
	t.Helper()
	var evs []*store.Event
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: outbox})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// Finished runs are exported once and their entries removed.
func TestRunOnceExportsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.finished(t, "run_a")
	b.finished(t, "run_b")
	ctx := context.Background()
	if res := b.svc.RunOnce(ctx); res != (Result{Runs: 2, Spans: 6}) {
		t.Fatalf("pass %+v, want 2 runs of 6 spans", res)
	}
	if b.entries(t) != 0 || len(b.exp.exports) != 1 {
		t.Errorf("%d entries left, %d exports; want 0 and 1", b.entries(t), len(b.exp.exports))
	}
	if res := b.svc.RunOnce(ctx); res != (Result{}) {
		t.Errorf("a second pass %+v did something", res)
	}
}

// An export the collector refuses keeps every entry for a later pass,
// which comes later each time; once it is back the runs go out.
func TestRunOnceKeepsWhatFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.finished(t, "run_a")
	b.exp.fail = true
	ctx := context.Background()
	for _, want := range []time.Duration{2 * Interval, 4 * Interval} {
		if res := b.svc.RunOnce(ctx); res.Err == nil || res.Runs != 0 {
			t.Fatalf("pass %+v, want the export's error", res)
		}
		if b.entries(t) != 1 || b.svc.Interval() != want {
			t.Fatalf("%d entries, next pass in %v; want 1 and %v", b.entries(t), b.svc.Interval(), want)
		}
	}
	b.exp.fail = false
	if res := b.svc.RunOnce(ctx); res.Err != nil || res.Runs != 1 || b.entries(t) != 0 || b.svc.Interval() != Interval {
		t.Errorf("pass %+v, %d entries, next in %v: want the run exported and the interval back", res, b.entries(t), b.svc.Interval())
	}
}

// One pass exports in groups the queue holds.
func TestRunOnceGroupsByQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exp.queue = 4 // one run of 3 spans at a time
	for _, id := range []string{"run_a", "run_b", "run_c"} {
		b.finished(t, id)
	}
	if res := b.svc.RunOnce(context.Background()); res.Runs != 3 || len(b.exp.exports) != 3 || b.entries(t) != 0 {
		t.Errorf("pass %+v in %d exports, %d entries left; want 3 runs in 3 exports", res, len(b.exp.exports), b.entries(t))
	}
}

// A run whose timeline is gone, or that the sample leaves out, is not
// exported and its entry goes; the runs after it are exported.
func TestRunOnceSkipsAndGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.st.Update(context.Background(), func(tx store.Tx) error {
		return tx.EventAppend(&store.Event{RunID: outbox, Type: "trace_due", At: t0, Detail: map[string]any{"run": "run_pruned"}})
	}); err != nil {
		t.Fatal(err)
	}
	b.finished(t, "run_unsampled")
	b.exp.skip[telemetry.TraceID("run_unsampled")] = true
	b.finished(t, "run_b")
	res := b.svc.RunOnce(context.Background())
	if res != (Result{Runs: 1, Unsampled: 1, Skipped: 1, Spans: 3}) || b.entries(t) != 0 {
		t.Errorf("pass %+v, %d entries left; want one run exported, one unsampled, one skipped, none left", res, b.entries(t))
	}
}

// A run the sample leaves out is decided on its acceptance alone: its
// timeline is not read on nor built, so one that Build would refuse (it
// has no terminal record) is counted unsampled, not skipped.
func TestRunOnceSamplesOnTheAcceptance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.st.Update(context.Background(), func(tx store.Tx) error {
		for _, e := range []*store.Event{{RunID: "run_cut", Type: telemetry.EvAccepted, At: t0}, {RunID: "run_cut", Type: telemetry.EvLeased, Node: "a", Attempt: 1, At: t0},
			{RunID: outbox, Type: "trace_due", At: t0, Detail: map[string]any{"run": "run_cut"}}} {
			if err := tx.EventAppend(e); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.exp.skip[telemetry.TraceID("run_cut")] = true
	if res := b.svc.RunOnce(context.Background()); res != (Result{Unsampled: 1}) || b.entries(t) != 0 {
		t.Errorf("pass %+v, %d entries left; want one run unsampled, none left", res, b.entries(t))
	}
}

// In a fleet one daemon at a time exports: another's pass does nothing
// while the first holds the service lease, and takes over once it lapses.
func TestRunOnceHoldsTheServiceLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.finished(t, "run_a")
	if res := b.svc.RunOnce(ctx); res.Runs != 1 {
		t.Fatalf("pass %+v, want one run", res)
	}
	other := New(quietEngine{"h2"}, b.st, b.clk, b.exp, outbox)
	b.finished(t, "run_b")
	if res := other.RunOnce(ctx); res != (Result{}) || b.entries(t) != 1 {
		t.Fatalf("another daemon's pass %+v with the lease held, %d entries; want nothing done", res, b.entries(t))
	}
	b.clk.Advance(LeaseTTL)
	if res := other.RunOnce(ctx); res.Runs != 1 || b.entries(t) != 0 {
		t.Errorf("after the lease lapsed: pass %+v, %d entries; want run_b exported", res, b.entries(t))
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	failed := Result{Err: errors.New("down")}
	for _, tt := range []struct {
		last time.Duration
		r    Result
		want time.Duration
	}{
		{Interval, Result{}, Interval},
		{MaxBackoff, Result{Runs: 1}, Interval},
		{Interval, failed, 2 * Interval},
		{MaxBackoff / 2, failed, MaxBackoff},
		{MaxBackoff, failed, MaxBackoff},
	} {
		if got := Backoff(tt.last, tt.r); got != tt.want {
			t.Errorf("Backoff(%v, err %v) = %v, want %v", tt.last, tt.r.Err, got, tt.want)
		}
	}
}

// A pass reads page after page while they are full, so an outbox that
// fills faster than one page an interval is drained in one pass; a page
// short of Batch ends it.
func TestRunOnceReadsPagesWhileTheyAreFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exp.queue = 3 * Batch
	for i := range 2*Batch + 10 {
		b.finished(t, fmt.Sprintf("run_%04d", i))
	}
	if res := b.svc.RunOnce(context.Background()); res.Runs != 2*Batch+10 || res.Err != nil || b.entries(t) != 0 {
		t.Errorf("pass %+v, %d entries left; want all %d runs in one pass", res, b.entries(t), 2*Batch+10)
	}
	if n := len(b.exp.exports); n != 3 {
		t.Errorf("%d exports, want one a page (3)", n)
	}
}

// Again: another page only after a full one that failed nothing, within
// MaxPages.
func TestAgain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r     Result
		full  bool
		pages int
		want  bool
	}{
		{Result{Runs: Batch}, true, 1, true},
		{Result{Runs: 10}, false, 1, false},
		{Result{Runs: 3, Err: errors.New("collector down")}, true, 1, false},
		{Result{Runs: Batch}, true, MaxPages - 1, true},
		{Result{Runs: Batch}, true, MaxPages, false},
	} {
		if got := Again(c.r, c.full, c.pages); got != c.want {
			t.Errorf("Again(%+v, full %v, page %d) = %v, want %v", c.r, c.full, c.pages, got, c.want)
		}
	}
}
