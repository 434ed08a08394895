package flows

import (
	"context"
	"encoding/json"
	"fmt"
)

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

// Local is Scripts in this process: the loader's limits and an evaluator
// cache. It bounds steps and nesting but not memory or time; use it where
// the scripts are trusted (tests, an embedder's own flows) or inside a
// sandbox worker.
type Local struct {
	Loader Loader
	// Cache holds the evaluators (nil: Call builds one per call).
	Cache *Cache
}

// Analyze implements Scripts.
func (l Local) Analyze(_ context.Context, req AnalyzeRequest) (*Module, Diagnostics, error) {
	loader := l.Loader
	if req.OnRun != nil {
		loader.OnRun = req.OnRun
	}
	return loader.analyze(req.Files, req.Tools, req.Lookup, req.Full)
}

// Call implements Scripts.
func (l Local) Call(ctx context.Context, src Sources, c Context, calls []Call) ([]CallResult, error) {
	var ev *Evaluator
	var err error
	if l.Cache != nil {
		ev, err = l.Cache.Evaluator(ctx, src.Hash, src.Load)
	} else {
		var files []File
		if files, err = src.Load(ctx); err == nil {
			ev, err = l.Loader.NewEvaluator(files)
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]CallResult, len(calls))
	for i, call := range calls {
		out[i].Value, out[i].Err = ev.Call(call.Ref, c, call.Args...)
	}
	return out, nil
}

// moduleJSON is a Module as it crosses a process boundary: the files once,
// each flow's sources by path.
type moduleJSON struct {
	Files   []File              `json:"files"`
	Flows   []*Flow             `json:"flows"`
	Sources map[string][]string `json:"sources"`
	Depth   map[string]int      `json:"depth,omitempty"`
}

// MarshalJSON encodes the module's files, flows (as their IR), source
// closures and computed depths.
func (m *Module) MarshalJSON() ([]byte, error) {
	w := moduleJSON{Files: m.Files, Flows: m.Flows, Sources: map[string][]string{}, Depth: m.depth}
	for name, files := range m.sources {
		paths := make([]string, len(files))
		for i, f := range files {
			paths[i] = f.Path
		}
		w.Sources[name] = paths
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (m *Module) UnmarshalJSON(b []byte) error {
	var w moduleJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	byPath := make(map[string]File, len(w.Files))
	for _, f := range w.Files {
		byPath[f.Path] = f
	}
	*m = Module{Files: w.Files, Flows: w.Flows, byName: map[string]*Flow{}, sources: map[string][]File{}, depth: w.Depth}
	for _, f := range w.Flows {
		m.byName[f.Name] = f
	}
	for name, paths := range w.Sources {
		files := make([]File, len(paths))
		for i, p := range paths {
			f, ok := byPath[p]
			if !ok {
				return fmt.Errorf("module: flow %s needs %s, which is not among its files", name, p)
			}
			files[i] = f
		}
		m.sources[name] = files
	}
	return nil
}
