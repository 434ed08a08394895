package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/owner"
)

// DefaultBatch is the most Calls that share one round trip to a worker
// when Config sets none.
//
// Many runs step at once and each step's callables are small: the cost of
// a round trip (two pipe writes, two process wake-ups, the deadline and
// memory watches) is most of what evaluating them costs. So a Call that
// finds every worker busy waits in line, and whichever Call next takes a
// worker takes the line along, up to MaxBatch Calls and about half a
// message's bytes, in one request (opBatch). The worker evaluates each as
// if it came alone and answers them in order.
//
// A batch is under one deadline, CPU allowance and memory cap, as one
// request is. If it fails as a whole (a worker killed for a limit, an
// answer too large), every Call in it is evaluated again alone, so a
// script that hits a limit fails only its own Call, with its own limit,
// and the others answer as they would have; what a bomb costs the Calls
// beside it is the wait for its first deadline.
//
// A batch holds the Calls of one owner only (owner.From of each Call's
// ctx): a hostile callable then costs its own owner's batch, never
// another owner's Calls, and the batches of different owners take turns
// for the workers (owner.Slots).
const DefaultBatch = 32

// waitingCall is one Call waiting for a worker, alone or in a batch.
type waitingCall struct {
	ctx   context.Context
	owner string // owner.From(ctx)
	req   *request
	src   flows.Sources
	size  int           // about its encoded size
	taken chan struct{} // closed when a batch takes it
	done  chan batchAnswer
}

type batchAnswer struct {
	resp *response
	err  error
}

// evaluate sends one Call's request to a worker, in a batch with the
// Calls of the same owner waiting beside it when there are some.
func (p *Pool) evaluate(ctx context.Context, req *request, src flows.Sources) (*response, error) {
	p.count(func(s *Stats) { s.Calls++ })
	name := owner.From(ctx)
	wc := &waitingCall{ctx: ctx, owner: name, req: req, src: src, size: requestSize(req),
		taken: make(chan struct{}), done: make(chan batchAnswer, 1)}
	if p.cfg.MaxBatch == 1 {
		return p.roundTrip(ctx, req, nil, wc.ask)
	}
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	p.waiting[name] = append(p.waiting[name], wc)
	p.mu.Unlock()
	for {
		select {
		case <-wc.taken: // in a batch: its answer comes
			select {
			case a := <-wc.done:
				return a.resp, a.err
			case <-ctx.Done(): // the batch goes on for the others
				return nil, ctx.Err()
			}
		default:
		}
		// Whoever of this owner's Calls gets a worker takes the owner's
		// line along; the others stop waiting for a worker (taken).
		err := ctx.Err() // a free slot would still be given
		if err == nil {
			err = p.slots.Acquire(ctx, name, wc.taken)
		}
		switch {
		case err == nil:
			if batch := p.takeWaiting(name); len(batch) > 0 {
				// On its own goroutine: this Call waits for its answer
				// like the others, so that its ctx ending returns it
				// while the batch goes on for them.
				go p.runBatch(name, batch)
			} else { // every Call of the line was taken by another batch
				p.slots.Release(name)
			}
		case errors.Is(err, owner.ErrStopped):
		default: // ctx ended
			if p.unwait(wc) {
				return nil, err
			}
		}
	}
}

// requestSize is about how many bytes req takes encoded: what its ctx and
// arguments take, already JSON, and a margin for the rest.
func requestSize(req *request) int {
	n := 256 + len(req.SourceHash)
	if req.Ctx != nil {
		n += len(req.Ctx.RunID) + len(req.Ctx.Input)
		for k, v := range req.Ctx.Results {
			n += len(k) + len(v) + 8
		}
	}
	for _, c := range req.Calls {
		n += 128
		for _, a := range c.Args {
			n += len(a) + 1
		}
	}
	return n
}

// unwait takes wc out of its owner's line; false if a batch took it
// already.
func (p *Pool) unwait(wc *waitingCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := p.waiting[wc.owner]
	i := slices.Index(line, wc)
	if i < 0 {
		return false
	}
	if line = slices.Delete(line, i, i+1); len(line) == 0 {
		delete(p.waiting, wc.owner)
	} else {
		p.waiting[wc.owner] = line
	}
	return true
}

// takeWaiting takes the oldest waiting Calls of name that fit one batch:
// at most MaxBatch, and about half a message's bytes (the first always
// goes: one too large alone is refused alone).
func (p *Pool) takeWaiting(name string) []*waitingCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := p.waiting[name]
	n, bytes := 0, 0
	for n < len(line) && n < p.cfg.MaxBatch {
		size := line[n].size
		if n > 0 && bytes+size > p.cfg.MaxMessageBytes/2 {
			break
		}
		bytes += size
		n++
	}
	batch := slices.Clone(line[:n])
	if n == len(line) {
		delete(p.waiting, name)
	} else {
		p.waiting[name] = slices.Delete(line, 0, n)
	}
	for _, c := range batch {
		close(c.taken)
	}
	return batch
}

// runBatch evaluates batch, Calls of name, on a worker; the caller holds a
// slot for name, which is freed before it returns. Every Call of the
// batch gets its answer.
func (p *Pool) runBatch(name string, batch []*waitingCall) {
	w, err := p.takeHeld(name)
	if err != nil {
		for _, c := range batch {
			c.done <- batchAnswer{err: err}
		}
		return
	}
	if len(batch) == 1 {
		c := batch[0]
		resp, err := p.roundTripOn(c.ctx, w, c.req, nil, c.ask)
		c.done <- batchAnswer{resp, err}
		return
	}
	req := &request{Op: opBatch, Batch: make([]request, len(batch))}
	for i, c := range batch {
		req.Batch[i] = *c.req
	}
	if p.batchHook != nil {
		owners := make([]string, len(batch))
		for i, c := range batch {
			owners[i] = owner.From(c.ctx)
		}
		p.batchHook(owners)
	}
	// No one Call's cancellation stops the others' evaluation; the batch
	// stops when every Call's has ended (runs cancelled, a drain's grace
	// over), not at its deadline.
	ctx, stop := allDone(batch)
	defer stop()
	resp, err := p.roundTripOn(ctx, w, req, nil, func(q *question) *answer {
		for _, c := range batch {
			if q.Kind == askSources && q.Name == c.src.Hash {
				return c.ask(q)
			}
		}
		return &answer{Err: fmt.Sprintf("unexpected question %s %q", q.Kind, q.Name)}
	})
	if err == nil && resp.Err == nil && len(resp.Batch) == len(batch) {
		for i, c := range batch {
			c.done <- batchAnswer{resp: &resp.Batch[i]}
		}
		return
	}
	// Failed as a whole: each alone again, so that a limit is charged to
	// the Call that hit it; each waits in its owner's line again.
	p.count(func(s *Stats) { s.Rerun += len(batch) })
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.done <- batchAnswer{err: err}
			continue
		}
		resp, err := p.roundTrip(c.ctx, c.req, nil, c.ask)
		c.done <- batchAnswer{resp, err}
	}
}

// allDone returns a context that ends once every Call's of batch has;
// stop releases what watches them.
func allDone(batch []*waitingCall) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	left := atomic.Int32{}
	left.Store(int32(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, c := range batch {
		stops[i] = context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

// ask answers a worker's question for the sources of this Call.
func (c *waitingCall) ask(q *question) *answer {
	if q.Kind != askSources || q.Name != c.src.Hash {
		return &answer{Err: fmt.Sprintf("unexpected question %s %q", q.Kind, q.Name)}
	}
	files, err := c.src.Load(c.ctx)
	if err != nil {
		return &answer{Err: err.Error()}
	}
	return &answer{Sources: files}
}
