package engine

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/sdk/chat"
)

// A model turn's text as the provider streams it (the plugin's partial
// results) is shown to whoever watches the run, live, and never journaled:
// the turn's whole answer is journaled with the turn, as before. Nothing
// of it exists while nobody watches: a turn asks its plugin for deltas
// only if its run had a watcher when the turn's call started.
const (
	// MaxTurnDeltaBytes bounds the text of one turn kept for watchers who
	// connect again (resume from an offset); the text past it is still
	// shown live. The kept text goes when the turn's call ends.
	MaxTurnDeltaBytes = 64 << 10
	// deltaWatchQueue is how many deltas a watcher may be behind before it
	// is dropped: a slow watcher never slows the turn.
	deltaWatchQueue = 256
)

// TurnKey names one model turn: the agent (or task) node, its visit and
// the turn (an agent's turns count from 1; a task node's one call of a
// chat tool is turn 1). Its string is NODE@VISIT.TURN.
type TurnKey struct {
	Node  string
	Visit int
	Turn  int
}

// TurnDelta is one piece of a model turn's text.
type TurnDelta struct {
	TurnKey
	// Seq counts the turn's deltas from 1; Offset is where Text starts in
	// the turn's text, in bytes. A turn tried again (a retryable failure)
	// starts over at seq 1, offset 0.
	Seq    uint64
	Offset int
	Text   string
}

// End is the offset just past the delta: where a watcher that saw it
// resumes.
func (d TurnDelta) End() int { return d.Offset + len(d.Text) }

// TurnDeltas holds, per run, the watchers of its model turns' text and the
// text of each turn in flight. The engine has one (LiveTurns); it lives in
// memory only, so a watcher sees the turns its daemon runs.
type TurnDeltas struct {
	mu   sync.Mutex
	runs map[string]*runDeltas
}

// runDeltas is one run's watchers and turns in flight.
type runDeltas struct {
	watchers map[*DeltaWatch]struct{}
	turns    map[TurnKey]*turnText
}

// turnText is the text of a turn in flight: the deltas kept (up to
// MaxTurnDeltaBytes) and how far the text has come.
type turnText struct {
	kept      []TurnDelta
	keptBytes int
	size      int
	seq       uint64
}

// DeltaWatch is one watcher of a run's turns' text.
type DeltaWatch struct {
	c       chan TurnDelta
	d       *TurnDeltas
	runID   string
	node    string // "": every node
	dropped bool   // under d.mu
	stopped bool   // under d.mu
}

// C delivers the deltas in order; it is closed when the watcher was
// dropped (it fell behind: Dropped) or stopped.
func (w *DeltaWatch) C() <-chan TurnDelta { return w.c }

// Dropped says the watcher fell more than deltaWatchQueue deltas behind
// and was dropped.
func (w *DeltaWatch) Dropped() bool {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.dropped
}

// Stop ends the watch. It may be called more than once.
func (w *DeltaWatch) Stop() {
	d := w.d
	d.mu.Lock()
	defer d.mu.Unlock()
	w.remove()
}

// remove takes w out of its run and closes its channel, under d.mu.
func (w *DeltaWatch) remove() {
	if w.stopped {
		return
	}
	w.stopped = true
	close(w.c)
	rd := w.d.runs[w.runID]
	if rd == nil {
		return
	}
	delete(rd.watchers, w)
	w.d.forget(w.runID, rd)
}

func newTurnDeltas() *TurnDeltas { return &TurnDeltas{runs: map[string]*runDeltas{}} }

// LiveTurns is e's view of its runs' model turns as they stream.
func LiveTurns(e *Engine) *TurnDeltas { return e.deltas }

// Watch starts watching the text of runID's model turns (of node only,
// unless node is ""). It returns the watcher and, taken in the same step,
// the kept text of the turns in flight, oldest first per turn: what came
// before the watcher, with no delta both in it and on the channel. The
// caller checks that runID is the caller's to watch.
func (d *TurnDeltas) Watch(runID, node string) (*DeltaWatch, []TurnDelta) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rd := d.runs[runID]
	if rd == nil {
		rd = &runDeltas{watchers: map[*DeltaWatch]struct{}{}, turns: map[TurnKey]*turnText{}}
		d.runs[runID] = rd
	}
	w := &DeltaWatch{c: make(chan TurnDelta, deltaWatchQueue), d: d, runID: runID, node: node}
	rd.watchers[w] = struct{}{}
	var kept []TurnDelta
	for k, t := range rd.turns {
		if node == "" || k.Node == node {
			kept = append(kept, t.kept...)
		}
	}
	return w, kept
}

// Runs counts the runs watched or with a turn's text kept.
func (d *TurnDeltas) Runs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runs)
}

// forget drops a run's entry once nothing is in it, under d.mu.
func (d *TurnDeltas) forget(runID string, rd *runDeltas) {
	if len(rd.watchers) == 0 && len(rd.turns) == 0 {
		delete(d.runs, runID)
	}
}

// liveTurn is one call of a model turn while it runs, seen by the run's
// watchers. A nil *liveTurn (nobody watches) does nothing.
type liveTurn struct {
	d     *TurnDeltas
	runID string
	key   TurnKey
	text  *turnText
}

// turnOf names the model turn c is, if it is one whose text can be shown:
// a call of a chat tool (info.Chat) that is an agent's model turn or a task
// node's call.
func turnOf(c *toolCall, info flows.ToolInfo) (TurnKey, bool) {
	if !info.Chat {
		return TurnKey{}, false
	}
	switch {
	case c.Node.Kind == flows.KindAgent && len(c.Index) == 1 && c.Tool == c.Node.ModelTool:
		return TurnKey{Node: c.Node.ID, Visit: c.Visit, Turn: c.Index[0]}, true
	case c.Node.Kind != flows.KindAgent && len(c.Index) == 0:
		return TurnKey{Node: c.Node.ID, Visit: c.Visit, Turn: 1}, true
	}
	return TurnKey{}, false
}

// begin starts a model turn's call: nil unless the run has a watcher now
// (then the call does not ask for deltas at all). A turn begun again (a
// new try) starts its text over.
func (d *TurnDeltas) begin(runID string, key TurnKey) *liveTurn {
	d.mu.Lock()
	defer d.mu.Unlock()
	rd := d.runs[runID]
	if rd == nil || len(rd.watchers) == 0 {
		return nil
	}
	t := &turnText{}
	rd.turns[key] = t
	return &liveTurn{d: d, runID: runID, key: key, text: t}
}

// partials is the call's tool.CallRequest.Partials: nil when nobody
// watches.
func (l *liveTurn) partials() func(seq uint64, delta []byte) {
	if l == nil {
		return nil
	}
	return func(_ uint64, delta []byte) { l.add(string(delta)) }
}

// add shows the next piece of the turn's text to the run's watchers; a
// watcher too far behind is dropped, never waited for.
func (l *liveTurn) add(text string) {
	if text == "" {
		return
	}
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	rd := d.runs[l.runID]
	if rd == nil || rd.turns[l.key] != l.text {
		return // ended, or begun again
	}
	t := l.text
	t.seq++
	dl := TurnDelta{TurnKey: l.key, Seq: t.seq, Offset: t.size, Text: text}
	t.size += len(text)
	if t.keptBytes+len(text) <= MaxTurnDeltaBytes && t.keptBytes == dl.Offset {
		t.kept = append(t.kept, dl)
		t.keptBytes += len(text)
	}
	for w := range rd.watchers {
		if w.node != "" && w.node != l.key.Node {
			continue
		}
		select {
		case w.c <- dl:
		default:
			w.dropped = true
			w.remove()
		}
	}
}

// end ends the turn's call. When the call answered (output, a chat
// response) and the text shown so far is the start of its answer, the rest
// is shown first: a piece the plugin dropped at the end, or one still on
// its way when the call returned, is not missed. The kept text goes.
func (l *liveTurn) end(output json.RawMessage) {
	if l == nil {
		return
	}
	if rest, ok := l.rest(output); ok {
		l.add(rest)
	}
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if rd := d.runs[l.runID]; rd != nil && rd.turns[l.key] == l.text {
		delete(rd.turns, l.key)
		d.forget(l.runID, rd)
	}
}

// rest is the answer's text past what was shown, if what was shown is
// its start (false: no answer, or the shown text went another way).
func (l *liveTurn) rest(output json.RawMessage) (string, bool) {
	if len(output) == 0 {
		return "", false
	}
	var resp chat.Response
	if json.Unmarshal(output, &resp) != nil {
		return "", false
	}
	l.d.mu.Lock()
	t := l.text
	size, whole := t.size, t.keptBytes == t.size
	var shown strings.Builder
	for _, k := range t.kept {
		shown.WriteString(k.Text)
	}
	l.d.mu.Unlock()
	answer := resp.Message.Content
	if len(answer) < size || (whole && !strings.HasPrefix(answer, shown.String())) {
		return "", false
	}
	return answer[size:], true
}
