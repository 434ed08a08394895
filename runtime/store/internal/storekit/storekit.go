// Package storekit holds what every store.Store backend does alike and
// would otherwise write again: the life cycle that lets Close wait for the
// calls in progress and refuses later ones (Gate), the first check of
// every Tx method (TxGuard), and the hand-over of an Update function to a
// committer goroutine and back, panics included (Request).
//
// It is internal to runtime/store: the backends and storetest share it,
// and nothing outside sees it. The store contract itself stays in package
// store; storekit only spares each backend its own copy of the plumbing.
package storekit

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/weirhq/weir/runtime/store"
)

// Gate lets Close wait for every Update and View that got past the closed
// check, so a backend never closes its database under one, and refuses
// the calls that come after. The zero value is an open gate.
type Gate struct {
	// Refused, if set, is asked after the closed check: a non-nil error
	// refuses the call with it (a store that lost its lock refuses every
	// read and write from then on).
	Refused func() error

	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup
}

// Enter registers a call in progress, or refuses it: store.ErrClosed once
// Close began, Refused's error, then ctx's. A nil error must be paired with
// Leave.
func (g *Gate) Enter(ctx context.Context) error {
	if err := g.enter(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		g.inflight.Done()
		return err
	}
	return nil
}

func (g *Gate) enter() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return store.ErrClosed
	}
	if g.Refused != nil {
		if err := g.Refused(); err != nil {
			return err
		}
	}
	g.inflight.Add(1)
	return nil
}

// Leave ends a call Enter let in.
func (g *Gate) Leave() { g.inflight.Done() }

// Close refuses every later call and waits for those in progress. A
// second Close returns store.ErrClosed, as Store.Close promises; only the
// first returns nil, so only its caller releases the database.
func (g *Gate) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return store.ErrClosed
	}
	g.closed = true
	g.mu.Unlock()
	g.inflight.Wait()
	return nil
}

// Closed reports whether Close began: from then on Enter refuses every
// call, while those in progress may still run.
func (g *Gate) Closed() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.closed
}

// ErrTxDone is returned by a Tx used after its function returned: fn must
// not retain tx, and a retained one fails loudly instead of reading or
// writing in someone else's transaction.
var ErrTxDone = errors.New("store: transaction used after its function returned")

// TxGuard is the state every Tx method checks first. A backend's tx
// embeds it, sets ReadOnly for a View and calls End once the function
// returned.
type TxGuard struct {
	// ReadOnly: the transaction is a View's; writes return
	// store.ErrReadOnly.
	ReadOnly bool
	done     bool
}

// End marks the transaction over: every later call returns ErrTxDone.
func (g *TxGuard) End() { g.done = true }

// Open is the first check of every read method.
func (g *TxGuard) Open() error {
	if g.done {
		return ErrTxDone
	}
	return nil
}

// Writable is the first check of every write method, so a write in a View
// fails with store.ErrReadOnly before it reads anything.
func (g *TxGuard) Writable() error {
	if g.done {
		return ErrTxDone
	}
	if g.ReadOnly {
		return store.ErrReadOnly
	}
	return nil
}

// Request is one Update handed to a committer goroutine: its function,
// and the channel its caller waits on for the outcome.
type Request struct {
	Ctx context.Context
	Fn  func(store.Tx) error
	// Res is buffered: the committer never blocks on a caller.
	Res chan error
	// Panicked is set, before Res is sent, when Fn panicked.
	Panicked any
	// Failed is Fn's own error in its last run; the committer decides
	// when the caller gets it.
	Failed error
}

// NewRequest returns the request of one Update call.
func NewRequest(ctx context.Context, fn func(store.Tx) error) *Request {
	return &Request{Ctx: ctx, Fn: fn, Res: make(chan error, 1)}
}

// Call runs Fn on tx, turning a panic into a *PanicError that is both
// returned and kept in Panicked for Wait to raise again.
func (r *Request) Call(tx store.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			pe := &PanicError{Value: p, Stack: debug.Stack()}
			r.Panicked, err = pe, pe
		}
	}()
	return r.Fn(tx)
}

// Submit queues r on the committer's channel, unless ctx ends first.
func (r *Request) Submit(reqs chan<- *Request) error {
	select {
	case reqs <- r:
		return nil
	case <-r.Ctx.Done():
		return r.Ctx.Err()
	}
}

// Wait returns the outcome of the Update, re-raising in the caller's
// goroutine a panic of its function.
func (r *Request) Wait() error {
	err := <-r.Res
	if r.Panicked != nil {
		panic(r.Panicked)
	}
	return err
}

// PanicError carries a panic raised by an Update function on a committer
// goroutine back to the caller, which panics with it.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("store: Update function panicked: %v\n%s", p.Value, p.Stack)
}

// TaskClaim is store.Tx.TaskClaim for a store whose transactions are
// serialized by its committer (Badger, memory): read each task, pass over
// it unless it is free at its lease's attempt and ready, write it leased
// with its lease.
func TaskClaim(tx store.Tx, p store.TaskClaimParams) ([]*store.Task, error) {
	if err := store.CheckTaskClaim(p); err != nil {
		return nil, err
	}
	out := []*store.Task{}
	for _, l := range p.Leases {
		tk, err := tx.TaskGet(l.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if tk.Leased || tk.Attempt != l.Attempt || tk.ReadyAt.After(p.Now) {
			continue // named twice: leased by its first lease
		}
		tk.Leased = true
		if err := tx.TaskPut(tk); err != nil {
			return nil, err
		}
		if err := tx.LeasePut(l); err != nil {
			return nil, err
		}
		out = append(out, tk)
	}
	return out, nil
}
