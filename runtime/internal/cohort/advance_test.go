package cohort

import (
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func TestAdvance(t *testing.T) {
	t.Parallel()
	decl := Decl{Width: 2, Grace: 10 * time.Second, Fallback: time.Minute}
	open := func(mod func(*State)) State {
		s := State{State: store.CohortOpen, Items: 4, Need: 4}
		mod(&s)
		return s
	}
	tests := []struct {
		name string
		s    State
		d    Decl
		now  time.Time
		want Decision
	}{
		{"fresh cohort admits up to its width", open(func(s *State) { s.Prepared = 4 }), decl, t0,
			Decision{Admit: 2, Wake: t0.Add(time.Minute)}},
		{"admits only what was prepared", open(func(s *State) { s.Need, s.Next, s.InFlight, s.Prepared = 2, 2, 0, 1 }), decl, t0,
			Decision{Admit: 1, Wake: t0.Add(time.Minute)}},
		{"full width admits none", open(func(s *State) { s.Next, s.InFlight, s.Prepared = 2, 2, 2 }), decl, t0,
			Decision{Wake: t0.Add(time.Minute)}},
		{"the need met freezes admission", open(func(s *State) { s.Need, s.Next, s.InFlight, s.Mature = 2, 3, 1, 2 }), decl, t0,
			Decision{Freeze: true, Wake: t0.Add(10 * time.Second)}},
		{"a need that can no longer be met freezes", open(func(s *State) { s.Next, s.InFlight, s.Mature = 4, 1, 2 }), decl, t0,
			Decision{Freeze: true, Wake: t0.Add(10 * time.Second)}},
		{"fresh children count as potential", open(func(s *State) { s.Next, s.InFlight, s.Mature, s.Fresh = 4, 1, 2, 1 }), decl, t0,
			Decision{Wake: t0}},
		{"grace not over: in-flight children go on",
			State{State: store.CohortFrozen, Items: 4, Need: 2, Next: 3, InFlight: 1, Mature: 2, FrozenAt: t0}, decl, t0.Add(9 * time.Second),
			Decision{Wake: t0.Add(10 * time.Second)}},
		{"grace over: stop the in-flight and close sufficient",
			State{State: store.CohortFrozen, Items: 4, Need: 2, Next: 3, InFlight: 1, Mature: 2, FrozenAt: t0}, decl, t0.Add(10 * time.Second),
			Decision{Stop: true, Close: true, Sufficient: true}},
		{"protected children are never stopped",
			State{State: store.CohortFrozen, Items: 4, Need: 2, Next: 3, InFlight: 1, Mature: 2, FrozenAt: t0},
			Decl{Width: 2, Protected: true, Grace: 10 * time.Second, Fallback: time.Minute}, t0.Add(time.Hour),
			Decision{Wake: t0.Add(time.Hour + time.Minute)}},
		{"frozen and drained closes",
			State{State: store.CohortFrozen, Items: 4, Need: 2, Next: 3, Mature: 2, FrozenAt: t0}, decl, t0.Add(time.Second),
			Decision{Close: true, Sufficient: true}},
		{"every child done closes an open cohort", open(func(s *State) { s.Need, s.Next, s.Mature = 4, 4, 4 }), decl, t0,
			Decision{Freeze: true, Close: true, Sufficient: true}},
		{"judge the fresh before closing", open(func(s *State) { s.Need, s.Next, s.Mature, s.Fresh = 1, 4, 0, 2 }), decl, t0,
			Decision{JudgeFirst: true, Wake: t0}},
		{"the fuse closes an under-filled cohort",
			open(func(s *State) { s.Next, s.InFlight, s.Mature, s.Deadline = 2, 2, 1, t0 }), decl, t0,
			Decision{Close: true, Fuse: true, FuseClosed: true}},
		{"the fuse does not wait for fresh judgements",
			open(func(s *State) { s.Next, s.InFlight, s.Mature, s.Fresh, s.Deadline = 2, 1, 1, 1, t0 }), decl, t0.Add(time.Second),
			Decision{Close: true, Fuse: true, FuseClosed: true}},
		{"a sufficient close past the deadline is not a fuse close",
			State{State: store.CohortFrozen, Items: 4, Need: 2, Next: 2, Mature: 2, Deadline: t0, FrozenAt: t0}, decl, t0,
			Decision{Close: true, Sufficient: true, Fuse: true}},
		{"the fuse is the wake if sooner than the fallback",
			open(func(s *State) { s.Next, s.InFlight, s.Deadline = 2, 2, t0.Add(5*time.Second) }), decl, t0,
			Decision{Wake: t0.Add(5 * time.Second)}},
		{"an empty cohort closes sufficient at once", State{State: store.CohortOpen}, decl, t0,
			Decision{Freeze: true, Close: true, Sufficient: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Advance(tt.s, tt.d, tt.now); got != tt.want {
				t.Errorf("Advance(%+v, %+v)\n got %+v\nwant %+v", tt.s, tt.d, got, tt.want)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	t.Parallel()
	c := &store.Cohort{State: store.CohortFrozen, Items: 5, Need: 3, Next: 4, InFlight: 2, Mature: 1, Fresh: []int{0, 3},
		Deadline: t0, FrozenAt: t0.Add(-time.Second)}
	want := State{State: store.CohortFrozen, Items: 5, Need: 3, Next: 4, InFlight: 2, Mature: 1, Fresh: 2,
		Deadline: t0, FrozenAt: t0.Add(-time.Second), Prepared: 1}
	if got := StateOf(c, 1); got != want {
		t.Fatalf("StateOf = %+v, want %+v", got, want)
	}
}
