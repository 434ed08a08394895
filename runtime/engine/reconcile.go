package engine

import (
	"context"
	"encoding/json"

	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// Reconcile probes (DESIGN §12): when an at-most-once call's outcome is
// unknown (its started record has no result, or it ended without an answer
// from the tool) and the tool declares a probe, the engine asks it before
// anything else, outside any store transaction and bounded by the call's
// deadline. "happened" ends the call with the probe's result, never
// calling again; "not_happened" makes the call once more, fenced by a new
// started record; anything else leaves the outcome unknown, for the node's
// on_unknown to settle. Every answer is a reconciled event on the run.

// probeVerdict is what the engine does with a probe's answer.
type probeVerdict struct {
	// Answer is the answer journaled: happened, not_happened, unknown, or
	// "error" when the probe failed or answered what it may not.
	Answer string
	// Output is a happened call's result ("null" when the probe could
	// not tell it).
	Output json.RawMessage
	// Remake says the call is made once more.
	Remake bool
	// Why says why the answer is error, or why not_happened is not acted
	// on.
	Why string
}

// decideProbe turns a probe's answer (or its error) into what the engine
// does: a pure decision. A not_happened for a call already made again
// after an earlier not_happened stays unknown: the engine makes a call
// again at most once per probe it acts on.
//
// elsewhere says the call was started by another engine process than the
// one asking (a fleet peer, or this daemon before a restart with another
// data directory): a probe reads its own host's plugin state, which may
// not hold the other host's call, so its not_happened is not acted on.
// happened is: the probe found the call.
func decideProbe(res *tool.ReconcileResult, err error, remade, elsewhere bool) probeVerdict {
	switch {
	case err != nil:
		return probeVerdict{Answer: "error", Why: err.Error()}
	case res == nil:
		return probeVerdict{Answer: "error", Why: "the probe gave no answer"}
	}
	switch res.Answer {
	case tool.Happened:
		out := res.Output
		if len(out) == 0 {
			// The tool knows the call happened and not what it answered.
			out = json.RawMessage("null")
		}
		if !json.Valid(out) {
			return probeVerdict{Answer: "error", Why: "the probe said happened with a result that is not JSON"}
		}
		return probeVerdict{Answer: string(tool.Happened), Output: out}
	case tool.NotHappened:
		if elsewhere {
			return probeVerdict{Answer: string(tool.NotHappened), Why: "the call was made by another daemon, whose plugin state this daemon's probe does not see; it is not made again"}
		}
		if remade {
			return probeVerdict{Answer: string(tool.NotHappened), Why: "the call was made again once already after a not_happened; it is not made a third time"}
		}
		return probeVerdict{Answer: string(tool.NotHappened), Remake: true}
	case tool.Unknown:
		return probeVerdict{Answer: string(tool.Unknown)}
	}
	return probeVerdict{Answer: "error", Why: "the probe answered " + textbound.Quote(string(res.Answer)) + ", which is none of happened, not_happened, unknown"}
}

// reconcile asks the tool's probe about o, a call whose outcome is
// unknown, and applies the answer: a call done with the probe's result,
// the call to be made again (again), or o itself when the probe could not
// settle it or there is none. commit writes under the caller's fence.
func (w *worker) reconcile(ctx context.Context, c *toolCall, o callOutcome, commit func(fn func(tx store.Tx) error) error) (callOutcome, bool) {
	e := w.e
	info, ok := e.tools.LookupTool(c.Tool)
	r, can := e.tools.(tool.Reconciler)
	if !ok || !info.Reconcile || !can {
		return o, false
	}
	pctx, cancel := context.WithTimeout(ctx, c.timeout(info))
	deadline, _ := pctx.Deadline()
	res, err := r.Reconcile(pctx, tool.ReconcileRequest{Tool: c.Tool, IdempotencyKey: o.Key, Input: c.Input,
		RunID: c.Run.ID, Node: c.Node.ID, Deadline: deadline})
	cancel()
	if ctx.Err() != nil || w.cancelRequested() {
		return callOutcome{End: callInterrupted, Key: o.Key}, false
	}
	v := decideProbe(res, err, c.remade, o.StartedBy != "" && o.StartedBy != hostOf(e))
	now := e.clock.Now()
	detail := c.detail(map[string]any{"key": o.Key, "answer": v.Answer})
	if v.Why != "" {
		detail["message"] = textbound.Quote(v.Why)
	}
	if err := commit(func(tx store.Tx) error {
		if v.Remake {
			// Nothing happened: the next try starts the call afresh, as
			// after a call that was never sent.
			if err := tx.IdemPut(&store.Idem{Key: o.Key, RunID: c.Run.ID, Node: c.Node.ID, Tool: c.Tool, State: store.IdemNotSent, StartedAt: now}); err != nil {
				return err
			}
		}
		return appendEvent(tx, c.Run.ID, evReconciled, c.Attempt, c.Node.ID, detail, now)
	}); err != nil {
		return callOutcome{End: callAbandoned, Key: o.Key}, false
	}
	switch {
	case v.Output != nil:
		return callOutcome{End: callDone, Key: o.Key, Output: v.Output, RecordDone: true}, false
	case v.Remake:
		return callOutcome{}, true
	}
	return o, false
}

// hostOf names the host whose plugin state e's tools keep, as a started
// record carries it: Config.HostID, else this process.
func hostOf(e *Engine) string {
	if id := e.cfg.Load().HostID; id != "" {
		return id
	}
	return e.holder
}
