package flows

import "context"

// Scripts evaluates flow scripts for the runtime: loading and checking files
// at registration (Analyze) and evaluating callables at run time (Call).
// It is the boundary a sandbox implements: Local evaluates in this process,
// runtime/sandbox in worker processes under OS limits, so that a script
// that exhausts memory or overflows a stack kills only its evaluation. A
// second flow language implements the same two methods.
type Scripts interface {
	// Analyze loads req.Files and checks them as Loader.Load does, and
	// with req.Full as Registry.Check does. The error is a failure of a
	// lookup, not a problem of the scripts: those are diagnostics, a
	// script limit (E_SCRIPT_LIMIT) included.
	Analyze(ctx context.Context, req AnalyzeRequest) (*Module, Diagnostics, error)
	// Call evaluates calls, in order, against one set of sources and one
	// read-only ctx: every callable one step needs, in one round trip.
	// Each result has its own error (a *CallError); the error returned is
	// a failure to evaluate at all (sources that do not load, a worker
	// that died: a *LimitError when a limit killed it).
	Call(ctx context.Context, src Sources, c Context, calls []Call) ([]CallResult, error)
}

// AnalyzeRequest is what Scripts.Analyze loads and checks against.
type AnalyzeRequest struct {
	Files []File
	// Tools resolves tools (nil: none resolves) when Full.
	Tools Catalog
	// Lookup resolves called flows to their latest registered version
	// ((nil, nil) when none); nil: only the files' own flows resolve.
	Lookup func(name string) (*Flow, error)
	// Full adds the checks that need Tools and Lookup.
	Full bool
	// OnRun, if set, is called with each file's path before its script
	// runs (Loader.OnRun).
	OnRun func(path string)
}

// Sources names the sources of a flow version by content hash; Load
// returns them when the evaluator does not have them yet.
type Sources struct {
	Hash string
	Load func(context.Context) ([]File, error)
}

// Call is one callable evaluation: its reference and the arguments after
// ctx (see Evaluator.Call).
type Call struct {
	Ref  CallableRef
	Args []any
}

// CallResult is the value of one Call, or its error.
type CallResult struct {
	Value any
	Err   error
}
