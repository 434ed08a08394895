package dispatcher

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

func TestNext(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		owners []string
		pass   map[string]uint64
		vt     uint64
		want   int
	}{
		{"nobody", nil, nil, 0, -1},
		{"an owner alone is served", []string{"a"}, map[string]uint64{"a": 9 * stride}, 0, 0},
		{"least pass first", []string{"a", "b"}, map[string]uint64{"a": 3, "b": 2}, 0, 1},
		{"a tie goes to the older head", []string{"b", "a"}, map[string]uint64{"a": 2, "b": 2}, 0, 0},
		{"a newcomer starts at the virtual time", []string{"a", "new"}, map[string]uint64{"a": 5}, 5, 0},
		{"a newcomer goes before an owner ahead of it", []string{"a", "new"}, map[string]uint64{"a": 6}, 5, 1},
		{"idling earns no credit: a pass behind vt counts as vt", []string{"idle", "b"}, map[string]uint64{"idle": 1, "b": 5}, 5, 0},
	} {
		if got := Next(tt.owners, tt.pass, tt.vt); got != tt.want {
			t.Errorf("%s: Next(%v, %v, %d) = %d, want %d", tt.name, tt.owners, tt.pass, tt.vt, got, tt.want)
		}
	}
}

func TestServed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name             string
		pass, vt         uint64
		weight           int
		wantPass, wantVT uint64
	}{
		{"weight 1 costs a stride", 0, 0, 1, stride, 0},
		{"weight 2 costs half", 0, 0, 2, stride / 2, 0},
		{"an idle owner starts at vt", 1, 100, 1, 100 + stride, 100},
		{"an owner ahead starts at its pass", 300, 100, 4, 300 + stride/4, 300},
		{"weight 0 counts as 1", 0, 0, 0, stride, 0},
		{"weights past MaxWeight count as it", 0, 0, MaxWeight * 4, stride / MaxWeight, 0},
	} {
		p, vt := Served(tt.pass, tt.vt, tt.weight)
		if p != tt.wantPass || vt != tt.wantVT {
			t.Errorf("%s: Served(%d, %d, %d) = %d, %d; want %d, %d", tt.name, tt.pass, tt.vt, tt.weight, p, vt, tt.wantPass, tt.wantVT)
		}
	}
}

// TestSharesOrder: the order Shares gives two backlogged owners of
// weights 2 and 1, slot by slot, and what Prune keeps.
func TestSharesOrder(t *testing.T) {
	t.Parallel()
	s := NewShares()
	w := map[string]int{"a": 2, "b": 1}
	var got []string
	for range 9 {
		o := []string{"a", "b"}[s.Next([]string{"a", "b"})]
		s.Serve(o, w[o])
		got = append(got, o)
	}
	if want := []string{"a", "b", "a", "a", "b", "a", "a", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	s.Prune()
	if s.Len() != 2 {
		t.Fatalf("both owners are ahead of the virtual time: kept %d", s.Len())
	}
	// b alone for a while: a falls behind the virtual time and is forgotten.
	for range 4 {
		s.Serve("b", 1)
	}
	s.Prune()
	if s.Len() != 1 {
		t.Fatalf("kept %d owners, want only b", s.Len())
	}
}

// fairBundle is a dispatcher over a memstore queue on a fake clock.
type fairBundle struct {
	eng *fakeEngine
	d   *Dispatcher
	clk *clock.Fake
	t0  time.Time
}

func setupFair(t testing.TB, slots int, weights map[string]int) *fairBundle {
	t.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewFake(t0.Add(time.Hour))
	eng := &fakeEngine{st: memstore.New(), clk: clk, slots: slots, weights: weights}
	return &fairBundle{eng: eng, d: New(eng, clk, nil), clk: clk, t0: t0}
}

// queue puts n ready tasks of owner, the first ready at from, one a
// millisecond after another.
func (b *fairBundle) queue(t testing.TB, owner string, n int, from time.Duration) {
	t.Helper()
	if err := b.eng.st.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			id := fmt.Sprintf("%s-%05d", owner, i)
			if err := tx.TaskPut(&store.Task{ID: id, RunID: "r-" + id, Owner: owner, Kind: store.TaskStep, Attempt: 1,
				ReadyAt: b.t0.Add(from + time.Duration(i)*time.Millisecond)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestWeightsShareSlots: owners of weights 2 and 1, both with more work
// queued than the slots can run (the light one's queued behind the
// heavy one's), get 2:1 of the slots within 10% over 2,000 tasks, however
// many slots each pass finds free.
func TestWeightsShareSlots(t *testing.T) {
	t.Parallel()
	// Enough of each to stay backlogged through 2,000 starts (1,333 and
	// 667 at 2:1), no more: each listing reads the whole memstore queue.
	b := setupFair(t, 16, map[string]int{"two": 2, "one": 1})
	b.queue(t, "two", 1500, 0)
	b.queue(t, "one", 1000, time.Hour/2)
	ctx := context.Background()
	for round := 0; len(b.eng.started) < 2000; round++ {
		if res := b.d.RunOnce(ctx); res.Started() == 0 {
			t.Fatalf("round %d started nothing with %d slots free", round, b.eng.FreeSlots())
		}
		b.eng.finish(t, round%9+1) // a few slots free at a time, as workers end
		b.clk.Advance(time.Second)
	}
	two, one := 0, 0
	for _, id := range b.eng.started[:2000] {
		if id[:3] == "two" {
			two++
		} else {
			one++
		}
	}
	if ratio := float64(two) / float64(one); math.Abs(ratio-2) > 0.2 {
		t.Fatalf("weights 2:1 got %d:%d of 2,000 slots (%.3f), want 2 within 10%%", two, one, ratio)
	}
}

// TestLightOwnerNotStarved: a light owner's few tasks, queued behind a
// heavy owner's 10,000, start in the first passes; the heavy owner, alone
// again, gets every slot.
func TestLightOwnerNotStarved(t *testing.T) {
	t.Parallel()
	b := setupFair(t, 4, nil)
	b.queue(t, "heavy", 10000, 0)
	b.queue(t, "light", 10, time.Hour/2)
	ctx := context.Background()
	for len(b.eng.started) < 40 {
		b.d.RunOnce(ctx)
		b.eng.finish(t, 4)
		b.clk.Advance(time.Second)
	}
	lightAt := -1
	for i, id := range b.eng.started {
		if id[:5] == "light" {
			lightAt = i
		}
	}
	// Equal weights: the light owner gets every other slot while it has
	// work, so its 10 tasks are among the first 20 started.
	if lightAt < 0 || lightAt >= 20 || b.eng.byOwner["light"] != 10 {
		t.Fatalf("light owner's last task started at %d (%d of 10 started): want within the first 20 starts", lightAt, b.eng.byOwner["light"])
	}
	if res := b.d.RunOnce(ctx); res.Started() != 4 {
		t.Fatalf("the heavy owner alone started %d tasks on 4 free slots: the order must be work-conserving", res.Started())
	}
}
