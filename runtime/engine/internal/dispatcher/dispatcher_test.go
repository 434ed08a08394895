package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

func TestAgain(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		p      Pass
		before int
		want   bool
	}{
		{"a full page that started work", Pass{Limit: 4, Listed: 4, Full: true, Started: 1}, 0, true},
		{"a short page: the queue is read to its end", Pass{Limit: 4, Listed: 3, Started: 3}, 0, false},
		{"no slot left", Pass{Limit: 4, Listed: 4, Full: true, Started: 4, Blocked: true}, 0, false},
		{"nothing started, nothing more withheld", Pass{Limit: 4, Listed: 4, Full: true, Withheld: 2}, 2, false},
		{"more withheld: look past them", Pass{Limit: 4, Listed: 4, Full: true, Withheld: 3}, 2, true},
		{"withheld beyond the scan bound", Pass{Limit: 5000, Listed: 5000, Full: true, Withheld: MaxWithheldScan + 1}, 0, false},
	} {
		if got := Again(tt.p, tt.before); got != tt.want {
			t.Errorf("%s: Again(%+v, %d) = %v, want %v", tt.name, tt.p, tt.before, got, tt.want)
		}
	}
}

// fakeEngine serves tasks from a real memstore: a started task is leased
// in the store before the next listing (so it is listed no more; one
// Update a page, as memstore copies its tables on each) and holds a slot
// until finish lets it go; tasks named in withheld are left to other
// daemons.
type fakeEngine struct {
	st       store.Store
	clk      clock.Clock
	slots    int
	withheld map[string]bool
	weights  map[string]int
	started  []string
	running  []string
	leasing  []*store.Task  // started, not yet leased in the store
	byOwner  map[string]int // tasks started, by owner
}

// lease writes the leases of the tasks started since the last listing.
func (f *fakeEngine) lease(ctx context.Context) error {
	err := f.st.Update(ctx, func(tx store.Tx) error {
		for _, t := range f.leasing {
			t.Leased = true
			if err := tx.TaskPut(t); err != nil {
				return err
			}
		}
		return nil
	})
	f.leasing = nil
	return err
}

func (f *fakeEngine) FreeSlots() int { return f.slots - len(f.running) }
func (f *fakeEngine) InHand() int    { return 0 }
func (f *fakeEngine) ListReady(ctx context.Context, perOwner, limit int) ([]*store.Task, error) {
	if err := f.lease(ctx); err != nil {
		return nil, err
	}
	var out []*store.Task
	err := f.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.TaskListReadyByOwner(store.TaskListReadyByOwnerParams{Now: f.clk.Now(), PerOwner: perOwner, Limit: limit})
		return err
	})
	return out, err
}
func (f *fakeEngine) Weight(owner string) int {
	if w := f.weights[owner]; w > 0 {
		return w
	}
	return 1
}
func (f *fakeEngine) Offer(ctx context.Context, t *store.Task) Outcome {
	switch {
	case f.withheld[t.ID]:
		return Withheld
	case f.FreeSlots() == 0:
		return NoSlot
	}
	f.leasing = append(f.leasing, t)
	f.started = append(f.started, t.ID)
	f.running = append(f.running, t.ID)
	if f.byOwner == nil {
		f.byOwner = map[string]int{}
	}
	f.byOwner[t.Owner]++
	return Started
}

// finish ends the n tasks started first of those running.
func (f *fakeEngine) finish(t *testing.T, n int) {
	t.Helper()
	n = min(n, len(f.running))
	if err := f.lease(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Update(context.Background(), func(tx store.Tx) error {
		for _, id := range f.running[:n] {
			if err := tx.TaskDelete(id); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.running = f.running[n:]
}
func (f *fakeEngine) Tick() time.Duration  { return 100 * time.Millisecond }
func (f *fakeEngine) Error(string, ...any) {}

func TestRunOnceFillsFreeSlotsOldestFirstAndLooksPastWithheld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewFake(t0.Add(time.Hour))
	st := memstore.New()
	for i := range 10 {
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.TaskPut(&store.Task{ID: fmt.Sprintf("t%02d", i), RunID: fmt.Sprintf("r%02d", i), Node: "n",
				Kind: store.TaskStep, ReadyAt: t0.Add(time.Duration(i) * time.Second), Attempt: 1})
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The three oldest are another daemon's to run.
	eng := &fakeEngine{st: st, clk: clk, slots: 4, withheld: map[string]bool{"t00": true, "t01": true, "t02": true}}
	d := New(eng, clk, nil)
	res := d.RunOnce(ctx)
	if got := fmt.Sprint(eng.started); got != "[t03 t04 t05 t06]" {
		t.Fatalf("started %s, want the four oldest this engine may run; pages %+v", got, res.Pages)
	}
	if res.Started() != 4 || len(res.Pages) != 2 {
		t.Fatalf("pages %+v", res.Pages)
	}
	// Every slot held: a pass lists nothing.
	if res := d.RunOnce(ctx); len(res.Pages) != 0 {
		t.Fatalf("with no free slot a pass read the queue: %+v", res.Pages)
	}
}
