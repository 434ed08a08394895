package pgstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/store"
)

// BenchmarkClaim compares ways for a fleet to claim tasks, with 3 shared
// stores (daemons) of 4 claimers each racing for one queue of b.N ready
// tasks, each claimer listing 8 ready tasks in a snapshot and claiming
// each in a claim of its own, all at once (as the workers a dispatch pass
// starts): "serializable" claims in an Update that reads the
// task, skips it if leased, and writes it leased with its lease
// (collisions are serialization failures, rerun); "spread" starts each
// pass at a random place in its page, and "locked" begins each such
// Update with FOR UPDATE SKIP LOCKED on the task's row as well (the
// engine's claim before TaskClaim); "claim" is the engine's claim now,
// Store.TaskClaim of each listed task committed alone (store.Claimer),
// all at once as the workers a dispatch pass starts (the store puts
// the claims waiting together in one statement), with spread; "claim8"
// claims the 8 listed in one TaskClaim; "skiplocked"
// is one READ COMMITTED statement that takes the first unlocked ready row
// with FOR UPDATE SKIP LOCKED, plus the lease, without listing (the
// ceiling: no fair order). It reports claims/s and the conflicts retried
// per claim.
func BenchmarkClaim(b *testing.B) {
	const daemons, each = 3, 4
	for _, mode := range []string{"serializable", "spread", "locked", "claim", "claim8", "skiplocked"} {
		b.Run(mode, func(b *testing.B) {
			u := pgtest.Schema(b)
			var stores []*Store
			for range daemons {
				stores = append(stores, openURL(b, u, Options{Shared: true}))
			}
			now := time.Now()
			if err := stores[0].Update(ctx, func(tx store.Tx) error {
				for i := range b.N {
					if err := tx.TaskPut(&store.Task{ID: fmt.Sprintf("t%08d", i), RunID: "r", Kind: store.TaskStep, ReadyAt: now}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			var claimed atomic.Int64
			var wg sync.WaitGroup
			errc := make(chan error, daemons*each)
			b.ResetTimer()
			start := time.Now()
			for c := range daemons * each {
				s := stores[c%daemons]
				wg.Go(func() {
					var err error
					switch mode {
					case "serializable", "spread", "locked":
						err = claimSerializable(s, c, mode != "serializable", mode == "locked", &claimed)
					case "claim", "claim8":
						err = claimAlone(s, c, mode == "claim8", &claimed)
					default:
						err = claimSkipLocked(s, c, &claimed)
					}
					if err != nil {
						errc <- err
					}
				})
			}
			wg.Wait()
			d := time.Since(start)
			b.StopTimer()
			close(errc)
			for err := range errc {
				b.Fatal(err)
			}
			if n := claimed.Load(); n != int64(b.N) {
				b.Fatalf("%d claims of %d tasks", n, b.N)
			}
			var conflicts uint64
			for _, s := range stores {
				conflicts += s.Stats().Conflicts
			}
			b.ReportMetric(float64(b.N)/d.Seconds(), "claims/s")
			b.ReportMetric(float64(conflicts)/float64(b.N), "conflicts/claim")
		})
	}
}

// listPage lists a claimer's page: 8 ready tasks, oldest first.
func listPage(s *Store) ([]*store.Task, error) {
	var ready []*store.Task
	err := s.View(ctx, func(tx store.Tx) error {
		var err error
		ready, err = tx.TaskListReady(time.Now(), 8)
		return err
	})
	return ready, err
}

// claimSerializable claims as the engine did until the queue is empty;
// with spread each pass starts at a random place in the page it listed,
// as a shared engine's dispatch does.
func claimSerializable(s *Store, c int, spread, lock bool, claimed *atomic.Int64) error {
	for {
		ready, err := listPage(s)
		if err != nil {
			return err
		}
		if len(ready) == 0 {
			return nil
		}
		if spread {
			k := rand.N(len(ready))
			ready = append(ready[k:], ready[:k]...)
		}
		// Concurrently, as a dispatch pass's workers claim.
		errs := make([]error, len(ready))
		var wg sync.WaitGroup
		for i, r := range ready {
			wg.Go(func() { errs[i] = claimOneSerializable(s, c, r, lock, claimed) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
}

// claimOneSerializable claims r as the engine did before TaskClaim: read,
// check and write it in an Update, with lock beginning with a row lock.
func claimOneSerializable(s *Store, c int, r *store.Task, lock bool, claimed *atomic.Int64) error {
	won := false
	if err := s.Update(ctx, func(tx store.Tx) error {
		won = false
		if lock {
			// The row lock the engine took before TaskClaim.
			var one int
			err := tx.(*storeTx).queryRow(`SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE SKIP LOCKED`, r.ID).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return tx.(*storeTx).fail(err) // a serialization failure reruns the group
			}
		}
		cur, err := tx.TaskGet(r.ID)
		if err != nil || cur.Leased {
			return err
		}
		cur.Leased, won = true, true
		if err := tx.TaskPut(cur); err != nil {
			return err
		}
		return tx.LeasePut(&store.Lease{TaskID: cur.ID, RunID: cur.RunID, Holder: fmt.Sprint(c), Deadline: time.Now().Add(time.Minute)})
	}); err != nil {
		return err
	}
	if won {
		claimed.Add(1)
	}
	return nil
}

// claimAlone claims with Store.TaskClaim until the queue is empty: each
// listed task in a claim of its own, all at once, as the engine does, or
// with batch all of a page in one claim.
func claimAlone(s *Store, c int, batch bool, claimed *atomic.Int64) error {
	for {
		ready, err := listPage(s)
		if err != nil {
			return err
		}
		if len(ready) == 0 {
			return nil
		}
		k := rand.N(len(ready))
		ready = append(ready[k:], ready[:k]...)
		var leases []*store.Lease
		for _, r := range ready {
			leases = append(leases, &store.Lease{TaskID: r.ID, RunID: r.RunID, Attempt: r.Attempt, Holder: fmt.Sprint(c), Deadline: time.Now().Add(time.Minute)})
		}
		groups := [][]*store.Lease{leases}
		if !batch {
			groups = nil
			for _, l := range leases {
				groups = append(groups, []*store.Lease{l})
			}
		}
		// Concurrently, as a dispatch pass's workers claim.
		errs := make([]error, len(groups))
		var wg sync.WaitGroup
		for i, g := range groups {
			wg.Go(func() {
				got, err := s.TaskClaim(ctx, store.TaskClaimParams{Now: time.Now(), Leases: g})
				errs[i] = err
				claimed.Add(int64(len(got)))
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
}

// claimSkipLocked claims with FOR UPDATE SKIP LOCKED until the queue is
// empty.
func claimSkipLocked(s *Store, c int, claimed *atomic.Int64) error {
	for {
		var id string
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `UPDATE tasks SET leased = true WHERE id = (
				SELECT id FROM tasks WHERE NOT leased AND ready_ns <= $1 ORDER BY ready_ns, id LIMIT 1 FOR UPDATE SKIP LOCKED)
				RETURNING id`, nanos(time.Now())).Scan(&id)
			if err != nil {
				return err
			}
			data, err := encode(&store.Lease{TaskID: id, RunID: "r", Holder: fmt.Sprint(c), Deadline: time.Now().Add(time.Minute)})
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO leases (task_id, deadline_ns, v, data) VALUES ($1, $2, $3, $4)`, id, nanos(time.Now().Add(time.Minute)), recordV1, data)
			return err
		})
		if err == pgx.ErrNoRows {
			return nil
		}
		if err != nil {
			return err
		}
		claimed.Add(1)
	}
}
