package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk/chat"
)

// streamingModel is fakeModel's chat tool streaming each answer's text as
// partial results, split after spaces, the way a provider streams tokens.
// At its first model turn it calls atFirstTurn; after the first piece of
// each turn, afterFirstPiece; it leaves out the last piece when dropLast.
type streamingModel struct {
	*fakeModel
	mu              sync.Mutex
	asked           []bool // per model turn: did the engine ask for partials
	atFirstTurn     func(runID string)
	afterFirstPiece func(runID string)
	dropLast        bool
}

func (s *streamingModel) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	if req.Tool != "llm.chat" {
		return s.fakeModel.Call(ctx, req)
	}
	s.mu.Lock()
	s.asked = append(s.asked, req.Partials != nil)
	first := len(s.asked) == 1
	s.mu.Unlock()
	if first && s.atFirstTurn != nil {
		s.atFirstTurn(req.RunID)
	}
	s.fakeModel.mu.Lock()
	var text string
	if len(s.script) > 0 {
		text = s.script[0].Message.Content
	}
	s.fakeModel.mu.Unlock()
	if req.Partials != nil && text != "" {
		pieces := strings.SplitAfter(text, " ")
		if s.dropLast {
			pieces = pieces[:len(pieces)-1]
		}
		for i, p := range pieces {
			req.Partials(uint64(i+1), []byte(p))
			if i == 0 && s.afterFirstPiece != nil {
				s.afterFirstPiece(req.RunID)
			}
		}
	}
	return s.fakeModel.Call(ctx, req)
}

// drain takes what w delivered so far (it does not wait).
func drain(w *DeltaWatch) []TurnDelta {
	var got []TurnDelta
	for {
		select {
		case d, ok := <-w.C():
			if !ok {
				return got
			}
			got = append(got, d)
		default:
			return got
		}
	}
}

// joined checks that ds are one turn's deltas in order, from seq 1 and
// offset 0 without a gap, and returns their text.
func joined(t *testing.T, key TurnKey, ds []TurnDelta) string {
	t.Helper()
	var b strings.Builder
	for i, d := range ds {
		if d.TurnKey != key || d.Seq != uint64(i+1) || d.Offset != b.Len() {
			t.Fatalf("delta %d is %+v: want turn %+v, seq %d, offset %d", i, d, key, i+1, b.Len())
		}
		b.WriteString(d.Text)
	}
	return b.String()
}

// TestWatcherSeesTheTurnAsItStreams: a model turn asks for partials only
// if its run had a watcher when the turn's call started; the watcher sees
// the turn's text in order, and the turn's journaled answer is their
// concatenation even when the plugin's last piece did not arrive; a
// watcher that comes during the turn gets the kept text first, then the
// rest, with no delta twice; the kept text goes with the turn.
func TestWatcherSeesTheTurnAsItStreams(t *testing.T) {
	t.Parallel()
	const said = "The Seine is 777 km long."
	m := newFakeModel(askTools(use(10, 1), tc("c1", "kv.get", `{"key":"x"}`)), answer(said, use(10, 5)))
	sm := &streamingModel{fakeModel: m, dropLast: true}
	var first, second *DeltaWatch
	var kept []TurnDelta
	var b *agentBundle
	sm.atFirstTurn = func(runID string) { first, _ = LiveTurns(b.eng).Watch(runID, "") }
	sm.afterFirstPiece = func(runID string) { second, kept = LiveTurns(b.eng).Watch(runID, "a") }
	b = setupAgentConfig(t, Config{Store: memstore.New(), Tools: sm, Clock: clock.NewFake(time.Now())}, m)
	run := b.run(t, "research", `{"topic":"rivers"}`)
	if r := resultOf(t, run); r.Answer != said {
		t.Fatalf("answer %q", r.Answer)
	}
	sm.mu.Lock()
	asked := sm.asked
	sm.mu.Unlock()
	if len(asked) != 2 || asked[0] || !asked[1] {
		t.Fatalf("partials asked per turn %v: want not for the turn that started unwatched, then for the next", asked)
	}
	key := TurnKey{Node: "a", Visit: 1, Turn: 2}
	if got := joined(t, key, drain(first)); got != said {
		t.Fatalf("the watcher saw %q, want the answer %q", got, said)
	}
	later := drain(second)
	if len(kept) != 1 || joined(t, key, append(kept, later...)) != said {
		t.Fatalf("the later watcher got %+v kept and %+v after: want the first piece kept, then the rest once", kept, later)
	}
	d := LiveTurns(b.eng)
	d.mu.Lock()
	turns := len(d.runs[run.ID].turns)
	d.mu.Unlock()
	if turns != 0 {
		t.Fatalf("%d turns kept after the run ended", turns)
	}
	first.Stop()
	second.Stop()
	second.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.runs) != 0 {
		t.Fatalf("%d runs kept after their watchers stopped", len(d.runs))
	}
}

// TestTurnDeltasBounds: nobody watching, a turn asks for nothing; a
// watcher of another node sees nothing of it; a watcher that falls
// deltaWatchQueue deltas behind is dropped without slowing the turn; the
// kept text stops at MaxTurnDeltaBytes while the live text goes on; a turn
// begun again starts over.
func TestTurnDeltasBounds(t *testing.T) {
	t.Parallel()
	d := newTurnDeltas()
	key := TurnKey{Node: "a", Visit: 1, Turn: 1}
	if l := d.begin("r1", key); l != nil || l.partials() != nil {
		t.Fatal("a turn of an unwatched run asks for partials")
	}
	l := d.begin("r1", key)
	l.end(nil) // nil does nothing
	if len(d.runs) != 0 {
		t.Fatal("an unwatched turn left an entry")
	}

	slow, _ := d.Watch("r1", "")
	other, _ := d.Watch("r1", "b")
	fast, _ := d.Watch("r1", "a")
	l = d.begin("r1", key)
	piece := strings.Repeat("x", 1000)
	var seen []TurnDelta
	for range deltaWatchQueue + 1 {
		l.partials()(0, []byte(piece))
		seen = append(seen, drain(fast)...)
	}
	if !slow.Dropped() || fast.Dropped() {
		t.Fatalf("slow dropped %v, fast dropped %v: want the slow one only", slow.Dropped(), fast.Dropped())
	}
	if n := len(drain(slow)); n != deltaWatchQueue {
		t.Fatalf("the slow watcher had %d deltas before it was dropped, want %d", n, deltaWatchQueue)
	}
	if _, ok := <-slow.C(); ok {
		t.Fatal("a dropped watcher's channel is open")
	}
	if len(drain(other)) != 0 {
		t.Fatal("a watcher of node b saw node a's turn")
	}
	if got := joined(t, key, seen); len(got) != (deltaWatchQueue+1)*len(piece) {
		t.Fatalf("the live watcher saw %d bytes", len(got))
	}
	late, kept := d.Watch("r1", "")
	if n := len(joined(t, key, kept)); n != MaxTurnDeltaBytes/len(piece)*len(piece) {
		t.Fatalf("%d bytes kept, want the whole pieces under %d", n, MaxTurnDeltaBytes)
	}

	again := d.begin("r1", key) // the turn's next try
	l.partials()(0, []byte("stale"))
	again.partials()(0, []byte("new"))
	if got := drain(late); len(got) != 1 || got[0].Seq != 1 || got[0].Offset != 0 || got[0].Text != "new" {
		t.Fatalf("after the turn began again the watcher saw %+v, want its first piece only", got)
	}
	out, _ := json.Marshal(chat.Response{Message: chat.Message{Content: "new and more"}})
	l.end(out) // the stale try's end changes nothing
	again.end(out)
	if got := drain(late); len(got) != 1 || got[0].Offset != 3 || got[0].Text != " and more" {
		t.Fatalf("the end of the turn showed %+v, want the rest of the answer", got)
	}
	out, _ = json.Marshal(chat.Response{Message: chat.Message{Content: "another answer"}})
	l = d.begin("r1", key)
	l.partials()(0, []byte("new"))
	drain(late)
	l.end(out)
	if got := drain(late); len(got) != 0 {
		t.Fatalf("an answer that is not the shown text's continuation was shown: %+v", got)
	}
	for _, w := range []*DeltaWatch{other, fast, late} {
		w.Stop()
	}
	if len(d.runs) != 0 {
		t.Fatal("entries left after every watcher stopped and every turn ended")
	}
}
