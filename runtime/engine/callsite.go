package engine

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// callSite is where a tool call's outcome lands: a task node (on the
// run's step), a fan-out item or an agent's call (each on its own task).
// applyCall is the one place that maps how a call ended to what its site
// does; each site says only how it records a result, an error, a retry,
// a dead letter and an interruption. An agent's model turn is applied by
// the turn itself (agent.go): its answer is a message, not a result.
type callSite interface {
	// done records a result that fits MaxResultBytes.
	done(ctx context.Context, c *toolCall, o callOutcome) bool
	// failed records an end with o.Err: the tool's error, a result too
	// large to keep (o.Cost is then what the call cost) or, after
	// exhausted's dead letter, the last try's.
	failed(ctx context.Context, c *toolCall, o callOutcome) bool
	// retry parks the calling task until o.RetryAt.
	retry(ctx context.Context, c *toolCall, o callOutcome) bool
	// exhausted records that every try failed.
	exhausted(ctx context.Context, c *toolCall, o callOutcome) bool
	// interrupted applies a call stopped by a cancel, a stop or a lost
	// lease.
	interrupted(ctx context.Context, c *toolCall) bool
}

// applyCall applies o at site. The bool is the site's: for a task node,
// whether the step goes on.
func applyCall(ctx context.Context, site callSite, c *toolCall, o callOutcome) bool {
	switch o.End {
	case callDone:
		if len(o.Output) > MaxResultBytes {
			// The call happened and its result cannot be kept: it ends
			// with that error (and a non-idempotent call's done record
			// says so, or the started record would make it unknown).
			o.Err, o.Output = resultTooLarge(c.resultName(), len(o.Output)), nil
			return site.failed(ctx, c, o)
		}
		return site.done(ctx, c, o)
	case callFailed:
		return site.failed(ctx, c, o)
	case callRetry:
		return site.retry(ctx, c, o)
	case callExhausted:
		return site.exhausted(ctx, c, o)
	case callInterrupted:
		return site.interrupted(ctx, c)
	case callUnknown:
		if u, ok := site.(unknownSite); ok {
			return u.unknown(ctx, c, o)
		}
		return site.failed(ctx, c, o) // E_OUTCOME_UNKNOWN on the error wire
	}
	return false // abandoned: the failure is reported already
}

// resultName names the call's result in an error: a task node's, a
// fan-out item's or an agent call's.
func (c *toolCall) resultName() string {
	switch len(c.Index) {
	case 0:
		return "the result of node " + c.Node.ID
	case 1:
		return fmt.Sprintf("the result of item %d", c.Index[0])
	}
	return fmt.Sprintf("the result of call %d of turn %d", c.Index[1], c.Index[0])
}

// nodeSite is a task node's call, on the run's step.
type nodeSite struct{ s *stepper }

func (n nodeSite) done(ctx context.Context, c *toolCall, o callOutcome) bool {
	return n.s.toolDone(ctx, c, o)
}

func (n nodeSite) failed(ctx context.Context, c *toolCall, o callOutcome) bool {
	if o.RecordDone {
		// Marked done with its error, so a later resume knows it ran and
		// failed rather than "unknown".
		now := n.s.e.clock.Now()
		if !n.s.commit(ctx, func(tx store.Tx) error { return idemDoneTx(tx, c, o.Key, nil, o.Err, now) }) {
			return false
		}
	}
	return n.s.nodeFailed(ctx, c.Node, o.Err)
}

func (n nodeSite) retry(ctx context.Context, c *toolCall, o callOutcome) bool {
	return n.s.retryLater(ctx, c, o)
}

func (n nodeSite) exhausted(ctx context.Context, c *toolCall, o callOutcome) bool {
	return n.s.exhausted(ctx, c.Node, c.Tool, o)
}

func (n nodeSite) interrupted(ctx context.Context, c *toolCall) bool {
	if n.s.cancelRequested() {
		n.s.e.stats.unit(c.Tool)
		n.s.finish(ctx, store.PhaseCancelled, nil, nil)
	}
	return false // stopping or lease lost; the lease is rescued later
}

// itemSite is a fan-out item's call, on its own task: its end is written
// on the cohort item.
type itemSite struct {
	w   *worker
	ref *store.CohortRef
	run *store.Run
	// node is the fan-out node.
	node *flows.Node
}

func (i itemSite) done(ctx context.Context, c *toolCall, o callOutcome) bool {
	i.w.itemEnd(ctx, i.ref, c, o.Output, nil, o.Cost, o.RecordDone)
	return false
}

func (i itemSite) failed(ctx context.Context, c *toolCall, o callOutcome) bool {
	i.w.itemEnd(ctx, i.ref, c, nil, o.Err, o.Cost, o.RecordDone)
	return false
}

func (i itemSite) retry(ctx context.Context, c *toolCall, o callOutcome) bool {
	w, t := i.w, i.w.task
	now := w.e.clock.Now()
	next := *t
	next.Errors = append(next.Errors, o.Try)
	next.Leased, next.ReadyAt = false, o.RetryAt
	if w.itemCommit(ctx, func(tx store.Tx) error {
		if err := tx.TaskPut(&next); err != nil {
			return err
		}
		if err := tx.LeaseDelete(t.ID); err != nil {
			return err
		}
		return retryEventTx(tx, c, o, now)
	}) == nil {
		w.setLease(nil, true)
	}
	return false
}

func (i itemSite) exhausted(ctx context.Context, c *toolCall, o callOutcome) bool {
	w := i.w
	dl := *w.task
	dl.Errors = append(dl.Errors, o.Try)
	if i.node.Parks() && w.itemParkExhausted(ctx, i.ref, i.run, &dl, i.node.Tool, o.Err) {
		return false // parked until a redrive: cohortexhausted.go
	}
	if w.itemCommit(ctx, func(tx store.Tx) error { return w.e.journal.deadLetterTx(tx, i.run, &dl, i.node.Tool) }) == nil {
		w.e.stats.deadLettered()
	}
	w.itemEnd(ctx, i.ref, c, nil, o.Err, 0, false)
	return false
}

// unknown leaves the item in flight with its unknown outcome when its
// fan-out says on_unknown = "ask": the parent's step opens the item's
// wait. The call's started record stays, for the resolve to end.
func (i itemSite) unknown(ctx context.Context, c *toolCall, o callOutcome) bool {
	if !i.node.Asks() || !i.w.itemAsk(ctx, i.ref, o.Err) {
		return i.failed(ctx, c, o)
	}
	return false
}

func (i itemSite) interrupted(ctx context.Context, _ *toolCall) bool {
	// Stopped by its cohort, or the engine stopping: the stop already
	// recorded the item; an engine stop leaves the lease to rescue.
	w, t, run := i.w, i.w.task, i.run
	w.itemDrop(ctx, func(tx store.Tx) error {
		cur, err := tx.CohortItemGet(run.ID, t.Node, t.Visit, t.Item)
		if err != nil || cur.State != store.ItemStopped {
			return errSkip
		}
		// A call that is not idempotent whose started record was written
		// after the stop is as unknown as one written before.
		co, err := tx.CohortGet(run.ID, t.Node, t.Visit)
		if err != nil {
			return err
		}
		started, err := startedUnrecordedTx(tx, co, cur)
		if err != nil || started == "" || (cur.Error != nil && cur.Error.Code == CodeOutcomeUnknown) {
			return err
		}
		if err := markUnknownTx(tx, co, cur, unknownStopMessage(started), w.e.clock.Now()); err != nil {
			return err
		}
		return tx.CohortPut(co)
	})
	return false
}

// agentCallSite is an agent's call of a tool, on its own task: its end
// wakes the agent, whose model is told the result or the error. Agent
// calls are not retried by the engine: the model decides.
type agentCallSite struct{ w *worker }

func (a agentCallSite) done(ctx context.Context, c *toolCall, o callOutcome) bool {
	a.w.agentCallEnd(ctx, c, o.Output, nil, o.Cost, o.RecordDone)
	return false
}

func (a agentCallSite) failed(ctx context.Context, c *toolCall, o callOutcome) bool {
	rerr := o.Err
	if rerr == nil {
		rerr = &store.RunError{Code: CodeToolFailed, Message: c.Tool + " failed"}
	}
	a.w.agentCallEnd(ctx, c, nil, rerr, o.Cost, o.RecordDone)
	return false
}

func (a agentCallSite) retry(ctx context.Context, c *toolCall, o callOutcome) bool {
	return a.failed(ctx, c, o)
}

func (a agentCallSite) exhausted(ctx context.Context, c *toolCall, o callOutcome) bool {
	return a.failed(ctx, c, o)
}

// unknown leaves the call pending with its unknown outcome when its agent
// says on_unknown = "ask": the agent's step opens the call's wait. The
// call's started record stays (no done record), for the resolve to end.
func (a agentCallSite) unknown(ctx context.Context, c *toolCall, o callOutcome) bool {
	if !c.Node.Asks() {
		return a.failed(ctx, c, o)
	}
	a.w.agentCallWrite(ctx, c, nil, o.Err, o.Cost, false, true)
	return false
}

func (a agentCallSite) interrupted(ctx context.Context, _ *toolCall) bool {
	if a.w.cancelRequested() {
		a.w.itemDrop(ctx, nil) // the run is being cancelled
	}
	// An engine stop or a lost lease: the task is rescued, and a
	// non-idempotent call's started record makes it unknown then.
	return false
}
