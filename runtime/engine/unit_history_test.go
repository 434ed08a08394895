package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

// TestUnitHistoryRingKeepsTheLastWindow: past one window of samples the
// oldest are dropped, and the rest read back oldest first.
func TestUnitHistoryRingKeepsTheLastWindow(t *testing.T) {
	t.Parallel()
	var h history
	const extra = 5
	for i := range historySamples + extra {
		h.add(Sample{At: unitEpoch.Add(time.Duration(i) * HistoryInterval)})
	}
	got := h.samples()
	if len(got) != historySamples {
		t.Fatalf("%d samples kept, want %d (%v at %v)", len(got), historySamples, HistoryWindow, HistoryInterval)
	}
	for i, s := range got {
		if want := unitEpoch.Add(time.Duration(i+extra) * HistoryInterval); !s.At.Equal(want) {
			t.Fatalf("sample %d at %v, want %v", i, s.At, want)
		}
	}
}

// TestUnitHistorySampledOnTheClock: the first scheduler tick takes a
// sample, the next comes HistoryInterval later by the engine's clock, and
// each sample's tool figures are those of its own interval.
func TestUnitHistorySampledOnTheClock(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitSrc)
	id := b.start(t, "echo", `{"n": 1}`, "")
	if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
		t.Fatalf("phase %s", run.Phase)
	}
	if n := len(b.eng.StatsHistory()); n != 0 {
		t.Fatalf("%d samples before the clock moved, want 0", n)
	}
	sampled := func(n int) []Sample {
		var h []Sample
		testutil.Eventually(t, waitTimeout, func() error {
			if h = b.eng.StatsHistory(); len(h) != n {
				return fmt.Errorf("%d samples, want %d", len(h), n)
			}
			return nil
		})
		return h
	}
	b.clock.Advance(b.tick)
	h := sampled(1)
	first := h[0]
	if !first.At.Equal(b.clock.Now()) || first.Health.Admission != "open" || first.Health.Slots == 0 {
		t.Fatalf("first sample %+v", first)
	}
	echo := func(s Sample) TypeStats {
		for _, ts := range s.Types {
			if ts.Type == "kit.echo" {
				return ts
			}
		}
		return TypeStats{}
	}
	if e := echo(first); e.Attempts != 1 || e.Units != 1 || e.Amplification != 1 || e.ExecMean < 0 {
		t.Fatalf("first sample's kit.echo %+v, want one attempt of one unit", e)
	}

	b.clock.Advance(HistoryInterval)
	h = sampled(2)
	if d := h[1].At.Sub(first.At); d != HistoryInterval {
		t.Fatalf("samples %v apart, want %v", d, HistoryInterval)
	}
	if e := echo(h[1]); e.Attempts != 0 || e.Units != 0 {
		t.Fatalf("second sample's kit.echo %+v: nothing ran in its interval", e)
	}
}

// TestUnitQueueDepthSampled: with the one slot held, tasks that are ready
// wait in the queue: the next sample counts them under their tool, in the
// history and in Stats, and once they ran the next sample counts none.
func TestUnitQueueDepthSampled(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Workers: 1}, unitSrc)
	held := b.start(t, "held", `{"gate": "g"}`, "")
	testutil.Eventually(t, waitTimeout, func() error {
		var n int
		b.kit.read(func() { n = b.kit.blocked })
		if n != 1 {
			return fmt.Errorf("%d calls at the gate, want 1", n)
		}
		return nil
	})
	queued := []string{b.start(t, "echo", `{"n": 1}`, ""), b.start(t, "echo", `{"n": 2}`, "")}
	depth := func(types []TypeStats, typ string) int64 {
		for _, ts := range types {
			if ts.Type == typ {
				return ts.QueueDepth
			}
		}
		return -1
	}
	sampled := func(n int) Sample {
		var h []Sample
		testutil.Eventually(t, waitTimeout, func() error {
			if h = b.eng.StatsHistory(); len(h) < n {
				return fmt.Errorf("%d samples, want %d", len(h), n)
			}
			return nil
		})
		return h[n-1]
	}
	b.clock.Advance(b.tick)
	s := sampled(1)
	if d := depth(s.Types, "kit.echo"); d != 2 {
		t.Fatalf("sample's kit.echo queue depth %d, want 2 (%+v)", d, s.Types)
	}
	if d := depth(s.Types, "kit.block"); d != 0 {
		t.Errorf("sample's kit.block queue depth %d, want 0: its one task holds the slot", d)
	}
	if d := depth(b.eng.Stats().Types, "kit.echo"); d != 2 {
		t.Errorf("Stats' kit.echo queue depth %d, want 2", d)
	}

	b.kit.open("g")
	for _, id := range append(queued, held) {
		if run := b.waitTerminal(t, id); run.Phase != store.PhaseCompleted {
			t.Fatalf("run %s %s", id, run.Phase)
		}
	}
	b.clock.Advance(HistoryInterval)
	if d := depth(sampled(2).Types, "kit.echo"); d != 0 {
		t.Errorf("kit.echo queue depth %d after its runs ended, want 0", d)
	}
	if d := depth(b.eng.Stats().Types, "kit.echo"); d != 0 {
		t.Errorf("Stats' kit.echo queue depth %d after its runs ended, want 0", d)
	}
}
