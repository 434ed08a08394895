package script

import (
	"context"

	"github.com/weirhq/weir/flows"
)

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
func (l Local) Analyze(_ context.Context, req flows.AnalyzeRequest) (*flows.Module, flows.Diagnostics, error) {
	loader := l.Loader
	if req.OnRun != nil {
		loader.OnRun = req.OnRun
	}
	return loader.analyze(req.Files, req.Tools, req.Lookup, req.Full)
}

// Call implements Scripts.
func (l Local) Call(ctx context.Context, src flows.Sources, c flows.Context, calls []flows.Call) ([]flows.CallResult, error) {
	var ev *Evaluator
	var err error
	if l.Cache != nil {
		ev, err = l.Cache.Evaluator(ctx, src.Hash, src.Load)
	} else {
		var files []flows.File
		if files, err = src.Load(ctx); err == nil {
			ev, err = l.Loader.NewEvaluator(files)
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]flows.CallResult, len(calls))
	for i, call := range calls {
		out[i].Value, out[i].Err = ev.Call(call.Ref, c, call.Args...)
	}
	return out, nil
}
