package host

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk/wire"
)

// ReconcileRequest asks a tool's reconcile probe about one call (the type
// lives in package tool, shared with the engine).
type ReconcileRequest = tool.ReconcileRequest

// ReconcileResult is a probe's answer.
type ReconcileResult = tool.ReconcileResult

var _ tool.Reconciler = (*Host)(nil)

// Reconcile asks a tool's reconcile probe whether the call made with
// req.IdempotencyKey happened (protocol revision 2's Reconcile RPC). A
// tool that declares no probe (flows.ToolInfo.Reconcile false; every tool
// of a revision-1 plugin) is not asked: the answer is tool.Unknown. The
// probe is bounded by req.Deadline, else by the tool's default timeout or
// Config.DefaultTimeout, as a call is; it takes one of the plugin's call
// slots in its owner's share, but not the serial slot of an at-most-once
// tool (it has no effect, and it is asked when that call's outcome is
// lost). Every failure is a *ToolError; the engine counts it as unknown.
func (h *Host) Reconcile(ctx context.Context, req tool.ReconcileRequest) (*tool.ReconcileResult, error) {
	if req.IdempotencyKey == "" {
		return nil, toolErrorf(KindSchema, req.Tool, "a reconcile probe needs the idempotency key of the call it asks about")
	}
	input, ctx, done, err := h.enter(ctx, req.Tool, req.Input, req.Deadline)
	if err != nil {
		return nil, err
	}
	defer done()
	for {
		t, ok := h.set.Load().tools[req.Tool]
		if !ok {
			return nil, toolErrorf(KindUnknownTool, req.Tool, "no installed plugin provides this tool")
		}
		if !t.m.Reconcile {
			return &tool.ReconcileResult{Answer: tool.Unknown}, nil
		}
		if !t.plugin.enter() {
			continue // retired by a rescan: resolve the tool again
		}
		res, err := h.reconcileOn(ctx, t, input, req)
		t.plugin.leave()
		if err != errRetired {
			return res, err
		}
	}
}

// reconcileOn asks t's plugin, which the caller holds (enter).
func (h *Host) reconcileOn(ctx context.Context, t *toolState, input []byte, req tool.ReconcileRequest) (*tool.ReconcileResult, error) {
	who := owner.From(ctx)
	p := t.plugin
	if err := p.slots.Acquire(ctx, who, h.done); err != nil {
		return nil, h.stopped(ctx, req.Tool)
	}
	defer p.slots.Release(who)
	inst, err := p.instance(ctx)
	if err != nil {
		return nil, err
	}
	if tm, ok := inst.declared().Tool(req.Tool); !ok || !tm.Reconcile || inst.manifest.ProtocolVersion < 2 {
		// The process in service declares no probe for it now (its
		// manifest changed at launch).
		return &tool.ReconcileResult{Answer: tool.Unknown}, nil
	}
	resp, err := inst.rpc.Reconcile(ctx, &wire.ReconcileRequest{Tool: req.Tool, IdempotencyKey: req.IdempotencyKey, Input: input})
	if err != nil {
		return nil, h.reconcileError(ctx, req.Tool, err)
	}
	return reconcileResult(req.Tool, resp)
}

// reconcileError classifies a failed Reconcile RPC.
func (h *Host) reconcileError(ctx context.Context, name string, err error) *ToolError {
	if h.isClosed() || ctx.Err() != nil {
		return h.stopped(ctx, name)
	}
	s := status.Convert(err)
	switch s.Code() {
	case codes.DeadlineExceeded:
		return toolErrorf(KindDeadline, name, "the reconcile probe did not answer in time: %s", s.Message())
	case codes.Canceled:
		return toolErrorf(KindCancelled, name, "the reconcile probe was cancelled: %s", s.Message())
	case codes.Unimplemented, codes.NotFound:
		return toolErrorf(KindProtocol, name, "the plugin declares a reconcile probe for this tool but does not answer it: %s", s.Message())
	case codes.ResourceExhausted:
		return toolErrorf(KindTooLarge, name, "the reconcile probe's answer exceeds the limit of %d bytes: %s", h.cfg.MaxMessageBytes, s.Message())
	case codes.Unavailable:
		return toolErrorf(KindCrashed, name, "the plugin process could not be reached for the reconcile probe: %s", s.Message())
	}
	return toolErrorf(KindPermanent, name, "the reconcile probe failed: %s", s.Message())
}

// reconcileResult checks and converts a probe's answer: a happened call's
// result must be JSON and no error; the other answers carry none.
func reconcileResult(name string, r *wire.ReconcileResponse) (*tool.ReconcileResult, error) {
	switch r.GetOutcome() {
	case wire.ReconcileOutcome_RECONCILE_OUTCOME_HAPPENED:
		res := &tool.ReconcileResult{Answer: tool.Happened}
		if cr := r.GetResult(); cr != nil {
			if cr.GetError() != nil {
				return nil, toolErrorf(KindProtocol, name, "the reconcile probe answered happened with an error result")
			}
			if out := cr.GetOutput(); len(out) > 0 {
				if !json.Valid(out) {
					return nil, toolErrorf(KindProtocol, name, "the reconcile probe answered a result that is not JSON")
				}
				res.Output = out
			}
		}
		return res, nil
	case wire.ReconcileOutcome_RECONCILE_OUTCOME_NOT_HAPPENED:
		return &tool.ReconcileResult{Answer: tool.NotHappened}, nil
	case wire.ReconcileOutcome_RECONCILE_OUTCOME_UNKNOWN:
		return &tool.ReconcileResult{Answer: tool.Unknown}, nil
	}
	return nil, toolErrorf(KindProtocol, name, "the reconcile probe answered no valid outcome (%d)", int32(r.GetOutcome()))
}
