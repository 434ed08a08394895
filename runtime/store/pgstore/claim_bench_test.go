package pgstore

import (
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

// BenchmarkClaim compares two ways for a fleet to claim tasks, with 3
// shared stores (daemons) of 4 claimers each racing for one queue of
// b.N ready tasks: "serializable" is the engine's claim (list ready tasks
// in a snapshot, then an Update that reads the task, skips it if leased,
// and writes it leased with its lease; collisions are serialization
// failures, rerun); "skiplocked" is one READ COMMITTED statement that
// takes the first unlocked ready row with FOR UPDATE SKIP LOCKED, plus
// the lease, outside the store contract; "spread" is the engine's claim
// starting each pass at a random place in its page, and "locked" that
// claim beginning with TaskLock (FOR UPDATE SKIP LOCKED on the one row). It reports claims/s
// and the conflicts retried per claim.
func BenchmarkClaim(b *testing.B) {
	const daemons, each = 3, 4
	for _, mode := range []string{"serializable", "spread", "locked", "skiplocked"} {
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

// claimSerializable claims as the engine does until the queue is empty;
// with spread each pass starts at a random place in the page it listed,
// as a shared engine's dispatch does.
func claimSerializable(s *Store, c int, spread, lock bool, claimed *atomic.Int64) error {
	for {
		var ready []*store.Task
		if err := s.View(ctx, func(tx store.Tx) error {
			var err error
			ready, err = tx.TaskListReady(time.Now(), 8)
			return err
		}); err != nil {
			return err
		}
		if len(ready) == 0 {
			return nil
		}
		if spread {
			k := rand.N(len(ready))
			ready = append(ready[k:], ready[:k]...)
		}
		for _, r := range ready {
			won := false
			if err := s.Update(ctx, func(tx store.Tx) error {
				won = false
				if lock {
					if ok, err := tx.(store.TaskLocker).TaskLock(r.ID); !ok {
						return err
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
