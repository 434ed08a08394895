package badgerstore

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/internal/storekit"
)

// request is one Update waiting for the committer; its Failed is fn's
// own error, which committer.answer hands over.
type request = storekit.Request

// PanicError carries a panic raised by an Update function on the committer
// goroutine back to the caller, which panics with it.
type PanicError = storekit.PanicError

// batch is one group commit: the writes of the functions accepted into it
// and the callers waiting for its outcome.
type batch struct {
	layer   *layer
	waiting []*request
	done    chan error // the commit's outcome, once submitted
}

// committer is the state of the commit loop. At most one batch is in
// flight (submitted to Badger, not yet synced) while the next one is built
// on top of it: functions that arrive during a sync run at once, so their
// work overlaps the sync, and their batch is submitted the moment the sync
// ends.
//
// Invariant: snap holds every batch that finished, and not inflight. The
// functions of the batch being built (cur) therefore read their own
// writes, then cur's layer, then inflight's layer, then snap. When
// inflight finishes, snap moves past it and its layer is dropped from the
// reads: the state the next function sees is the same.
type committer struct {
	s        *Store
	snap     *badger.Txn
	inflight *batch
	cur      *batch
}

func (c *committer) newBatch() *batch {
	return &batch{layer: newLayer(c.s.vthreshold)}
}

// commitLoop is the only writer to Badger. It waits for a request, then
// grows a batch from the requests that arrive while the previous batch is
// being synced (or, with nothing in flight, from those already queued),
// up to MaxBatch, running each function as it is taken. It then submits
// the batch as one Badger transaction: one sync for all of them. The batch
// size follows the load, without any timer.
func (s *Store) commitLoop() {
	defer close(s.done)
	c := &committer{s: s, snap: s.db.NewTransaction(false)}
	c.cur = c.newBatch()
	defer func() {
		if c.inflight != nil {
			c.settle(<-c.inflight.done)
		}
		c.snap.Discard()
	}()
	for {
		var idle <-chan error // the in-flight commit's outcome, if any
		if c.inflight != nil {
			idle = c.inflight.done
		}
		select {
		case r := <-s.reqs:
			c.add(r)
		case err := <-idle:
			c.settle(err)
			continue
		case <-s.quit:
			return
		}
		if c.grow() {
			_ = c.submit(c.cur) // every caller of cur is or will be answered
		}
		c.cur = c.newBatch()
	}
}

// grow adds requests to cur: while a commit is in flight, every request
// that arrives before it finishes; then those already queued. It reports
// false if cur was failed because the commit it was built on failed.
func (c *committer) grow() bool {
	for len(c.cur.waiting) < c.s.opts.MaxBatch {
		if c.inflight == nil {
			select {
			case r := <-c.s.reqs:
				c.add(r)
				continue
			default:
				return true
			}
		}
		select {
		case r := <-c.s.reqs:
			c.add(r)
		case err := <-c.inflight.done:
			c.settle(err)
			if err != nil {
				c.answer(c.cur, err) // cur's functions read its writes
				return false
			}
		}
	}
	return true
}

// add runs r's function into cur. If its writes would make cur bigger than
// one Badger transaction, cur is submitted first and the writes start a
// new batch.
func (c *committer) add(r *request) {
	s := c.s
	if err := r.Ctx.Err(); err != nil {
		r.Res <- err // fn never ran: nothing to wait for
		return
	}
	own, err := c.runFn(c.cur, r)
	if err != nil {
		// fn's writes are dropped, but its caller still waits for the
		// batch: what fn read (and may have passed out with its error)
		// includes writes that are not durable yet.
		r.Failed = err
		c.cur.waiting = append(c.cur.waiting, r)
		return
	}
	if count, size := c.cur.layer.grownBy(own); count > s.maxTxnCount || size > s.maxTxnSize {
		// Badger would refuse this transaction (ErrTxnTooBig): submit
		// what is in hand and put fn's writes in a new batch on top of
		// it. fn read exactly that state, so its writes stay valid; if
		// the submitted batch fails, the new one fails with it.
		err := c.submit(c.cur)
		c.cur = c.newBatch()
		if err != nil {
			r.Res <- err // fn read writes that did not become durable
			return
		}
		if count, size := c.cur.layer.grownBy(own); count > s.maxTxnCount || size > s.maxTxnSize {
			r.Failed = fmt.Errorf("badgerstore: one Update writes %d keys, %d bytes, more than one Badger transaction holds (%d keys, %d bytes): %w (%w)",
				count, size, s.maxTxnCount, s.maxTxnSize, store.ErrTooLarge, badger.ErrTxnTooBig)
			c.cur.waiting = append(c.cur.waiting, r)
			return
		}
	}
	c.cur.layer.merge(own)
	c.cur.waiting = append(c.cur.waiting, r)
}

// runFn runs r.fn against the batch being built and returns its writes.
func (c *committer) runFn(b *batch, r *request) (own map[string]write, err error) {
	layers := []*layer{b.layer}
	if c.inflight != nil {
		layers = append(layers, c.inflight.layer)
		c.s.overlapped.Add(1)
	}
	t := &storeTx{kv: &kv{snap: c.snap, layers: layers, own: make(map[string]write)}}
	defer t.End()
	if err := r.Call(t); err != nil {
		return nil, err
	}
	return t.kv.own, nil
}

// submit waits for the batch in flight, then starts committing b (or, if
// the one in flight failed, fails b, whose functions read its writes). It
// returns that earlier failure, or an error building b's transaction.
func (c *committer) submit(b *batch) error {
	if c.inflight != nil {
		if err := <-c.inflight.done; err != nil {
			c.settle(err)
			c.answer(b, err)
			return err
		}
		c.settle(nil)
	}
	if b.layer.len() == 0 {
		c.answer(b, nil)
		return nil
	}
	if err := c.s.checkFree(b.layer.size); err != nil {
		c.answer(b, err) // nothing of b reached the disk
		return err
	}
	if c.s.testSubmit != nil {
		if done := c.s.testSubmit(b.layer); done != nil {
			b.done, c.inflight = done, b
			return nil
		}
	}
	txn := c.s.db.NewTransaction(true)
	err := b.layer.each(func(k string, w write) error {
		if w.del {
			return txn.Delete([]byte(k))
		}
		return txn.Set([]byte(k), w.val)
	})
	if err != nil {
		txn.Discard()
		err = fmt.Errorf("badgerstore: group commit of %d keys: %w", b.layer.len(), err)
		c.answer(b, err)
		return err
	}
	// Badger writes the transaction to its log, syncs it (SyncWrites)
	// and only then returns or calls back.
	b.done = make(chan error, 1)
	c.inflight = b
	wrap := func(err error) error {
		if err != nil {
			err = fmt.Errorf("badgerstore: group commit of %d keys: %w", b.layer.len(), err)
		}
		return err
	}
	if len(c.s.reqs) == 0 {
		// Nobody is waiting to build on this batch: commit in place and
		// save the hand-offs to and from Badger's callback goroutine,
		// which a lone writer would pay on every Update.
		b.done <- wrap(txn.Commit())
		return nil
	}
	txn.CommitWith(func(err error) { b.done <- wrap(err) })
	return nil
}

// settle answers the callers of the batch in flight with its outcome and
// moves the snapshot past it.
func (c *committer) settle(err error) {
	if err == nil {
		c.s.commits.Add(1)
	}
	c.answer(c.inflight, err)
	c.inflight = nil
	c.snap.Discard()
	c.snap = c.s.db.NewTransaction(false)
}

// answer gives every caller of b its result: the commit's error if the
// commit failed (nothing of b was acknowledged, and what its functions
// read may be gone, so it takes precedence over a function's own error);
// else the function's own error, or nil.
func (c *committer) answer(b *batch, err error) {
	for _, r := range b.waiting {
		switch {
		case err != nil:
			r.Res <- err
		case r.Failed != nil:
			r.Res <- r.Failed
		default:
			c.s.updates.Add(1)
			r.Res <- nil
		}
	}
	b.waiting = nil
}
