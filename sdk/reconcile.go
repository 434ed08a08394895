package sdk

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/sdk/wire"
)

// defaultReconcileTimeout bounds a probe asked without a deadline: weir
// always sends one, so this is only for a caller that forgets.
const defaultReconcileTimeout = time.Minute

// Reconcile answers weir's reconcile probe for one call (protocol
// revision 2). A tool without a probe answers Unimplemented: weir asks
// only tools whose manifest says reconcile, so it is a host's mistake.
func (s *server) Reconcile(ctx context.Context, req *wire.ReconcileRequest) (*wire.ReconcileResponse, error) {
	tool, ok := s.current().tools[req.GetTool()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "this plugin has no tool %q", req.GetTool())
	}
	call := &Call{
		Tool:           req.GetTool(),
		IdempotencyKey: req.GetIdempotencyKey(),
		Input:          req.GetInput(),
		StateDir:       s.stateDir,
		Config:         s.config,
		logger:         s.logger.With("tool", req.GetTool(), "reconcile", true),
	}
	return InvokeReconcile(ctx, tool, call)
}

// InvokeReconcile asks tool's reconcile probe about call exactly as Serve
// asks it for weir: bounded by ctx's deadline (a minute when it has none)
// even if the probe ignores ctx, a panic recovered, the answer encoded as
// the wire carries it. A failure is a gRPC status error: Unimplemented for
// a tool without a probe, DeadlineExceeded or Canceled when ctx ended
// first, Internal for a probe that failed, panicked or answered something
// that is not an answer. weir counts every failure as unknown. It is what
// sdktest.Reconcile runs a probe with; a plugin's main needs only Serve.
func InvokeReconcile(ctx context.Context, tool Tool, call *Call) (*wire.ReconcileResponse, error) {
	if tool.Reconcile == nil {
		return nil, status.Errorf(codes.Unimplemented, "tool %s has no reconcile probe", tool.Name)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultReconcileTimeout)
		defer cancel()
	}
	call.Deadline, _ = ctx.Deadline()
	type answer struct {
		a   ReconcileAnswer
		err error
	}
	got := make(chan answer, 1) // the probe never blocks on it, even after the deadline
	go func() {
		defer func() {
			if r := recover(); r != nil {
				call.Logger().Error("reconcile probe panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				got <- answer{err: fmt.Errorf("panicked: %v", r)}
			}
		}()
		a, err := tool.Reconcile(ctx, call)
		got <- answer{a, err}
	}()
	select {
	case g := <-got:
		if g.err != nil {
			if ctx.Err() != nil && (errors.Is(g.err, context.Canceled) || errors.Is(g.err, context.DeadlineExceeded)) {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return nil, status.Errorf(codes.Internal, "reconcile probe of %s: %v", tool.Name, g.err)
		}
		return reconcileResponse(tool.Name, g.a)
	case <-ctx.Done():
		return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(), "reconcile probe of %s did not answer in time: %v", tool.Name, ctx.Err())
	}
}

// reconcileResponse encodes a probe's answer for the wire.
func reconcileResponse(name string, a ReconcileAnswer) (*wire.ReconcileResponse, error) {
	switch a.Outcome {
	case ReconcileHappened:
		res := &wire.ReconcileResponse{Outcome: wire.ReconcileOutcome_RECONCILE_OUTCOME_HAPPENED}
		if a.Output != nil {
			r, err := encodeOutput(a.Output)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "reconcile probe of %s answered output that is not JSON: %v", name, err)
			}
			res.Result = r
		}
		return res, nil
	case ReconcileNotHappened:
		return &wire.ReconcileResponse{Outcome: wire.ReconcileOutcome_RECONCILE_OUTCOME_NOT_HAPPENED}, nil
	case ReconcileUnknown:
		return &wire.ReconcileResponse{Outcome: wire.ReconcileOutcome_RECONCILE_OUTCOME_UNKNOWN}, nil
	}
	return nil, status.Errorf(codes.Internal, "reconcile probe of %s answered %q, not one of %q, %q and %q",
		name, a.Outcome, ReconcileHappened, ReconcileNotHappened, ReconcileUnknown)
}
