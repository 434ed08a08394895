package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// claimLease is the lease a claim of task id at attempt names.
func claimLease(id string, attempt int, holder string) *store.Lease {
	return &store.Lease{TaskID: id, RunID: "r", Slot: 2, BudgetSlice: 5, Deadline: at(time.Hour), Attempt: attempt, Holder: holder}
}

// testTaskClaim: a claim takes exactly the tasks named that are free at
// their lease's attempt and ready, writes each one's lease, leaves the
// others as they were, answers in the order named, and sees and is seen
// by the rest of its transaction; bad input is refused and changes
// nothing; committed alone (store.ClaimAlone) it is the same claim.
func testTaskClaim(t *testing.T, s store.Store, _ Opener) {
	leased := newTask("b1", "r", t0)
	leased.Leased = true
	other := claimLease("b1", 1, "other")
	update(t, s, func(tx store.Tx) error {
		return first(tx.RunInsert(newRun("r", "alice", store.PhaseQueued)),
			tx.TaskPut(newTask("a1", "r", at(time.Second))),
			tx.TaskPut(newTask("a2", "r", at(time.Minute))), // ready exactly at Now
			tx.TaskPut(leased), tx.LeasePut(other),
			tx.TaskPut(newTask("c1", "r", at(2*time.Minute))), // parked past Now
			tx.TaskPut(newTask("d1", "r", t0)))                // at attempt 1, named at 2
	})
	now := at(time.Minute)
	p := store.TaskClaimParams{Now: now, Leases: []*store.Lease{
		claimLease("a2", 1, "me"), claimLease("d1", 2, "me"), claimLease("b1", 1, "me"),
		claimLease("c1", 1, "me"), claimLease("gone", 1, "me"), claimLease("a1", 1, "me"),
		claimLease("a2", 1, "twice"),
	}}
	update(t, s, func(tx store.Tx) error {
		got, err := tx.TaskClaim(p)
		if err != nil {
			return err
		}
		if err := same("claimed, in the order named", taskIDs(got), []string{"a2", "a1"}); err != nil {
			return err
		}
		for _, tk := range got {
			if !tk.Leased || tk.Attempt != 1 || tk.RunID != "r" || tk.Node != "n" {
				return fmt.Errorf("claimed %+v: want the stored task, leased", tk)
			}
		}
		// The rest of the transaction sees the claim, and a second claim
		// of the same tasks takes nothing.
		ready, err := tx.TaskListReady(now, 0)
		if err := first(err, same("ready after the claim", taskIDs(ready), []string{"d1"})); err != nil {
			return err
		}
		again, err := tx.TaskClaim(p)
		return first(err, same("claimed again", taskIDs(again), []string{}))
	})
	view(t, s, func(tx store.Tx) error {
		for _, id := range []string{"a1", "a2"} {
			tk, err := tx.TaskGet(id)
			l, lerr := tx.LeaseGet(id)
			if err := first(err, lerr, check(tk.Leased, "%s is not leased after its claim", id),
				same(id+"'s lease", l, claimLease(id, 1, "me"))); err != nil {
				return err
			}
		}
		l, err := tx.LeaseGet("b1")
		if err := first(err, same("the lease b1 held already", l, other)); err != nil {
			return err
		}
		for _, id := range []string{"c1", "d1"} {
			tk, err := tx.TaskGet(id)
			_, lerr := tx.LeaseGet(id)
			if err := first(err, check(!tk.Leased, "%s was claimed", id), CheckNotFound(lerr)); err != nil {
				return err
			}
		}
		return CheckNotFound(func() error { _, err := tx.TaskGet("gone"); return err }())
	})

	// A claim in a function that fails is not kept.
	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx store.Tx) error {
		got, err := tx.TaskClaim(store.TaskClaimParams{Now: now, Leases: []*store.Lease{claimLease("d1", 1, "me")}})
		if err := first(err, same("claimed", taskIDs(got), []string{"d1"})); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want boom", err)
	}

	// Bad input is refused before anything is written; a View refuses it.
	for _, c := range []struct {
		name   string
		leases []*store.Lease
		want   error
	}{
		{"an empty task id", []*store.Lease{claimLease("d1", 1, "me"), claimLease("", 1, "me")}, store.ErrBadID},
		{"a nil lease", []*store.Lease{claimLease("d1", 1, "me"), nil}, store.ErrBadID},
		{"too many", slices.Repeat([]*store.Lease{claimLease("d1", 1, "me")}, store.MaxClaim+1), store.ErrTooLarge},
	} {
		err := s.Update(ctx, func(tx store.Tx) error {
			_, err := tx.TaskClaim(store.TaskClaimParams{Now: now, Leases: c.leases})
			return err
		})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := s.View(ctx, func(tx store.Tx) error {
		_, err := tx.TaskClaim(store.TaskClaimParams{Now: now, Leases: []*store.Lease{claimLease("d1", 1, "me")}})
		return err
	}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("a claim in a View: %v, want ErrReadOnly", err)
	}
	if tk := read(t, s, func(tx store.Tx) (*store.Task, error) { return tx.TaskGet("d1") }); tk.Leased {
		t.Fatal("d1 is leased after claims that failed")
	}

	// Committed alone, the same claim.
	got, err := store.ClaimAlone(ctx, s, store.TaskClaimParams{Now: now, Leases: []*store.Lease{claimLease("c1", 1, "me"), claimLease("d1", 1, "me")}})
	if err != nil || !slices.Equal(taskIDs(got), []string{"d1"}) {
		t.Fatalf("ClaimAlone: %v, %v; want d1", taskIDs(got), err)
	}
	view(t, s, func(tx store.Tx) error {
		tk, err := tx.TaskGet("d1")
		l, lerr := tx.LeaseGet("d1")
		return first(err, lerr, check(tk.Leased, "d1 is not leased after ClaimAlone"), same("d1's lease", l, claimLease("d1", 1, "me")))
	})
}

// testTaskClaimConcurrent: claimers racing for one queue, some claiming
// alone and some inside an Update, take every task exactly once.
func testTaskClaimConcurrent(t *testing.T, s store.Store, _ Opener) {
	const tasks, claimers = 40, 6
	update(t, s, func(tx store.Tx) error {
		for i := range tasks {
			if err := tx.TaskPut(newTask(fmt.Sprintf("t%03d", i), "r", t0)); err != nil {
				return err
			}
		}
		return nil
	})
	won, err := ClaimRace([]store.Store{s}, claimers, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckClaimedOnce(s, won, tasks); err != nil {
		t.Fatal(err)
	}
}

// ClaimRace runs claimers on stores (claimer c on stores[c % len]) that
// list the ready tasks and claim them until none is left, page by page,
// in turn one at a time alone, the whole page alone, the whole page
// inside an Update, and by reading, checking and writing each task in an
// Update of its own (as other writers do), and returns each task's
// winners by claimer.
func ClaimRace(stores []store.Store, claimers, page int) (map[string][]int, error) {
	var mu sync.Mutex
	won := map[string][]int{}
	errc := make(chan error, claimers)
	var wg sync.WaitGroup
	for c := range claimers {
		s := stores[c%len(stores)]
		wg.Go(func() {
			for {
				var ready []*store.Task
				if err := s.View(ctx, func(tx store.Tx) error {
					var err error
					ready, err = tx.TaskListReady(time.Now(), page)
					return err
				}); err != nil {
					errc <- err
					return
				}
				if len(ready) == 0 {
					return
				}
				var leases []*store.Lease
				for i := range ready {
					r := ready[(i+c)%len(ready)] // each claimer starts elsewhere
					leases = append(leases, &store.Lease{TaskID: r.ID, RunID: r.RunID, Attempt: r.Attempt, Holder: fmt.Sprint(c), Deadline: time.Now().Add(time.Hour)})
				}
				got, err := claimRaceOnce(s, c, leases)
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				for _, tk := range got {
					won[tk.ID] = append(won[tk.ID], c)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errc)
	return won, <-errc
}

// claimRaceOnce claims leases the way claimer c does (see ClaimRace).
func claimRaceOnce(s store.Store, c int, leases []*store.Lease) ([]*store.Task, error) {
	switch c % 4 {
	case 0:
		var out []*store.Task
		for _, l := range leases {
			got, err := store.ClaimAlone(ctx, s, store.TaskClaimParams{Now: time.Now(), Leases: []*store.Lease{l}})
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		return out, nil
	case 1:
		return store.ClaimAlone(ctx, s, store.TaskClaimParams{Now: time.Now(), Leases: leases})
	case 2:
		var out []*store.Task
		err := s.Update(ctx, func(tx store.Tx) error {
			var err error
			out, err = tx.TaskClaim(store.TaskClaimParams{Now: time.Now(), Leases: leases})
			return err
		})
		return out, err
	}
	var out []*store.Task
	for _, l := range leases {
		var got *store.Task
		if err := s.Update(ctx, func(tx store.Tx) error {
			got = nil
			tk, err := tx.TaskGet(l.TaskID)
			if err != nil || tk.Leased || tk.Attempt != l.Attempt {
				return err
			}
			tk.Leased = true
			if err := first(tx.TaskPut(tk), tx.LeasePut(l)); err != nil {
				return err
			}
			got = tk
			return nil
		}); err != nil {
			return nil, err
		}
		if got != nil {
			out = append(out, got)
		}
	}
	return out, nil
}

// CheckClaimedOnce checks a ClaimRace's outcome: every one of tasks
// claimed by exactly one claimer, whose lease the store holds.
func CheckClaimedOnce(s store.Store, won map[string][]int, tasks int) error {
	if len(won) != tasks {
		return fmt.Errorf("%d tasks claimed, want %d", len(won), tasks)
	}
	return s.View(ctx, func(tx store.Tx) error {
		for id, by := range won {
			if len(by) != 1 {
				return fmt.Errorf("task %s claimed by %v, want one claimer", id, by)
			}
			l, err := tx.LeaseGet(id)
			tk, terr := tx.TaskGet(id)
			if err := first(err, terr, check(l.Holder == fmt.Sprint(by[0]) && tk.Leased, "task %s: lease %+v, leased %v, want claimer %d's", id, l, tk.Leased, by[0])); err != nil {
				return err
			}
		}
		return nil
	})
}
