package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// flowEntry is one loaded flow version: its IR and the evaluator of its
// sources, re-loaded from the stored source by content hash, never from
// disk (DESIGN §2).
type flowEntry struct {
	flow *flows.Flow
	hash string
	ev   *flows.Evaluator
}

// call evaluates a callable of the flow.
func (fe *flowEntry) call(ref flows.CallableRef, c flows.Context, extra ...any) (any, error) {
	return fe.ev.Call(ref, c, extra...)
}

// validateInput checks a run's input against the flow's declared schema.
func (fe *flowEntry) validateInput(input json.RawMessage) error {
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return err
	}
	return fe.flow.ValidateInput(v)
}

// latestFlow loads the latest registered version of a flow by name.
func (e *Engine) latestFlow(ctx context.Context, name string) (*flowEntry, error) {
	var v *store.FlowVersion
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		v, err = tx.FlowVersionLatest(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocolErr(CodeUnknownFlow, "no flow named %q is registered", name)
	}
	if err != nil {
		return nil, storageErr(err)
	}
	fe, err := e.flowVersion(ctx, v.Name, v.Hash)
	if err != nil {
		return nil, &Error{Code: CodeFlowUnreadable, Message: err.Error(), Class: ClassRun}
	}
	return fe, nil
}

// flowVersion loads a flow version by name and content hash, cached:
// versions are immutable.
func (e *Engine) flowVersion(ctx context.Context, name, hash string) (*flowEntry, error) {
	e.mu.Lock()
	fe := e.flowCache[hash]
	e.mu.Unlock()
	if fe != nil {
		return fe, nil
	}
	var v *store.FlowVersion
	var src *store.Source
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		if v, err = tx.FlowVersionGet(name, hash); err != nil {
			return err
		}
		var f flows.Flow
		if err := json.Unmarshal(v.IR, &f); err != nil {
			return fmt.Errorf("flow %s version %s: IR: %w", v.Name, hash, err)
		}
		src, err = tx.SourceGet(f.SourceHash)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("flow version %s: %w", hash, err)
	}
	var f flows.Flow
	if err := json.Unmarshal(v.IR, &f); err != nil {
		return nil, fmt.Errorf("flow %s version %s: IR: %w", v.Name, hash, err)
	}
	files := make([]flows.File, len(src.Files))
	for i, sf := range src.Files {
		files[i] = flows.File{Path: sf.Path, Src: sf.Src}
	}
	ev, err := flows.NewEvaluator(files)
	if err != nil {
		return nil, fmt.Errorf("flow %s version %s: source: %w", v.Name, hash, err)
	}
	fe = &flowEntry{flow: &f, hash: hash, ev: ev}
	e.mu.Lock()
	e.flowCache[hash] = fe
	e.mu.Unlock()
	return fe, nil
}

// nodeCost is the budget slice a node needs: its declared cost, else its
// tool's declared cost.
func (e *Engine) nodeCost(n *flows.Node) int64 {
	if n.Cost > 0 {
		return n.Cost
	}
	if n.Tool != "" {
		if info, ok := e.tools.LookupTool(n.Tool); ok {
			return info.Cost
		}
	}
	return 0
}

// taskType is the cost of the node a queued task of run runs next, and
// its type for the figures: the node's tool, or its kind.
func (e *Engine) taskType(ctx context.Context, run *store.Run, t *store.Task) (int64, string) {
	fe, err := e.flowVersion(ctx, run.Flow, run.Version)
	if err != nil {
		return 0, "step"
	}
	n := fe.flow.Node(t.Node)
	if n == nil {
		return 0, "step"
	}
	typ := n.Tool
	if typ == "" {
		typ = string(n.Kind)
	}
	return e.nodeCost(n), typ
}
