package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/store"
)

// flowEntry is one loaded flow version: its IR, from the engine's
// script.Cache (bounded by Config.FlowCacheBytes), and its sources, which
// the engine's Scripts evaluates callables of, re-loaded from the store by
// content hash, never from disk (docs/design.md §2). An entry is built per
// use (one per step).
type flowEntry struct {
	flow    *flows.Flow
	hash    string
	scripts flows.Scripts
	src     flows.Sources
	// limit is the first script limit a callable of this entry hit: the
	// step fails its run with E_SCRIPT_LIMIT whatever wire the callable's
	// node has (scriptLimitError).
	limit error
}

// call evaluates a callable of the flow; ctx carries the run's owner,
// whose share of the sandbox the evaluation takes (runtime/internal/owner).
func (fe *flowEntry) call(ctx context.Context, ref flows.CallableRef, c flows.Context, extra ...any) (any, error) {
	res, err := fe.callBatch(ctx, c, []flows.Call{{Ref: ref, Args: extra}})
	if err != nil {
		return nil, err
	}
	return res[0].Value, res[0].Err
}

// callBatch evaluates calls against one ctx: the projections among them
// natively (flows.Proj, proven at registration to only project ctx), the
// rest in one round trip to the engine's Scripts (a sandbox worker). A
// projection whose value only the script can give (a missing key, say)
// goes with the rest, so its error is the script's.
func (fe *flowEntry) callBatch(ctx context.Context, c flows.Context, calls []flows.Call) ([]flows.CallResult, error) {
	out := make([]flows.CallResult, len(calls))
	var rest []flows.Call
	var at []int
	for i, call := range calls {
		if p := fe.flow.Projections[call.Ref.String()]; p != nil && len(call.Args) == 0 {
			if v, ok := p.Eval(c); ok {
				out[i].Value = v
				continue
			}
		}
		rest, at = append(rest, call), append(at, i)
	}
	if len(rest) == 0 {
		return out, nil
	}
	res, err := fe.scripts.Call(ctx, fe.src, c, rest)
	if err != nil {
		noteEvalCut(ctx)
		fe.noteLimit(err)
		return nil, err
	}
	for j, r := range res {
		fe.noteLimit(r.Err)
		out[at[j]] = r
	}
	return out, nil
}

func (fe *flowEntry) noteLimit(err error) {
	if fe.limit == nil && errors.Is(err, flows.ErrScriptLimit) {
		fe.limit = err
	}
}

// scriptLimitError is the run's error when a callable of the step hit a
// script limit, else nil. A limit is not the node's failure for its error
// wire to handle: the script itself cannot run, and evaluating it again
// would cost another worker, so the run fails (docs/design.md §2.6).
func (fe *flowEntry) scriptLimitError() *store.RunError {
	if fe == nil || fe.limit == nil {
		return nil
	}
	msg := fe.limit.Error()
	if !strings.Contains(msg, "script limit (") {
		msg = fmt.Sprintf("script limit (%s): %s", flows.LimitOf(fe.limit), msg)
	}
	return &store.RunError{Code: CodeScriptLimit, Message: msg}
}

// flowBook is the engine's catalog of registered flow versions: it loads
// them through the flow cache (docs/design.md §2.5), validates what users
// send against the schemas they declare, and prices their nodes for the
// budget.
type flowBook struct {
	st        store.Store
	cache     *script.Cache
	scripts   flows.Scripts // evaluates the callables of loaded versions
	tools     Tools         // their declared costs
	log       hclog.Logger
	cfg       *atomic.Pointer[Config] // the engine's, swapped by Reload
	admission *admissionGate          // answers failed reads
}

// validateInput checks a run's input against fe's declared schema, where
// validateSchema decides.
func (b *flowBook) validateInput(ctx context.Context, fe *flowEntry, input json.RawMessage) error {
	if fe.flow.InputWork(len(input)) <= flows.MaxInProcessWork {
		var v any
		if err := json.Unmarshal(input, &v); err != nil {
			return err
		}
		return fe.flow.ValidateInput(v)
	}
	err := b.validateCostly(ctx, fe.flow.Input, input)
	if flows.IsInvalidValue(err) {
		return &flows.InputError{Flow: fe.flow.Name, Msg: err.Error()}
	}
	return err
}

// validateSchema checks user data against a user's schema: in this
// process when its estimated work is small (flows.MaxInProcessWork),
// else in a sandbox worker (flows.Validator) whose deadline can end it.
// The data's refusal is a *flows.InvalidValueError, and so is a worker
// that ran past the sandbox's limits or died validating it (the schema
// and the data are the user's): such a validation is never run again in
// this process. Only a caller that gave up (a drain, a client gone) gets
// its context's error.
func (b *flowBook) validateSchema(ctx context.Context, schema, value json.RawMessage) error {
	if flows.ValidationWork(schema, len(value)) <= flows.MaxInProcessWork {
		return flows.ValidateJSON(schema, value)
	}
	return b.validateCostly(ctx, schema, value)
}

// validateCostly is validateSchema for a validation whose estimated work
// passed flows.MaxInProcessWork (the caller estimated it): in a sandbox
// worker when the engine has one.
func (b *flowBook) validateCostly(ctx context.Context, schema, value json.RawMessage) error {
	v, ok := b.cfg.Load().Scripts.(flows.Validator)
	if !ok {
		return flows.ValidateJSON(schema, value)
	}
	err := v.ValidateSchema(ctx, schema, value)
	switch {
	case err == nil || flows.IsInvalidValue(err):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case flows.LimitOf(err) != "":
		return &flows.InvalidValueError{Msg: "validating it against the schema in the sandbox went past the sandbox's limits: " + err.Error()}
	}
	b.log.Warn("a sandbox worker failed validating a value", "error", err)
	return &flows.InvalidValueError{Msg: "validating it against the schema in the sandbox failed (" + err.Error() + "): the schema and the value together cost more than the sandbox allows"}
}

// latest loads the latest registered version of a flow by name.
func (b *flowBook) latest(ctx context.Context, name string) (*flowEntry, error) {
	var v *store.FlowVersion
	err := b.st.View(ctx, func(tx store.Tx) error {
		var err error
		v, err = tx.FlowVersionLatest(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocolErr(CodeUnknownFlow, "no flow named %q is registered%s", textbound.Quote(name), b.nameHint(ctx, name))
	}
	if err != nil {
		return nil, b.admission.readFailed(err)
	}
	fe, err := b.version(ctx, v.Name, v.Hash)
	if err != nil {
		return nil, &Error{Code: CodeFlowUnreadable, Message: err.Error(), Class: ClassRun}
	}
	return fe, nil
}

// MaxSuggestedFlowNames bounds the registered flow names an unknown
// flow's refusal compares the name with to suggest the closest one: the
// first this many, in name order.
const MaxSuggestedFlowNames = 10000

// nameHint is " (did you mean "NAME"?)" for the registered flow
// closest to name, as registration suggests a node or a tool
// (flows.Suggest), or "" when none is close or the names cannot be read:
// the refusal stands either way.
func (b *flowBook) nameHint(ctx context.Context, name string) string {
	var names []string
	if err := b.st.View(ctx, func(tx store.Tx) error {
		var err error
		names, err = tx.FlowNameList(store.FlowNameListParams{Limit: MaxSuggestedFlowNames})
		return err
	}); err != nil {
		return ""
	}
	if s := flows.Suggest(name, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// version loads a flow version by name and content hash through the
// flow cache: its IR is decoded once, and its evaluator is shared with
// every version of the same sources.
func (b *flowBook) version(ctx context.Context, name, hash string) (*flowEntry, error) {
	f, err := b.cache.Flow(ctx, hash, func(ctx context.Context) ([]byte, error) {
		var ir []byte
		err := b.st.View(ctx, func(tx store.Tx) error {
			v, err := tx.FlowVersionGet(name, hash)
			if err != nil {
				return err
			}
			ir = v.IR
			return nil
		})
		return ir, err
	})
	if err != nil {
		return nil, fmt.Errorf("flow %s version %s: %w", name, hash, err)
	}
	if f.Name != name {
		return nil, fmt.Errorf("flow %s version %s: the version is flow %s's", name, hash, f.Name)
	}
	src := b.sources(f.SourceHash, func(err error) error { return fmt.Errorf("flow %s version %s: source: %w", name, hash, err) })
	return &flowEntry{flow: f, hash: hash, scripts: b.scripts, src: src}, nil
}

// sources names the stored source bundle hash for an evaluator, read
// from the store when the evaluator does not have it; wrap says whose
// sources a failed read was.
func (b *flowBook) sources(hash string, wrap func(error) error) flows.Sources {
	return flows.Sources{Hash: hash, Load: func(ctx context.Context) ([]flows.File, error) {
		var src *store.Source
		err := b.st.View(ctx, func(tx store.Tx) error {
			var err error
			src, err = tx.SourceGet(hash)
			return err
		})
		if err != nil {
			return nil, wrap(err)
		}
		files := make([]flows.File, len(src.Files))
		for i, sf := range src.Files {
			files[i] = flows.File{Path: sf.Path, Src: sf.Src}
		}
		return files, nil
	}}
}

// nodeCost is the budget slice a node's step needs: its declared cost,
// else its tool's declared cost. A fan-out's step calls nothing: each of
// its children reserves its own (itemCost, or a child run's escrow), so
// the step holding a child's cost while it admits them would refuse
// children the budget can pay for.
func (b *flowBook) nodeCost(n *flows.Node) int64 {
	if n.Kind == flows.KindFanout {
		return 0
	}
	return b.itemCost(n)
}

// itemCost is the budget slice of one call of the node: its declared
// cost, else its tool's declared cost (per child for a tool fan-out).
func (b *flowBook) itemCost(n *flows.Node) int64 {
	if n.Cost > 0 {
		return n.Cost
	}
	if n.Tool != "" {
		if info, ok := b.tools.LookupTool(n.Tool); ok {
			return info.Cost
		}
	}
	return 0
}

// taskType is the cost of the node a queued task of run runs next, and
// its type for the figures: the node's tool, or its kind.
func (b *flowBook) taskType(ctx context.Context, run *store.Run, t *store.Task) (int64, string) {
	if t.Kind == store.TaskAgentCall {
		// An agent's call is admitted for its tool's declared cost.
		info, _ := b.tools.LookupTool(t.Tool)
		return info.Cost, t.Tool
	}
	fe, err := b.version(ctx, run.Flow, run.Version)
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
	if t.Kind == store.TaskItem {
		return b.itemCost(n), typ
	}
	return b.nodeCost(n), typ
}

// validateAgentAnswer checks an agent's final answer against the node's
// output schema, where validateSchema decides; the error is told to the
// model.
func (b *flowBook) validateAgentAnswer(ctx context.Context, schema, answer []byte) error {
	if !json.Valid(answer) {
		return flows.ValidateAgentAnswer(schema, answer) // says it is not JSON
	}
	return b.validateSchema(ctx, schema, answer)
}
