package badgerstore

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/dgraph-io/badger/v4"

	"github.com/weirhq/weir/runtime/store"
)

// request is one Update waiting for the committer.
type request struct {
	ctx      context.Context
	fn       func(store.Tx) error
	res      chan error // buffered: the committer never blocks on a caller
	panicked any        // set before res is sent when fn panicked
	failed   error      // fn's own error, answered whatever the commit does
}

// PanicError carries a panic raised by an Update function on the committer
// goroutine back to the caller, which panics with it.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("badgerstore: Update function panicked: %v\n%s", p.Value, p.Stack)
}

// batch is one group commit being assembled.
type batch struct {
	snap  *badger.Txn // committed state the batch's reads start from
	layer *layer      // writes of the functions accepted so far
	// waiting are the callers whose functions ran (successfully or not
	// after reading the batch's state) and who are answered with the
	// commit's outcome.
	waiting []*request
}

// commitLoop is the only writer to Badger. It takes the first waiting
// request, drains whatever else is queued (up to MaxBatch), runs the
// functions one after another against one shared write layer, commits the
// layer as one Badger transaction (one sync) and answers every caller.
// Requests that arrive during the sync queue up and form the next group,
// so the batch size follows the load without any timer.
func (s *Store) commitLoop() {
	defer close(s.done)
	group := make([]*request, 0, s.opts.MaxBatch)
	for {
		var first *request
		select {
		case first = <-s.reqs:
		case <-s.quit:
			return
		}
		group = append(group[:0], first)
	drain:
		for len(group) < s.opts.MaxBatch {
			select {
			case r := <-s.reqs:
				group = append(group, r)
			default:
				break drain
			}
		}
		s.runGroup(group)
		clear(group)
	}
}

func (s *Store) newBatch() *batch {
	return &batch{snap: s.db.NewTransaction(false), layer: newLayer(s.vthreshold)}
}

// runGroup runs and commits one group of requests, splitting it into
// several commits if its writes outgrow one Badger transaction.
func (s *Store) runGroup(group []*request) {
	b := s.newBatch()
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.res <- err // fn never ran: nothing to wait for
			continue
		}
		own, err := s.runFn(b, r)
		if err != nil {
			// fn's writes are dropped. Its caller still waits for the
			// commit: what fn read may include earlier functions' writes,
			// which are not durable yet.
			r.failed = err
			b.waiting = append(b.waiting, r)
			continue
		}
		count, size := b.layer.grownBy(own)
		if count > s.maxTxnCount || size > s.maxTxnSize {
			// Badger would refuse this transaction (ErrTxnTooBig): commit
			// what is in hand, then start a new transaction for fn's
			// writes. fn read exactly the state that commit makes
			// durable, so its writes stay valid on top of it.
			cerr := s.commit(b)
			b = s.newBatch()
			if cerr != nil {
				// fn read writes that did not become durable.
				r.res <- cerr
				continue
			}
			count, size = b.layer.grownBy(own)
			if count > s.maxTxnCount || size > s.maxTxnSize {
				r.res <- fmt.Errorf("badgerstore: one Update writes %d keys, %d bytes, more than one Badger transaction holds (%d keys, %d bytes): %w",
					count, size, s.maxTxnCount, s.maxTxnSize, badger.ErrTxnTooBig)
				continue
			}
		}
		b.layer.merge(own)
		b.waiting = append(b.waiting, r)
	}
	_ = s.commit(b) // every caller has its answer
}

// runFn runs r.fn against the batch and returns its writes.
func (s *Store) runFn(b *batch, r *request) (own map[string]write, err error) {
	t := &storeTx{kv: &kv{snap: b.snap, batch: b.layer, own: make(map[string]write)}}
	defer func() {
		t.done = true
		if p := recover(); p != nil {
			r.panicked = &PanicError{Value: p, Stack: debug.Stack()}
			err = r.panicked.(*PanicError)
		}
	}()
	if err := r.fn(t); err != nil {
		return nil, err
	}
	return t.kv.own, nil
}

// commit writes the batch's layer as one Badger transaction, which Badger
// syncs before Commit returns (SyncWrites), and answers every waiting
// caller: the commit's error if it failed (nothing of the batch was
// acknowledged), else nil, or the function's own error for functions that
// failed.
func (s *Store) commit(b *batch) error {
	defer b.snap.Discard()
	var err error
	if b.layer.len() > 0 {
		err = s.write(b.layer)
		if err == nil {
			s.commits.Add(1)
		}
	}
	for _, r := range b.waiting {
		switch {
		case r.failed != nil:
			r.res <- r.failed
		case err != nil:
			r.res <- err
		default:
			s.updates.Add(1)
			r.res <- nil
		}
	}
	b.waiting = nil
	return err
}

func (s *Store) write(l *layer) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	err := l.each(func(k string, w write) error {
		if w.del {
			return txn.Delete([]byte(k))
		}
		return txn.Set([]byte(k), w.val)
	})
	if err == nil {
		err = txn.Commit()
	}
	if err != nil {
		return fmt.Errorf("badgerstore: group commit of %d keys: %w", l.len(), err)
	}
	return nil
}
