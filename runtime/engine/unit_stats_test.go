package engine

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weirhq/weir/runtime/store"
)

// TestUnitStatsFromObservations: a parent parked on a child parked on a
// person shows two runs waiting (counted by listing: memstore counts no
// index); the decision and the child's end each resume a run, observed by
// what it waited for; `weir stats`'s mean is the histogram's sum over
// its count.
func TestUnitStatsFromObservations(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitWaitSrc)
	ctx := context.Background()
	id := b.start(t, "parent_waits", `{}`, "")
	waits := b.oneHumanWait(t, id, "waiting on its child", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	phases, err := b.eng.RunPhases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[store.Phase]int{store.PhaseQueued: 0, store.PhaseRunning: 0, store.PhaseWaiting: 2, store.PhaseCompleting: 0}; !maps.Equal(phases, want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	if err := b.eng.Decide(ctx, DecideParams{Owner: "alice", RunID: waits[0].RunID, Node: "approve", Approve: true}); err != nil {
		t.Fatal(err)
	}
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s error %+v", run.Phase, run.Error)
	}
	if phases, err = b.eng.RunPhases(ctx); err != nil || phases[store.PhaseWaiting] != 0 {
		t.Fatalf("phases after the end %v %v", phases, err)
	}

	obs := b.eng.stats.obs
	if n := sampleCount(t, obs.resume.WithLabelValues("child")); n != 1 {
		t.Errorf("%d resumes after a child, want 1", n)
	}
	if n := sampleCount(t, obs.resume.WithLabelValues("human")); n != 1 {
		t.Errorf("%d resumes after a decision, want 1", n)
	}
	if n := sampleCount(t, obs.admissionWait); n != 1 {
		t.Errorf("%d admissions, want 1 (the child started inside its parent's step)", n)
	}
	for _, ts := range b.eng.Stats().Types {
		if ts.Type != "kit.echo" {
			continue
		}
		h := obs.toolExec.WithLabelValues("kit.echo")
		n := sampleCount(t, h)
		if n != 2 || ts.Attempts != 2 {
			t.Errorf("echo: %d timed tries, %d attempts, want 2", n, ts.Attempts)
		}
		if want := time.Duration(sampleSum(t, h) / float64(n) * float64(time.Second)); ts.ExecMean != want {
			t.Errorf("mean %v, histogram sum/count %v", ts.ExecMean, want)
		}
	}
}

func histogramOf(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

func sampleCount(t *testing.T, o prometheus.Observer) uint64 {
	return histogramOf(t, o).GetSampleCount()
}
func sampleSum(t *testing.T, o prometheus.Observer) float64 { return histogramOf(t, o).GetSampleSum() }
