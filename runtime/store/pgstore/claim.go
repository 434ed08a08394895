package pgstore

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/runtime/store"
)

// maxClaimBatch bounds how many claims one claim statement of the
// claimer carries.
const maxClaimBatch = 64

// claimReq is one Store.TaskClaim waiting for the claimer; done closes
// once out and err are set.
type claimReq struct {
	ctx  context.Context
	p    store.TaskClaimParams
	out  []*store.Task
	err  error
	done chan struct{}
}

// TaskClaim commits a claim on its own (store.Claimer): claimSQL as one
// statement outside the group commit, at READ COMMITTED, so a task
// another daemon is claiming now is passed over rather than collided
// with, and no serialization failure reruns a group of other functions.
// The claims that wait together (the workers one dispatch pass started)
// go in one statement and one commit, as Updates share a group commit.
// Once the claim is sent, TaskClaim waits for its outcome whatever ctx
// says: a claim that committed holds its tasks until its leases expire.
func (s *Store) TaskClaim(ctx context.Context, p store.TaskClaimParams) ([]*store.Task, error) {
	if err := store.CheckTaskClaim(p); err != nil {
		return nil, err
	}
	if err := s.gate.Enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.Leave()
	r := &claimReq{ctx: ctx, p: p, done: make(chan struct{})}
	select {
	case s.claims <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-r.done
	return r.out, r.err
}

var _ store.Claimer = (*Store)(nil)

// claimLoop takes a claim, adds those already waiting behind it (up to
// maxClaimBatch, and store.MaxClaim tasks) and commits them in one
// statement, until Close.
func (s *Store) claimLoop() {
	defer close(s.claimDone)
	for {
		var batch []*claimReq
		select {
		case r := <-s.claims:
			batch = append(batch, r)
		case <-s.quit:
			return
		}
		n := len(batch[0].p.Leases)
	fill:
		for len(batch) < maxClaimBatch && n < store.MaxClaim {
			select {
			case r := <-s.claims:
				batch = append(batch, r)
				n += len(r.p.Leases)
			default:
				break fill
			}
		}
		s.claimBatch(batch)
	}
}

// claimBatch commits the claims of batch in one statement and answers
// each: a task two of them name goes to the first.
func (s *Store) claimBatch(batch []*claimReq) {
	var live []*claimReq
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err // not sent: nothing was claimed for it
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	t := &storeTx{ctx: context.Background()}
	seen := map[string]bool{}
	var rows []claimRow
	ids := make([][]string, len(live))
	for i, r := range live {
		more, named, err := t.claimRows(r.p, seen, rows, false)
		if err != nil {
			r.err = err // none of its tasks is sent
			continue
		}
		rows, ids[i] = more, named
	}
	byID, err := s.claimRowsAlone(t, rows)
	for i, r := range live {
		switch {
		case r.err != nil:
		case err != nil:
			r.err = err
		default:
			r.out = inOrder(ids[i], byID)
			s.claimed.Add(uint64(len(r.out)))
		}
		close(r.done)
	}
}

// claimRowsAlone runs the claim statement for rows on a pooled connection,
// in a transaction of its own.
func (s *Store) claimRowsAlone(t *storeTx, rows []claimRow) (map[string]*store.Task, error) {
	conn, err := s.pool.Acquire(t.ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	defer conn.Release()
	t.q = conn
	defer t.End()
	return t.claim(rows)
}
