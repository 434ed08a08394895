package engine

import (
	"context"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/render"
	"github.com/weirhq/weir/runtime/store"
)

// RunGraph returns the flow version owner's run pinned and what the run did
// at each node: visited, current, waiting, failed or cancelled.
func (e *Engine) RunGraph(ctx context.Context, owner, runID string) (*flows.Flow, map[string]render.Mark, error) {
	run, err := e.Get(ctx, owner, runID)
	if err != nil {
		return nil, nil, err
	}
	fe, err := e.book.version(ctx, run.Flow, run.Version)
	if err != nil {
		return nil, nil, &Error{Code: CodeFlowUnreadable, Class: ClassRun, Message: err.Error()}
	}
	raw, err := readContinuation(ctx, e.st, run.ID)
	if err != nil {
		return nil, nil, e.admission.readFailed(err)
	}
	c, err := decodeContinuation(raw)
	if err != nil {
		return nil, nil, &Error{Code: CodeContinuation, Class: ClassRun, Message: err.Error()}
	}
	marks := map[string]render.Mark{}
	for id, n := range c.Visits {
		if n > 0 {
			marks[id] = render.MarkVisited
		}
	}
	for id, rerr := range c.Errors {
		marks[id] = errorMark(rerr)
	}
	if c.Node != "" {
		switch {
		case run.Phase == store.PhaseWaiting:
			marks[c.Node] = render.MarkWaiting
		case run.Phase == store.PhaseCancelled:
			marks[c.Node] = render.MarkCancelled
		case run.Phase == store.PhaseFailed:
			marks[c.Node] = render.MarkFailed
		case !run.Phase.Terminal():
			marks[c.Node] = render.MarkCurrent
		}
	}
	return fe.flow, marks, nil
}

// errorMark is how a node whose error wire was taken is drawn: cancelled
// when what stopped it was a cancel (a child run cancelled), else failed.
func errorMark(rerr *store.RunError) render.Mark {
	if rerr != nil && rerr.Code == CodeCancelled {
		return render.MarkCancelled
	}
	return render.MarkFailed
}
