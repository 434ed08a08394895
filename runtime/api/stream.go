package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// A stream looks at its run (or run list) again after streamPollMin when
// something changed, backing off to streamPollMax while nothing does. The
// store has no change notifications yet, so streams read it; a quiet
// stream costs one read per streamPollMax.
const (
	streamPollMin = 20 * time.Millisecond
	streamPollMax = time.Second
	// streamHeartbeat is how often a quiet stream sends a comment, so that
	// proxies and the client see the connection alive.
	streamHeartbeat = 15 * time.Second
	// streamEventBatch bounds the events one read of a run's stream takes.
	streamEventBatch = 500
)

// MaxStreamDuration bounds one stream; see apitypes.MaxStreamDuration.
const MaxStreamDuration = apitypes.MaxStreamDuration

func (s *Server) routeStreams() {
	s.handle("GET /v1/runs/{id}/stream", s.runStream)
	s.handle("GET /v1/runs/stream", s.runsStream)
	s.handle("GET /v1/flows/{name}", s.flowSource)
}

// runView reads a run as GET /v1/runs/{id} shows it: with its progress
// and, while it is not terminal, its open waits.
func (s *Server) runView(ctx context.Context, owner, id string) (*apitypes.Run, error) {
	run, err := s.eng.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return s.viewOfRun(ctx, run), nil
}

// viewOfRun is runView for a run already read.
func (s *Server) viewOfRun(ctx context.Context, run *store.Run) *apitypes.Run {
	p, _ := s.eng.Progress(ctx, run)
	v := ViewOf(run, p)
	if !run.Phase.Terminal() {
		ws, _ := s.eng.Waits(ctx, run)
		v.Waits = convertAll(ws, waitOf)
	}
	return v
}

// sse writes server-sent events and keeps the stream's own write deadline
// (the server's timeouts are for requests that end). Its writes may come
// from two goroutines (a run's turn deltas are sent beside its events).
type sse struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter, until time.Time) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(until.Add(10 * time.Second))
	return &sse{w: w, rc: rc}
}

func (e *sse) send(event, id string, v any) error {
	return e.sendAs(event, func() string { return id }, v)
}

// sendAs is send with the id made as the message is written, so that ids
// follow the order of the messages.
func (e *sse) sendAs(event string, id func() string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var buf bytes.Buffer
	if id := id(); id != "" {
		fmt.Fprintf(&buf, "id: %s\n", id)
	}
	fmt.Fprintf(&buf, "event: %s\ndata: %s\n\n", event, b) // JSON has no raw newline
	_, err = e.w.Write(buf.Bytes())
	return err
}

func (e *sse) comment() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err := e.w.Write([]byte(": alive\n\n"))
	return err
}

func (e *sse) flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rc.Flush()
}

// pacer paces a stream's polls: the next one streamPollMin after a
// change, backing off to streamPollMax while nothing changes, with a
// comment every streamHeartbeat of quiet.
type pacer struct {
	poll  time.Duration
	quiet time.Time
	timer *time.Timer
}

func newPacer() *pacer {
	return &pacer{poll: streamPollMin, quiet: time.Now(), timer: time.NewTimer(0)}
}

func (p *pacer) stop() { p.timer.Stop() }

// polled paces the next poll by whether this one changed anything,
// sending out the heartbeat when one is due.
func (p *pacer) polled(changed bool, out *sse) error {
	if changed {
		p.poll, p.quiet = streamPollMin, time.Now()
		return nil
	}
	p.poll = min(2*p.poll, streamPollMax)
	if time.Since(p.quiet) > streamHeartbeat {
		if err := out.comment(); err != nil {
			return err
		}
		p.quiet = time.Now()
	}
	return nil
}

// next waits for the next poll: false once the stream is over (its
// deadline passed, the client went or the daemon stops).
func (p *pacer) next(ctx context.Context, r *http.Request) bool {
	p.timer.Reset(p.poll)
	select {
	case <-ctx.Done():
		return false
	case <-closing(r.Context()):
		return false
	case <-p.timer.C:
		return true
	}
}

// runStream is GET /v1/runs/{id}/stream?after=SEQ: the run's events after
// SEQ (or the Last-Event-ID header) and the run's view each time it
// changes, as server-sent events, until the run is terminal and every
// event was sent, the client goes, or MaxStreamDuration passes.
func (s *Server) runStream(w http.ResponseWriter, r *http.Request) {
	req, ok := parseRunStream(w, r) // after, deltas and node (deltas.go)
	if !ok {
		return
	}
	after := req.from.after
	owner, id := ownerFrom(r.Context()), r.PathValue("id")
	view, err := s.runView(r.Context(), owner, id)
	if err != nil { // another owner's run answers as a missing one, before the stream starts
		writeEngineErr(w, err)
		return
	}
	if !s.holdStream(w, r) {
		return
	}
	until := time.Now().Add(MaxStreamDuration)
	ctx, cancel := context.WithDeadline(r.Context(), until)
	defer cancel()
	out := startSSE(w, until)
	deltas := s.watchDeltas(id, req, out, cancel)
	defer deltas.close()
	var last []byte
	pace := newPacer()
	defer pace.stop()
	for {
		changed := false
		// The view is read before the events: once it is terminal, the
		// events read after it include the run's last one.
		if view == nil {
			if view, err = s.runView(ctx, owner, id); err != nil {
				return
			}
		}
		evs, err := s.eng.Events(ctx, owner, id, after, streamEventBatch)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if out.sendAs(apitypes.StreamEvent, deltas.eventID(ev.Seq), eventOf(ev)) != nil {
				return
			}
			after, changed = ev.Seq, true
		}
		b, _ := json.Marshal(view)
		if !bytes.Equal(b, last) {
			if out.send(apitypes.StreamRun, "", view) != nil {
				return
			}
			last, changed = b, true
		}
		terminal := view.Phase.Terminal() && len(evs) < streamEventBatch
		view = nil
		if pace.polled(changed, out) != nil {
			return
		}
		if terminal {
			_ = out.send(apitypes.StreamEnd, "", struct{}{})
			_ = out.flush()
			return
		}
		if out.flush() != nil || !pace.next(ctx, r) {
			return
		}
	}
}

// runsStream is GET /v1/runs/stream?phase=&flow=&parent=&limit=&after=: the page GET
// /v1/runs answers for the same parameters, sent again each time it
// changes.
func (s *Server) runsStream(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "limit", "phase", "after", "flow", "parent", "order", "before") {
		return
	}
	p, ok := s.listParams(w, r)
	if !ok || !s.holdStream(w, r) {
		return
	}
	owner := ownerFrom(r.Context())
	until := time.Now().Add(MaxStreamDuration)
	ctx, cancel := context.WithDeadline(r.Context(), until)
	defer cancel()
	var out *sse
	var last []byte
	pace := newPacer()
	defer pace.stop()
	for {
		runs, err := s.eng.List(ctx, owner, p)
		if err != nil {
			if out == nil {
				writeEngineErr(w, err)
			}
			return
		}
		if out == nil {
			out = startSSE(w, until)
		}
		page := make([]*apitypes.Run, 0, len(runs))
		for _, run := range runs {
			page = append(page, ViewOf(run, nil))
		}
		b, _ := json.Marshal(page)
		changed := !bytes.Equal(b, last)
		if changed {
			if out.send(apitypes.StreamRuns, "", page) != nil {
				return
			}
			last = b
		}
		if pace.polled(changed, out) != nil || out.flush() != nil || !pace.next(ctx, r) {
			return
		}
	}
}

// listParams reads GET /v1/runs's parameters, answering the refusal if
// they are wrong.
func (s *Server) listParams(w http.ResponseWriter, r *http.Request) (store.RunListParams, bool) {
	q := r.URL.Query()
	limit, ok := limitParam(w, q.Get("limit"), apitypes.DefaultListLimit, MaxListLimit)
	if !ok {
		return store.RunListParams{}, false
	}
	if err := engine.CheckPrintable("after", q.Get("after"), engine.MaxIDBytes); err != nil {
		writeEngineErr(w, err)
		return store.RunListParams{}, false
	}
	phase := store.Phase(q.Get("phase"))
	if phase != "" && !knownPhases[phase] {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("phase %q is not a phase (queued, running, waiting, completing, completed, cancelled, failed)", phase)})
		return store.RunListParams{}, false
	}
	p := store.RunListParams{Phase: phase, After: q.Get("after"), Flow: q.Get("flow"), ParentRunID: q.Get("parent"), Limit: limit}
	if err := engine.CheckPrintable("flow", p.Flow, engine.MaxIDBytes); err != nil {
		writeEngineErr(w, err)
		return store.RunListParams{}, false
	}
	if err := engine.CheckPrintable("parent", p.ParentRunID, engine.MaxIDBytes); err != nil {
		writeEngineErr(w, err)
		return store.RunListParams{}, false
	}
	switch q.Get("order") {
	case "", "id":
	case "created":
		p.Order = store.OrderNewest
	default:
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("order %q is not an order (id, created: newest first)", q.Get("order"))})
		return store.RunListParams{}, false
	}
	if before := q.Get("before"); before != "" {
		if p.Order != store.OrderNewest || p.After != "" {
			writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
				Message: "before pages the newest-first order: give it with order=created and without after"})
			return store.RunListParams{}, false
		}
		// The cursor is the last run of the page before: the next page
		// starts after its place in the order.
		last, err := s.eng.Get(r.Context(), ownerFrom(r.Context()), before)
		if err != nil {
			writeEngineErr(w, err)
			return store.RunListParams{}, false
		}
		p.Before = &store.RunCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return p, true
}

// flowSource is GET /v1/flows/{name}: the latest version and its source
// files.
func (s *Server) flowSource(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	fs, err := s.eng.FlowSource(r.Context(), r.PathValue("name"), "")
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, flowSourceOf(fs))
}

func flowSourceOf(fs *engine.FlowSource) *apitypes.FlowSource {
	out := &apitypes.FlowSource{Flow: flowOf(fs.RegisteredFlow), Version: fs.Seq, RegisteredAt: fs.RegisteredAt, Owner: fs.Owner, Files: []apitypes.SourceFile{}}
	for _, f := range fs.Files {
		out.Files = append(out.Files, apitypes.SourceFile{Path: f.Path, Src: f.Src})
	}
	return out
}

// EndStreamsOnShutdown makes srv's Shutdown end the streams it serves
// and answer its held waits at once (unmet, as at their timeout), so that
// a page left open does not hold a stopping daemon for MaxStreamDuration.
// Call it before srv serves; it replaces srv.BaseContext.
func EndStreamsOnShutdown(srv *http.Server) {
	ch := make(chan struct{})
	var once sync.Once
	srv.BaseContext = func(net.Listener) context.Context {
		return context.WithValue(context.Background(), closingKey{}, ch)
	}
	srv.RegisterOnShutdown(func() { once.Do(func() { close(ch) }) })
}

type closingKey struct{}

// closing is closed when the server of the request ctx shuts down (nil,
// which blocks forever, when the server did not ask for it).
func closing(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(closingKey{}).(chan struct{})
	return ch
}
