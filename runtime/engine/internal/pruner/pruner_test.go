package pruner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fakeEngine struct{ retention, audit time.Duration }

func (f fakeEngine) Retention() time.Duration       { return f.retention }
func (f fakeEngine) AuditRetention() time.Duration  { return f.audit }
func (f fakeEngine) SpendSince(now time.Time) int64 { return now.Unix()/60 - 59 }
func (f fakeEngine) Info(string, ...any)            {}
func (f fakeEngine) Error(string, ...any)           {}

func TestRunOnceRemovesWhatRetentionLetsGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st := memstore.New()
	run := func(id, parent string, phase store.Phase, finished time.Time) {
		t.Helper()
		r := &store.Run{ID: id, Flow: "f", Owner: "alice", Phase: phase, ParentRunID: parent, CreatedAt: t0, UpdatedAt: finished}
		if phase.Terminal() {
			r.FinishedAt = finished
		}
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.RunInsert(r) }); err != nil {
			t.Fatal(err)
		}
	}
	run("old", "", store.PhaseCompleted, t0)
	run("young", "", store.PhaseFailed, t0.Add(50*time.Minute))
	run("parent", "", store.PhaseRunning, t0)
	run("child", "parent", store.PhaseCompleted, t0)
	for i := range 3 {
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.EventAppend(&store.Event{RunID: "audit", Type: "audit", At: t0.Add(time.Duration(i) * 30 * time.Minute)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Spend of t0's minute and of 40 minutes later: at +90m the first has
	// left the window, the second not.
	for _, m := range []int64{t0.Unix() / 60, t0.Add(40*time.Minute).Unix() / 60} {
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.OwnerSpendAdd(store.OwnerSpend{Owner: "alice", Minute: m, Cost: 3})
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Trace outbox entries of an hour ago and of now: the first goes
	// with the runs of its age.
	for _, at := range []time.Time{t0, t0.Add(90 * time.Minute)} {
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.EventAppend(&store.Event{RunID: "outbox", Type: "trace_due", At: at})
		}); err != nil {
			t.Fatal(err)
		}
	}
	p := New(fakeEngine{retention: time.Hour, audit: 45 * time.Minute}, st, clk, "audit", "outbox")
	clk.Advance(90 * time.Minute)
	got := p.RunOnce(ctx)
	if want := (Result{Runs: 1, AuditEvents: 2, SpendRows: 1, OutboxEntries: 1}); got != want {
		t.Fatalf("pass %+v, want %+v", got, want)
	}
	_ = st.View(ctx, func(tx store.Tx) error {
		for id, kept := range map[string]bool{"old": false, "young": true, "parent": true, "child": true} {
			_, err := tx.RunGet(id)
			if kept != !errors.Is(err, store.ErrNotFound) {
				t.Errorf("run %s: kept %v, want %v (err %v)", id, !kept, kept, err)
			}
		}
		return nil
	})
	// No retention: runs stay, audit events still go by their own.
	p = New(fakeEngine{audit: time.Minute}, st, clk, "audit", "outbox")
	if got := p.RunOnce(ctx); got != (Result{AuditEvents: 1}) {
		t.Fatalf("without retention %+v", got)
	}
}
