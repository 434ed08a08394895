package sandbox

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/flows"
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
const DefaultBatch = 32

// waitingCall is one Call waiting for a worker, alone or in a batch.
type waitingCall struct {
	ctx  context.Context
	req  *request
	src  flows.Sources
	size int // about its encoded size
	done chan batchAnswer
}

type batchAnswer struct {
	resp *response
	err  error
}

// evaluate sends one Call's request to a worker, in a batch with the
// Calls waiting beside it when there are some.
func (p *Pool) evaluate(ctx context.Context, req *request, src flows.Sources) (*response, error) {
	p.count(func(s *Stats) { s.Calls++ })
	wc := &waitingCall{ctx: ctx, req: req, src: src, size: requestSize(req), done: make(chan batchAnswer, 1)}
	if p.cfg.MaxBatch == 1 {
		return p.roundTrip(ctx, req, nil, wc.ask)
	}
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	p.waiting = append(p.waiting, wc)
	p.mu.Unlock()
	for {
		select {
		case a := <-wc.done:
			return a.resp, a.err
		case <-ctx.Done():
			if p.unwait(wc) {
				return nil, ctx.Err()
			}
			a := <-wc.done // taken into a batch: its answer comes
			return a.resp, a.err
		case p.slots <- struct{}{}:
			batch := p.takeWaiting()
			if len(batch) == 0 { // this one was taken by another batch
				<-p.slots
				continue
			}
			p.runBatch(batch)
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

// unwait takes wc out of the line; false if a batch took it already.
func (p *Pool) unwait(wc *waitingCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.waiting {
		if c == wc {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// takeWaiting takes the oldest waiting Calls that fit one batch: at most
// MaxBatch, and about half a message's bytes (the first always goes: one
// too large alone is refused alone).
func (p *Pool) takeWaiting() []*waitingCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, bytes := 0, 0
	for n < len(p.waiting) && n < p.cfg.MaxBatch {
		size := p.waiting[n].size
		if n > 0 && bytes+size > p.cfg.MaxMessageBytes/2 {
			break
		}
		bytes += size
		n++
	}
	batch := make([]*waitingCall, n)
	copy(batch, p.waiting[:n])
	p.waiting = append(p.waiting[:0], p.waiting[n:]...)
	return batch
}

// runBatch evaluates batch on a worker; the caller holds a slot, which is
// freed before it returns. Every Call of the batch gets its answer.
func (p *Pool) runBatch(batch []*waitingCall) {
	w, err := p.takeHeld()
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
	// No one Call's cancellation stops the others' evaluation.
	resp, err := p.roundTripOn(context.Background(), w, req, nil, func(q *question) *answer {
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
	// the Call that hit it.
	p.count(func(s *Stats) { s.Rerun += len(batch) })
	for _, c := range batch {
		resp, err := p.roundTrip(c.ctx, c.req, nil, c.ask)
		c.done <- batchAnswer{resp, err}
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
