// Package tooltest stands in for the plugin host: it runs sdk.Tool values
// in-process, through the SDK's own runner (sdk/sdktest), behind the
// interface the engine calls tools through (engine.Tools: Call with
// runtime/tool's types, and LookupTool). Engine unit tests use it to run
// flows without building or starting plugin processes, on a fake clock.
//
// It lives beside package tool, not in the engine or in internal/testutil,
// because it implements the tool call contract and knows nothing of the
// engine: the engine's own in-package tests can import it without an
// import cycle, and so can any other package that needs tools without
// processes. (internal/testutil cannot hold it: flows imports testutil,
// and this package imports flows for ToolInfo.)
//
// What it reproduces of the host is what the engine relies on: each
// tool's declaration through LookupTool (effect class and probe, cost, input
// schema, the chat contract and a chat tool's models, as the host reads
// them from a manifest); input refused against the schema before the tool runs; a
// per-call deadline (the request's, else DefaultTimeout) on the tool's
// context; cancellation through ctx; calls of a non-idempotent tool made
// one at a time; progress reports delivered to the request's callback
// while the call runs and never after it returns; and failures as
// *tool.Error with the host's kinds, the tool's code and its retry-after;
// and reconcile probes asked through Reconcile (tool.Reconciler).
// What it does not reproduce is what only a process has: crashes,
// restarts, message size limits, a plugin that ignores its cancel.
package tooltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/chat"
	"github.com/weirhq/weir/sdk/sdktest"
	"github.com/weirhq/weir/sdk/wire"
)

// DefaultTimeout is a call's deadline when the request sets none, as the
// host's default timeout is.
const DefaultTimeout = 5 * time.Minute

// Tools runs sdk.Tool values in-process. It is safe for concurrent use.
type Tools struct {
	stateDir string
	tools    map[string]*entry

	mu    sync.Mutex
	calls map[string]int // by tool: calls that reached Run's runner
}

type entry struct {
	tool   sdk.Tool
	info   flows.ToolInfo
	schema *wire.Schema
	// serial is a one-slot semaphore for a non-idempotent tool, as the
	// host holds one: its calls never overlap.
	serial chan struct{}
}

// New returns Tools serving tools, which may belong to several plugins.
// A tool's state directory is stateDir/PLUGIN, as the host's is
// DATA/plugin-state/PLUGIN ("" gives tools no state directory). A
// mistake in a declaration, or a name declared twice, is an error.
func New(stateDir string, tools ...sdk.Tool) (*Tools, error) {
	t := &Tools{stateDir: stateDir, tools: map[string]*entry{}, calls: map[string]int{}}
	for _, st := range tools {
		err := sdk.CheckTools(st)
		if err != nil {
			return nil, fmt.Errorf("tooltest: %w", err)
		}
		if _, dup := t.tools[st.Name]; dup {
			return nil, fmt.Errorf("tooltest: tool %q is declared twice", st.Name)
		}
		class := flows.Effect(st.Class())
		e := &entry{tool: st, info: flows.ToolInfo{Name: st.Name, Idempotent: class != flows.EffectAtMostOnce, Cost: st.Cost,
			InputSchema: []byte(st.InputSchema), Description: st.Description, Effect: class, Reconcile: st.Reconcile != nil,
			Chat: st.Contract == chat.Contract || chat.SpeaksContract(st.InputSchema)}}
		for _, m := range st.Models {
			e.info.Models = append(e.info.Models, flows.ModelInfo{Alias: m.Alias, MaxTokens: int(m.MaxTokens), InputCost: m.InputCost, OutputCost: m.OutputCost})
		}
		if st.OutputSchema != "" {
			e.info.OutputSchema = []byte(st.OutputSchema)
		}
		if e.schema, err = wire.CompileSchema(st.InputSchema); err != nil {
			return nil, fmt.Errorf("tooltest: tool %q: %w", st.Name, err)
		}
		if class == flows.EffectAtMostOnce {
			e.serial = make(chan struct{}, 1)
		}
		t.tools[st.Name] = e
		if stateDir != "" {
			// The host makes each plugin's state directory before it
			// launches the plugin.
			plugin, _, _ := wire.SplitToolName(st.Name)
			if err := os.MkdirAll(filepath.Join(stateDir, plugin), 0o700); err != nil {
				return nil, fmt.Errorf("tooltest: %w", err)
			}
		}
	}
	return t, nil
}

// LookupTool returns what tool name declares, as the host reads it from
// the plugin's manifest.
func (t *Tools) LookupTool(name string) (flows.ToolInfo, bool) {
	e, ok := t.tools[name]
	if !ok {
		return flows.ToolInfo{}, false
	}
	return e.info, true
}

var _ flows.Catalog = (*Tools)(nil)

// Calls reports how many calls of tool name were handed to the tool (a
// call refused before, for its input or its deadline, is not counted).
func (t *Tools) Calls(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[name]
}

// Call makes one call, as the host's Call does: errors are *tool.Error.
func (t *Tools) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	e, ok := t.tools[req.Tool]
	if !ok {
		return nil, &tool.Error{Kind: tool.KindUnknownTool, Tool: req.Tool, Message: "no installed plugin provides this tool"}
	}
	input := req.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	// Refused before the plugin sees it, as the host refuses it.
	if err := e.schema.Validate(input); err != nil {
		return nil, &tool.Error{Kind: tool.KindSchema, Tool: req.Tool, Message: "input refused: " + err.Error()}
	}
	deadline := req.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(DefaultTimeout)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if e.serial != nil {
		select {
		case e.serial <- struct{}{}:
			defer func() { <-e.serial }()
		case <-ctx.Done():
			return nil, stopped(ctx, req.Tool)
		}
	}
	if ctx.Err() != nil {
		return nil, stopped(ctx, req.Tool)
	}
	stateDir := t.pluginStateDir(req.Tool)
	t.mu.Lock()
	t.calls[req.Tool]++
	t.mu.Unlock()
	res, err := sdktest.Call(ctx, e.tool, sdktest.Request{
		Input: string(input), RunID: req.RunID, Node: req.Node, Attempt: req.Attempt,
		IdempotencyKey: req.IdempotencyKey, Deadline: deadline, StateDir: stateDir, OnProgress: req.Progress,
	})
	if err != nil {
		return nil, callError(ctx, req.Tool, err)
	}
	// A call that finished despite a cancellation did happen: its result
	// stands, as with the host.
	return &tool.CallResult{Output: res.Output, Cost: res.Cost, CostReported: res.CostReported}, nil
}

var _ tool.Reconciler = (*Tools)(nil)

// Reconcile asks a tool's reconcile probe, as the host's Reconcile does: a
// tool without one answers tool.Unknown without being asked, and a probe
// that fails is an error (which the engine counts as unknown). The
// deadline is the request's, else DefaultTimeout.
func (t *Tools) Reconcile(ctx context.Context, req tool.ReconcileRequest) (*tool.ReconcileResult, error) {
	e, ok := t.tools[req.Tool]
	if !ok {
		return nil, &tool.Error{Kind: tool.KindUnknownTool, Tool: req.Tool, Message: "no installed plugin provides this tool"}
	}
	if e.tool.Reconcile == nil {
		return &tool.ReconcileResult{Answer: tool.Unknown}, nil
	}
	deadline := req.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(DefaultTimeout)
	}
	r, err := sdktest.Reconcile(ctx, e.tool, sdktest.ReconcileRequest{
		Input: string(req.Input), IdempotencyKey: req.IdempotencyKey, Deadline: deadline, StateDir: t.pluginStateDir(req.Tool),
	})
	if err != nil {
		return nil, &tool.Error{Kind: tool.KindPermanent, Tool: req.Tool, Message: "the reconcile probe failed: " + err.Error()}
	}
	return &tool.ReconcileResult{Answer: tool.Reconciled(r.Outcome), Output: r.Output}, nil
}

// pluginStateDir is the state directory of name's plugin ("" for none).
func (t *Tools) pluginStateDir(name string) string {
	if t.stateDir == "" {
		return ""
	}
	plugin, _, _ := wire.SplitToolName(name)
	return filepath.Join(t.stateDir, plugin)
}

// stopped explains why a call ended before the tool answered.
func stopped(ctx context.Context, name string) *tool.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &tool.Error{Kind: tool.KindDeadline, Tool: name, Message: "deadline exceeded"}
	}
	return &tool.Error{Kind: tool.KindCancelled, Tool: name, Message: "cancelled by the caller"}
}

// callError maps what sdktest returned to the host's error: the same kind
// names, and a tool that reports its own cancellation is told apart by
// why its context ended.
func callError(ctx context.Context, name string, err error) error {
	var se *sdktest.Error
	if !errors.As(err, &se) {
		// A declaration the runner refused: the host would not have
		// loaded such a plugin.
		return &tool.Error{Kind: tool.KindProtocol, Tool: name, Message: err.Error()}
	}
	te := &tool.Error{Tool: name, Message: se.Message, Code: se.Code, RetryAfter: se.RetryAfter}
	switch se.Kind {
	case sdktest.KindSchema:
		te.Kind = tool.KindSchema
		te.Message = "input refused: " + se.Message
	case sdktest.KindRetryable:
		te.Kind = tool.KindRetryable
	case sdktest.KindUnknown:
		te.Kind = tool.KindUnknown
	case sdktest.KindNotSent:
		te.Kind = tool.KindNotSent
	case sdktest.KindCancelled:
		te.Kind = tool.KindCancelled
		// The runner's own deadline timer may fire before ctx's: a
		// deadline that has passed counts as the cause either way.
		if dl, ok := ctx.Deadline(); errors.Is(ctx.Err(), context.DeadlineExceeded) || (ok && !time.Now().Before(dl)) {
			te.Kind = tool.KindDeadline
		}
	default:
		te.Kind = tool.KindPermanent
	}
	return te
}
