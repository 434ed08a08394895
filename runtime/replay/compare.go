package replay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// eventPage is how many events the result reads at a time.
const eventPage = 1000

// result compares the replay's path and end with the recording's.
func (r *replayer) result(ctx context.Context) (*Result, error) {
	run, err := r.eng.Get(ctx, replayOwner, r.runID)
	if err != nil {
		return nil, err
	}
	steps, err := r.steps(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Run: r.rec.Run.ID, Flow: r.rec.Run.Flow, Steps: len(steps), Phase: string(run.Phase), Output: run.Output}
	r.tools.mu.Lock()
	res.Calls, res.Asked = r.tools.answered, r.tools.asked
	r.tools.mu.Unlock()
	if r.tools.live != nil {
		j, err := r.eng.Ops().Journal(ctx, replayOwner, r.runID)
		if err != nil {
			return nil, err
		}
		var turns []json.RawMessage
		for _, t := range j.Turns {
			b, err := json.Marshal(t)
			if err != nil {
				return nil, err
			}
			turns = append(turns, b)
		}
		res.Turns = turnDiffs(r.rec.Turns, turns)
	}
	res.Divergence = firstDivergence(r.rec.Steps, steps, r.tools.divergence(), r.stopped, r.tools.sites)
	if res.Divergence == nil {
		res.Divergence = r.endDiffers(string(run.Phase), run.Output)
	}
	res.Pass = res.Divergence == nil
	return res, nil
}

// steps are the ends of the replay's node visits, read from its
// timeline as a recording reads a run's.
func (r *replayer) steps(ctx context.Context) ([]Step, error) {
	b := newBuilder(&Recording{Run: Run{ID: r.runID}})
	var after uint64
	for {
		evs, err := r.eng.Events(ctx, replayOwner, r.runID, after, eventPage)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if err := b.event(apitypes.Event{Seq: ev.Seq, RunID: ev.RunID, At: ev.At, Type: ev.Type, Attempt: ev.Attempt, Node: ev.Node, Detail: ev.Detail}); err != nil {
				return nil, err
			}
			after = ev.Seq
		}
		if len(evs) < eventPage {
			return b.rec.Steps, nil
		}
	}
}

// firstDivergence is the earliest place the replay left the run's path:
// a call that diverged, unless a visit ended otherwise before that call's
// visit did.
func firstDivergence(recorded, replayed []Step, call, stopped *Divergence, sites map[string]*flows.Node) *Divergence {
	path, at := pathDivergence(recorded, replayed, sites)
	if call != nil {
		callAt := len(replayed)
		for i, s := range replayed {
			if s.Node == call.Node && s.Visit == call.Visit {
				callAt = i
				break
			}
		}
		if path == nil || callAt <= at {
			return call
		}
	}
	if stopped != nil && at >= len(replayed) {
		return stopped // the replay stopped short at a wait: that says why
	}
	if path != nil {
		return path
	}
	return stopped
}

// pathDivergence is the first visit whose end is not the run's, and its
// index in the timelines; nil when one path is the other's beginning.
func pathDivergence(recorded, replayed []Step, sites map[string]*flows.Node) (*Divergence, int) {
	for i := 0; i < len(recorded) && i < len(replayed); i++ {
		rec, now := recorded[i], replayed[i]
		if rec.Node != now.Node {
			return wentElsewhere(replayed, i, rec, now, sites), i
		}
		if rec.Completed != now.Completed || rec.Wire != now.Wire {
			return endedOtherwise(rec, now, sites), i
		}
	}
	switch {
	case len(replayed) > len(recorded):
		now := replayed[len(recorded)]
		return &Divergence{Kind: KindPath, Node: now.Node, Visit: now.Visit, Pos: posOf(sites, now.Node, ""),
			Message: fmt.Sprintf("node %s (visit %d) ran after the point where the recorded run stopped", now.Node, now.Visit)}, len(recorded)
	case len(recorded) > len(replayed):
		rec := recorded[len(replayed)]
		return &Divergence{Kind: KindPath, Node: rec.Node, Visit: rec.Visit, Pos: posOf(sites, rec.Node, ""),
			Message: fmt.Sprintf("the replay stopped before node %s (visit %d), which the run went on to", rec.Node, rec.Visit)}, len(replayed)
	}
	return nil, len(replayed)
}

// wentElsewhere: the visit after step i-1 is another node's than the
// run's; the node before decided it (a branch's wire, or its next).
func wentElsewhere(replayed []Step, i int, rec, now Step, sites map[string]*flows.Node) *Divergence {
	if i == 0 {
		return &Divergence{Kind: KindPath, Node: now.Node, Visit: now.Visit, Pos: posOf(sites, now.Node, ""),
			Message: fmt.Sprintf("the replay begins at node %s; the run began at %s", now.Node, rec.Node)}
	}
	prev := replayed[i-1]
	return &Divergence{Kind: KindPath, Node: prev.Node, Visit: prev.Visit, Pos: decidingPos(sites, prev.Node),
		Message: fmt.Sprintf("after node %s (visit %d) the replay went to %s; the run went to %s", prev.Node, prev.Visit, now.Node, rec.Node)}
}

// endedOtherwise: the same visit ended another way (a branch's other
// wire, a failure where the run completed, or the other way round).
func endedOtherwise(rec, now Step, sites map[string]*flows.Node) *Divergence {
	d := &Divergence{Kind: KindPath, Node: now.Node, Visit: now.Visit, Pos: decidingPos(sites, now.Node)}
	switch {
	case now.Completed && rec.Completed:
		d.Message = fmt.Sprintf("branch %s (visit %d) took the wire to %s; the run took the one to %s", now.Node, now.Visit, orEnd(now.Wire), orEnd(rec.Wire))
	case now.Completed:
		d.Message = fmt.Sprintf("node %s (visit %d) completed; in the run it failed with %s: %s", now.Node, now.Visit, rec.Code, textbound.Quote(rec.Message))
	case rec.Completed:
		d.Message = fmt.Sprintf("node %s (visit %d) failed with %s: %s; in the run it completed", now.Node, now.Visit, now.Code, textbound.Quote(now.Message))
	default:
		d.Message = fmt.Sprintf("node %s (visit %d) failed with %s, and in the run with %s", now.Node, now.Visit, now.Code, rec.Code)
	}
	return d
}

// decidingPos is where node decides where the run goes: a branch's cond,
// else the node's call.
func decidingPos(sites map[string]*flows.Node, node string) string {
	if n := sites[node]; n != nil && n.Kind == flows.KindBranch {
		return posOf(sites, node, "cond")
	}
	return posOf(sites, node, "")
}

func orEnd(wire string) string {
	if wire == "" {
		return "the end"
	}
	return wire
}

// endDiffers is the divergence of a replay that took the run's path to
// another phase or output.
func (r *replayer) endDiffers(phase string, output json.RawMessage) *Divergence {
	want := r.rec.Run.Phase
	if want == "completing" {
		want = "completed"
	}
	if phase != want {
		return &Divergence{Kind: KindEnd, Message: fmt.Sprintf("the replay ended %s; the run was %s", phase, want)}
	}
	ps, _ := parsePointers(r.rec.Redacted)
	now := blankAll(output, ps)
	if (len(now) > 0 || len(r.rec.Run.Output) > 0) && !canonicalEqual(now, r.rec.Run.Output) {
		return &Divergence{Kind: KindEnd, Pos: r.outputPos(), Message: "the replay took the run's path to another output",
			Recorded: textbound.Quote(string(r.rec.Run.Output)), Replayed: textbound.Quote(string(now))}
	}
	return nil
}

// outputPos is where the flow declares its output, if it does.
func (r *replayer) outputPos() string {
	if r.flow == nil || r.flow.Output == nil {
		return ""
	}
	return r.flow.Pos.String()
}
