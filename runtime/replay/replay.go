package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

// The kinds of divergence (Divergence.Kind), stable for --json.
const (
	// KindPath: a visit ended otherwise than the run's (a branch took
	// the other wire, a node failed that completed, another node ran).
	KindPath = "path"
	// KindTool: a node calls another tool than the run did.
	KindTool = "tool"
	// KindArgs: a call's arguments (a model turn's request) are not the
	// run's.
	KindArgs = "args"
	// KindLacks: a call the recording holds no answer for.
	KindLacks = "lacks"
	// KindWait: the replay waits for a decision the recording lacks.
	KindWait = "wait"
	// KindEnd: the same path to another end (phase or output).
	KindEnd = "end"
)

// DefaultTimeout bounds one replay in wall time.
const DefaultTimeout = time.Minute

// replayOwner owns the replay's runs and flows on its embedded engine.
const replayOwner = "replay"

// Options are what a replay runs.
type Options struct {
	// Files replace the recorded version's sources ("" paths are not
	// allowed); nil replays the recorded sources. They must declare the
	// recorded run's flow.
	Files []apitypes.SourceFile
	// Timeout bounds the replay in wall time (0: DefaultTimeout).
	Timeout time.Duration
	// Logger receives the embedded engine's log (nil: none).
	Logger hclog.Logger

	// Model makes the replay counterfactual: every agent's model turns
	// are asked again, of Live, for this model alias in place of the
	// flow's, while tool calls are still answered from the recording
	// (live.go); the result carries the turn-by-turn diff.
	Model string
	// Live answers a counterfactual's model turns (a plugin host, a
	// scripted model) and, with LiveReads, the read tools its new turns
	// ask for that the run never called. Nothing else is ever called.
	Live      engine.Tools
	LiveReads bool
}

// Divergence is the first place a replay did not do what the run did.
type Divergence struct {
	Kind  string `json:"kind"`
	Node  string `json:"node,omitempty"`
	Visit int    `json:"visit,omitempty"`
	// Pos is file:line:col in the sources replayed, where they write the
	// node (or the part of it that decided: a branch's cond, a task's
	// args); "" when they lack the node.
	Pos     string `json:"pos,omitempty"`
	Message string `json:"message"`
	// Recorded and Replayed show both sides where there are two values.
	Recorded string `json:"recorded,omitempty"`
	Replayed string `json:"replayed,omitempty"`
}

func (d *Divergence) String() string {
	var b strings.Builder
	if d.Pos != "" {
		b.WriteString(d.Pos + ": ")
	}
	b.WriteString(d.Message)
	if d.Recorded != "" || d.Replayed != "" {
		fmt.Fprintf(&b, "\n  recorded: %s\n  replayed: %s", d.Recorded, d.Replayed)
	}
	return b.String()
}

// Result is what a replay found.
type Result struct {
	Run  string `json:"run"`  // the recorded run's id
	Flow string `json:"flow"` // its flow
	// Pass: the same path to the same end.
	Pass       bool        `json:"pass"`
	Divergence *Divergence `json:"divergence,omitempty"`
	// Steps are the node visits the replay ended; Calls the tries it
	// answered from the recording.
	Steps int `json:"steps"`
	Calls int `json:"calls"`
	// Phase and Output are the replay's end.
	Phase  string          `json:"phase"`
	Output json.RawMessage `json:"output,omitempty"`
	// Turns is a counterfactual's decision diff, turn by turn; Asked the
	// model turns it asked of the live model.
	Turns []TurnDiff `json:"turns,omitempty"`
	Asked int        `json:"asked,omitempty"`
}

// ErrBadInput wraps what makes a replay impossible (files that do not
// register, a recording naming a flow they lack): the recording or the
// files are wrong, not the code under test.
var ErrBadInput = errors.New("replay: bad input")

// Replay runs rec's flow again on an embedded engine answered by rec and
// reports whether it took the same path to the same end.
func Replay(ctx context.Context, rec *Recording, opts Options) (*Result, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	files := opts.Files
	if files == nil {
		files = rec.Sources
	}
	tools, err := newAnswerer(rec)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if opts.Model != "" {
		if opts.Live == nil {
			return nil, fmt.Errorf("%w: a counterfactual replay (model %s) needs a live model tool to ask", ErrBadInput, opts.Model)
		}
		tools.live, tools.model, tools.liveReads = opts.Live, opts.Model, opts.LiveReads
	}
	flow, err := checkFiles(rec, files, tools)
	if err != nil {
		return nil, err
	}
	tools.sites = map[string]*flows.Node{}
	for _, n := range flow.Nodes {
		tools.sites[n.ID] = n
	}
	r, err := start(ctx, rec, files, tools, opts.Logger)
	if err != nil {
		return nil, err
	}
	r.flow = flow
	defer r.close()
	if err := r.drive(ctx); err != nil {
		return nil, err
	}
	return r.result(ctx)
}

// checkFiles is the replayed flow as the files declare it (with its
// call sites' positions), or why they cannot be replayed.
func checkFiles(rec *Recording, files []apitypes.SourceFile, cat flows.Catalog) (*flows.Flow, error) {
	in := make([]flows.File, len(files))
	for i, f := range files {
		in[i] = flows.File{Path: f.Path, Src: []byte(f.Src)}
	}
	mod, diags := script.Check(in, cat)
	if errs := diags.Errors(); len(errs) > 0 {
		return nil, fmt.Errorf("%w: the files do not register: %s", ErrBadInput, errs[0].String())
	}
	for _, f := range mod.Flows {
		if f.Name == rec.Run.Flow {
			return f, nil
		}
	}
	return nil, fmt.Errorf("%w: the files declare no flow %s, which the recorded run ran", ErrBadInput, rec.Run.Flow)
}

// replayer is one replay's embedded engine and the run it replays.
type replayer struct {
	rec   *Recording
	tools *answerer
	flow  *flows.Flow
	mem   *memstore.Store
	eng   *engine.Engine
	clock *clock.Fake
	runID string
	// used marks the recorded decisions the replay made again; decided
	// counts them.
	used    map[int]bool
	decided int
	// stopped is a divergence the driver found (a wait the recording
	// never decided).
	stopped *Divergence
}

// tick is the embedded engine's scheduler period on the fake clock: the
// driver moves the clock a tick at a time, so that backoffs and parked
// tasks come due without wall time passing.
const tick = 100 * time.Millisecond

func start(ctx context.Context, rec *Recording, files []apitypes.SourceFile, tools *answerer, log hclog.Logger) (*replayer, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	epoch, err := time.Parse(time.RFC3339Nano, rec.Run.CreatedAt)
	if err != nil {
		epoch = rec.RecordedAt
	}
	r := &replayer{rec: rec, tools: tools, mem: memstore.New(), clock: clock.NewFake(epoch), used: map[int]bool{}}
	// Leases far longer than any replay: the fake clock moves while a
	// step runs, and a lease lost to it would make a call twice.
	r.eng, err = engine.Open(engine.Config{Store: r.mem, Tools: tools, Clock: r.clock, Logger: log, Workers: 8,
		LeaseTimeout: 1000 * time.Hour, QueueTimeout: -1, Tick: tick, RetryBase: time.Millisecond, RetryMax: tick})
	if err != nil {
		r.mem.Close()
		return nil, err
	}
	tools.runOf = func(ctx context.Context, id string) (*store.Run, error) { return r.eng.Get(ctx, replayOwner, id) }
	if err := r.eng.Start(ctx); err != nil {
		r.mem.Close()
		return nil, err
	}
	src := make([]engine.SourceFile, len(files))
	for i, f := range files {
		src[i] = engine.SourceFile{Path: f.Path, Src: f.Src}
	}
	res, err := r.eng.RegisterAs(ctx, replayOwner, src)
	if err == nil && len(res.Diagnostics.Errors()) > 0 {
		err = fmt.Errorf("%w: the files do not register: %s", ErrBadInput, res.Diagnostics.Errors()[0].String())
	}
	if err != nil {
		r.close()
		return nil, err
	}
	started, err := r.eng.Submit(ctx, engine.StartRequest{Owner: replayOwner, Flow: rec.Run.Flow, Input: rec.Run.Input})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("%w: the recorded input does not start the flow: %v", ErrBadInput, err)
	}
	r.runID = started.RunID
	return r, nil
}

func (r *replayer) close() {
	_ = r.eng.Stop(context.Background())
	r.mem.Close()
}

// drive runs the replay to its end: a terminal phase, a divergence (the
// run is cancelled, and driven until it has ended), or a wait the
// recording holds no decision for. Decisions are made as the run's people
// made them; the fake clock moves a tick in each round the run did not.
func (r *replayer) drive(ctx context.Context) error {
	cancelled := false
	var seen uint64 // the last event of the run read
	for {
		run, err := r.eng.Get(ctx, replayOwner, r.runID)
		if err != nil || run.Phase.Terminal() {
			return err
		}
		if !cancelled && r.tools.divergence() != nil {
			if _, err := r.eng.Cancel(ctx, replayOwner, r.runID); err != nil {
				return err
			}
			cancelled = true
		}
		if !cancelled && run.Phase == store.PhaseWaiting {
			more, err := r.decide(ctx)
			if err != nil || !more {
				return err
			}
		}
		moved, err := r.progressed(ctx, &seen)
		if err != nil {
			return err
		}
		if !moved {
			// Nothing happened since the last round: the run waits for
			// time (a backoff, a timer, a deadline). While it moves, the
			// clock stays, so no deadline passes under work in hand.
			r.clock.Advance(tick)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replay of run %s: no end within its timeout: %w", r.rec.Run.ID, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// progressed says whether the run's timeline grew past *seen, and moves
// *seen to its end.
func (r *replayer) progressed(ctx context.Context, seen *uint64) (bool, error) {
	evs, err := r.eng.Events(ctx, replayOwner, r.runID, *seen, eventPage)
	if err != nil || len(evs) == 0 {
		return false, err
	}
	*seen = evs[len(evs)-1].Seq
	return true, nil
}

// decide makes the recording's next decisions on the replay's open
// waits. more is false when the run waits for a decision the recording
// lacks: the replay ends there (a pass if the run ended there too).
func (r *replayer) decide(ctx context.Context) (more bool, err error) {
	waits, err := r.eng.HumanWaits(ctx, replayOwner, r.runID)
	if err != nil || len(waits) == 0 {
		return true, err // a timer or a child: the clock moves it on
	}
	for _, w := range waits {
		d, ok := r.nextDecision(w)
		if !ok && !w.Until.IsZero() && r.lapsed(ctx, w.Node) {
			// Nobody decided in the run either: its deadline passed. The
			// clock is taken past it, and the wait ends as it did then.
			if now := r.clock.Now(); w.Until.After(now) {
				r.clock.Advance(w.Until.Sub(now))
			}
			continue
		}
		if !ok {
			if r.rec.Run.Phase != string(store.PhaseWaiting) || r.decided < len(r.rec.Decisions) {
				r.stopped = &Divergence{Kind: KindWait, Node: w.Node, Pos: posOf(r.tools.sites, w.Node, ""),
					Message: fmt.Sprintf("the replay waits at node %s (a %s wait) for a decision the recording lacks", w.Node, w.Kind)}
			}
			return false, nil
		}
		if _, err := r.eng.DecideWait(ctx, engine.DecideParams{Owner: replayOwner, RunID: r.runID, Node: w.ID, Approve: d.Approved,
			Payload: d.Payload, Reason: d.Reason, Respond: d.Respond, Result: d.Result}); err != nil {
			return false, fmt.Errorf("replay of run %s: the recorded decision on %s: %w", r.rec.Run.ID, w.Node, err)
		}
	}
	return true, nil
}

// lapsed says whether the recorded run's visit of node that the replay
// waits in ended failed: a wait whose deadline passed undecided.
func (r *replayer) lapsed(ctx context.Context, node string) bool {
	steps, err := r.steps(ctx)
	if err != nil {
		return false
	}
	visit := 1
	for _, s := range steps {
		if s.Node == node {
			visit++
		}
	}
	for _, s := range r.rec.Steps {
		if s.Node == node && s.Visit == visit {
			return !s.Completed
		}
	}
	return false
}

// nextDecision is the recording's decision on w: the one on the wait of
// its id, else (a recording's decision without one) the next in order if
// it is on w's node.
func (r *replayer) nextDecision(w engine.HumanWait) (Decision, bool) {
	for i, d := range r.rec.Decisions {
		if d.Wait == w.ID && !r.used[i] {
			r.used[i] = true
			r.decided++
			return d, true
		}
	}
	for i, d := range r.rec.Decisions {
		if r.used[i] {
			continue
		}
		if d.Wait != "" || d.Node != w.Node || (d.Kind != "" && d.Kind != w.Kind) {
			return Decision{}, false
		}
		r.used[i] = true
		r.decided++
		return d, true
	}
	return Decision{}, false
}
