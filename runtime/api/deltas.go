package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// A run's stream asked with ?deltas=1 (and optionally &node=NODE) also
// sends its model turns' text as it streams, as apitypes.StreamTurnDelta
// messages. Their ids, and the ids of the events sent after them, say
// where the stream is both in the run's events and in the last turn a
// delta was sent of: SEQ/NODE@VISIT.TURN/OFFSET. Given back as after (or
// Last-Event-ID), that resumes the events after SEQ and that turn's text
// after OFFSET, if the turn is still in flight; other turns in flight are
// sent from the start of what is kept of them (Offset tells a client what
// it has).

// streamPosition is where a run's stream resumes: after event seq after
// and, in turn (if set), after offset.
type streamPosition struct {
	after  uint64
	turn   *engine.TurnKey
	offset int
}

// String is the position as a message id.
func (p streamPosition) String() string {
	seq := strconv.FormatUint(p.after, 10)
	if p.turn == nil {
		return seq
	}
	return fmt.Sprintf("%s/%s@%d.%d/%d", seq, p.turn.Node, p.turn.Visit, p.turn.Turn, p.offset)
}

// parseStreamPosition reads a message id of a run's stream: SEQ, or
// SEQ/NODE@VISIT.TURN/OFFSET.
func parseStreamPosition(s string) (streamPosition, bool) {
	var p streamPosition
	seq, rest, compound := strings.Cut(s, "/")
	after, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return p, false
	}
	p.after = after
	if !compound {
		return p, true
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return p, false
	}
	turn, offset := rest[:i], rest[i+1:]
	at := strings.LastIndexByte(turn, '@')
	if at <= 0 {
		return p, false
	}
	visit, n, ok := strings.Cut(turn[at+1:], ".")
	v, err1 := strconv.Atoi(visit)
	t, err2 := strconv.Atoi(n)
	o, err3 := strconv.Atoi(offset)
	if !ok || err1 != nil || err2 != nil || err3 != nil || v < 0 || t < 0 || o < 0 {
		return p, false
	}
	p.turn, p.offset = &engine.TurnKey{Node: turn[:at], Visit: v, Turn: t}, o
	return p, true
}

// runStreamRequest is what GET /v1/runs/{id}/stream was asked.
type runStreamRequest struct {
	from   streamPosition
	deltas bool
	node   string
}

// parseRunStream reads the stream's parameters: after (or Last-Event-ID),
// deltas and node. It answers a bad one itself (false).
func parseRunStream(w http.ResponseWriter, r *http.Request) (runStreamRequest, bool) {
	var req runStreamRequest
	if !queryParams(w, r, "after", "deltas", "node") {
		return req, false
	}
	q := r.URL.Query()
	bad := func(msg string) (runStreamRequest, bool) {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: msg})
		return req, false
	}
	afterText := q.Get("after")
	if afterText == "" {
		afterText = r.Header.Get("Last-Event-ID")
	}
	from, ok := parseStreamPosition(orDefault(afterText, "0"))
	if !ok {
		return bad("after (or Last-Event-ID) must be a sequence number, or a message id this stream sent")
	}
	req.from = from
	switch q.Get("deltas") {
	case "", "0":
	case "1":
		req.deltas = true
	default:
		return bad("deltas must be 1 or 0")
	}
	req.node = q.Get("node")
	switch {
	case req.node != "" && !req.deltas:
		return bad("node names the node whose turns' deltas to send: it needs deltas=1")
	case len(req.node) > engine.MaxIDBytes:
		return bad(fmt.Sprintf("node is longer than %d bytes", engine.MaxIDBytes))
	}
	return req, true
}

// deltaStream sends a run's turn deltas on its stream beside the events,
// from a goroutine of its own, so that a delta never waits for the
// stream's next look at the store. A nil *deltaStream (deltas not asked)
// sends nothing and ids events by their seq.
type deltaStream struct {
	watch  *engine.DeltaWatch
	kept   []engine.TurnDelta
	resume streamPosition // where the client was: skips kept text it has
	// pos is the stream's position, read and written under the sse's mu
	// (each message's id is made as it is written).
	pos  streamPosition
	stop chan struct{}
	done chan struct{}
}

// watchDeltas starts sending runID's turn deltas on out if req asked for
// them; cancel ends the stream, as it does when the watcher is dropped.
// The caller checked that the run is the caller's.
func (s *Server) watchDeltas(runID string, req runStreamRequest, out *sse, cancel context.CancelFunc) *deltaStream {
	if !req.deltas {
		return nil
	}
	w, kept := engine.LiveTurns(s.eng).Watch(runID, req.node)
	d := &deltaStream{watch: w, kept: kept, resume: req.from, pos: req.from, stop: make(chan struct{}), done: make(chan struct{})}
	go d.run(out, cancel)
	return d
}

// eventID is the id of event seq: the stream's position once it is sent.
func (d *deltaStream) eventID(seq uint64) func() string {
	if d == nil {
		return func() string { return strconv.FormatUint(seq, 10) }
	}
	return func() string {
		d.pos.after = seq
		return d.pos.String()
	}
}

func (d *deltaStream) run(out *sse, cancel context.CancelFunc) {
	defer close(d.done)
	for _, dl := range d.kept {
		if dl, ok := d.resumed(dl); ok && d.send(out, dl) != nil {
			cancel()
			return
		}
	}
	if len(d.kept) > 0 && out.flush() != nil {
		cancel()
		return
	}
	for {
		select {
		case dl, ok := <-d.watch.C():
			if !ok { // dropped: the client was too slow, and connects again
				cancel()
				return
			}
			if d.send(out, dl) != nil {
				cancel()
				return
			}
			if len(d.watch.C()) == 0 && out.flush() != nil {
				cancel()
				return
			}
		case <-d.stop:
			return
		}
	}
}

// resumed is dl less what the client had (false: all of it).
func (d *deltaStream) resumed(dl engine.TurnDelta) (engine.TurnDelta, bool) {
	if t := d.resume.turn; t == nil || *t != dl.TurnKey || dl.Offset >= d.resume.offset {
		return dl, true
	}
	if dl.End() <= d.resume.offset {
		return dl, false
	}
	dl.Text = dl.Text[d.resume.offset-dl.Offset:]
	dl.Offset = d.resume.offset
	return dl, true
}

func (d *deltaStream) send(out *sse, dl engine.TurnDelta) error {
	v := apitypes.TurnDelta{Node: dl.Node, Visit: dl.Visit, Turn: dl.Turn, Seq: dl.Seq, Offset: dl.Offset, Text: dl.Text}
	return out.sendAs(apitypes.StreamTurnDelta, func() string {
		key := dl.TurnKey
		d.pos.turn, d.pos.offset = &key, dl.End()
		return d.pos.String()
	}, v)
}

// close stops the sending and the watch; nothing is written once it
// returns.
func (d *deltaStream) close() {
	if d == nil {
		return
	}
	close(d.stop)
	<-d.done
	d.watch.Stop()
}
