package host

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/sdk/wire"
)

// partialsStream is an instance's Partials stream (protocol revision 2):
// the pieces of output of its calls made with want_partials, routed to
// each call's callback by call id.
type partialsStream struct {
	watchers sync.Map // call id -> *partialWatch
	// open says the stream is read: a revision-1 plugin has none, and a
	// plugin that ended it (or does not implement it) is not asked for
	// pieces.
	open atomic.Bool
	done chan struct{} // closed when the stream's reader ends
}

// partialWatch delivers one call's pieces to its callback until the call
// returns.
type partialWatch struct {
	mu     sync.Mutex
	fn     func(seq uint64, delta []byte)
	closed bool
	end    chan struct{} // closed when the plugin said the pieces ended
	ended  bool
}

// deliver hands a piece to the callback; a piece without delta is the
// call's end (wire.PartialResult).
func (w *partialWatch) deliver(seq uint64, delta []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case len(delta) == 0:
		if !w.ended {
			w.ended = true
			close(w.end)
		}
	case !w.closed:
		w.fn(seq, delta)
	}
}

// close waits, at most partialsFlush, for the end of the call's pieces
// (the plugin sends it before the result, so it is there or on its way),
// then delivers no more: once close returns, the callback is not running
// and is never called again.
func (w *partialWatch) close(answered bool) {
	if answered {
		t := time.NewTimer(partialsFlush)
		select {
		case <-w.end:
		case <-t.C:
		}
		t.Stop()
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// partialsFlush bounds how long a call's result waits for its last
// pieces.
const partialsFlush = progressFlush

// openPartials opens the Partials stream of a revision-2 plugin under ctx
// (the instance's streams' context) and reads it until it ends.
func (i *instance) openPartials(ctx context.Context) {
	i.partials.done = make(chan struct{})
	if i.manifest.ProtocolVersion < 2 {
		close(i.partials.done)
		return
	}
	stream, err := i.rpc.Partials(ctx, &wire.PartialsRequest{})
	if err != nil {
		close(i.partials.done) // the calls go on without pieces
		return
	}
	i.partials.open.Store(true)
	go func() {
		defer close(i.partials.done)
		defer i.partials.open.Store(false)
		for {
			p, err := stream.Recv()
			if err != nil {
				return
			}
			if w, ok := i.partials.watchers.Load(p.GetCallId()); ok {
				w.(*partialWatch).deliver(p.GetSeq(), p.GetDelta())
			}
		}
	}()
}

// watchPartials registers fn for call id's pieces, if the plugin sends
// pieces; the call asks for them only then (want). stop, to be called
// when the call returns (answered: the plugin answered it), ends the
// delivery.
func (i *instance) watchPartials(id uint64, fn func(seq uint64, delta []byte)) (want bool, stop func(answered bool)) {
	if fn == nil || !i.partials.open.Load() {
		return false, func(bool) {}
	}
	w := &partialWatch{fn: fn, end: make(chan struct{})}
	i.partials.watchers.Store(id, w)
	return true, func(answered bool) {
		w.close(answered)
		i.partials.watchers.Delete(id)
	}
}
