package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// CodeDiverged is the tool error a replayed call that diverged is
// answered with: the run is stopped there and the divergence reported.
const CodeDiverged = "E_REPLAY_DIVERGED"

// answerer is the replay's engine.Tools: every call is answered from the
// recording by (node, visit, index, try), and nothing else is ever
// called. It is the seam where a daemon's engine calls the plugin host.
type answerer struct {
	catalog  flows.MapCatalog
	calls    map[string][]Call // tries of each logical call, in order
	redacted []pointer
	// sites gives each node's call positions in the sources replayed.
	sites map[string]*flows.Node
	// runOf reads a run of the replay's engine: a call from a child run
	// (a subflow's, a flow fan-out's) is one the recording cannot hold.
	runOf func(ctx context.Context, id string) (*store.Run, error)

	// live, with model set, makes the replay counterfactual (live.go):
	// model turns are asked again of live with model in place of the
	// flow's alias; liveReads lets a read tool the run never called be
	// called for real.
	live      engine.Tools
	model     string
	liveReads bool

	mu       sync.Mutex
	made     map[string]int // tries made so far, by call key
	answered int
	asked    int // model turns asked of live
	first    *Divergence
}

func newAnswerer(rec *Recording) (*answerer, error) {
	ps, err := parsePointers(rec.Redacted)
	if err != nil {
		return nil, err
	}
	a := &answerer{catalog: flows.MapCatalog{}, calls: map[string][]Call{}, redacted: ps, made: map[string]int{}}
	for _, d := range rec.Tools {
		a.catalog[d.Name] = toolInfoOf(d)
	}
	for _, c := range rec.Calls {
		key := callKey(c.Node, c.Visit, c.Index)
		a.calls[key] = append(a.calls[key], c)
	}
	return a, nil
}

// toolInfoOf is a recorded declaration as the engine reads it.
func toolInfoOf(d apitypes.ToolDecl) flows.ToolInfo {
	t := flows.ToolInfo{Name: d.Name, Effect: flows.Effect(d.Effect), Idempotent: d.Idempotent, Cost: d.Cost,
		InputSchema: d.InputSchema, OutputSchema: d.OutputSchema, Description: d.Description, Chat: d.Chat,
		Timeout: time.Duration(d.TimeoutMS) * time.Millisecond, Reconcile: d.Reconcile}
	for _, m := range d.Models {
		t.Models = append(t.Models, flows.ModelInfo{Alias: m.Alias, MaxTokens: m.MaxTokens, InputCost: m.InputCost, OutputCost: m.OutputCost})
	}
	return t
}

// LookupTool answers the recorded declaration. A tool the recording does
// not declare (new code calling a new tool) is declared a read, the class
// registration asks nothing of: the flow registers, and its call is the
// divergence, reported where it is made. Nothing is ever called, so no
// class makes a replay unsafe.
func (a *answerer) LookupTool(name string) (flows.ToolInfo, bool) {
	if t, ok := a.catalog[name]; ok {
		return t, true
	}
	return flows.ToolInfo{Name: name, Idempotent: true, Effect: flows.EffectRead}, true
}

// Call answers one try from the recording, or reports the first
// divergence and answers E_REPLAY_DIVERGED.
func (a *answerer) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	if a.divergence() != nil {
		// The run is being cancelled: nothing more is answered, or asked
		// of a live model.
		return nil, &tool.Error{Kind: tool.KindPermanent, Tool: req.Tool, Code: CodeDiverged, Message: "the replay diverged before this call"}
	}
	if d := a.unrecorded(ctx, req); d != nil {
		return nil, a.diverge(d)
	}
	visit, index, ok := parseKey(req)
	if !ok {
		return nil, a.diverge(&Divergence{Kind: KindLacks, Node: req.Node, Message: fmt.Sprintf("node %s calls %s with an idempotency key the replay cannot place (%s)", req.Node, req.Tool, textbound.Quote(req.IdempotencyKey))})
	}
	if a.live != nil && len(index) == 1 && a.catalog[req.Tool].Chat {
		return a.askLive(ctx, req)
	}
	key := callKey(req.Node, visit, index)
	a.mu.Lock()
	a.made[key]++
	try := a.made[key]
	tries := a.calls[key]
	a.mu.Unlock()
	where := a.callName(req.Node, visit, index)
	if a.live != nil && len(index) == 2 && (try > len(tries) || tries[try-1].Tool != req.Tool || a.argsDiffer(tries[try-1], req, where, visit) != nil) {
		return a.newCall(ctx, req, where, visit)
	}
	if try > len(tries) {
		msg := fmt.Sprintf("%s calls %s, and the recording holds no answer for it: the run never made this call", where, req.Tool)
		if n := a.sites[req.Node]; n != nil && n.Kind == flows.KindFanout {
			msg = fmt.Sprintf("%s calls %s for an item the run never ended (stopped, late or never admitted): the recording holds no answer for it", where, req.Tool)
		}
		if len(tries) > 0 {
			msg = fmt.Sprintf("%s makes try %d of its call of %s, and the run made only %d", where, try, req.Tool, len(tries))
		}
		return nil, a.diverge(&Divergence{Kind: KindLacks, Node: req.Node, Visit: visit, Pos: a.pos(req.Node, "tool"), Message: msg})
	}
	rec := tries[try-1]
	if rec.Tool != "" && rec.Tool != req.Tool {
		return nil, a.diverge(&Divergence{Kind: KindTool, Node: req.Node, Visit: visit, Pos: a.pos(req.Node, "tool"),
			Message: fmt.Sprintf("%s calls %s where the run called %s", where, req.Tool, rec.Tool)})
	}
	if d := a.argsDiffer(rec, req, where, visit); d != nil {
		return nil, a.diverge(d)
	}
	a.mu.Lock()
	a.answered++
	a.mu.Unlock()
	if rec.Error != nil {
		return nil, &tool.Error{Kind: tool.Kind(rec.Error.Kind), Tool: req.Tool, Code: rec.Error.Code, Message: rec.Error.Message}
	}
	out := rec.Output
	if len(out) == 0 {
		out = []byte("null")
	}
	return &tool.CallResult{Output: out, Cost: rec.Cost, CostReported: true}, nil
}

// unrecorded is the divergence of a call from work a recording does not
// hold: a child run's.
func (a *answerer) unrecorded(ctx context.Context, req tool.CallRequest) *Divergence {
	if a.runOf != nil {
		if run, err := a.runOf(ctx, req.RunID); err == nil && run.ParentRunID != "" {
			return &Divergence{Kind: KindLacks, Node: run.ParentNode, Pos: a.pos(run.ParentNode, ""),
				Message: fmt.Sprintf("node %s's child run (flow %s) calls %s: a recording holds one run, not its children's calls", run.ParentNode, run.Flow, req.Tool)}
		}
	}
	return nil
}

// argsDiffer is the divergence of a call whose arguments are not the
// recorded ones (a model turn's request: not the recorded digest).
func (a *answerer) argsDiffer(rec Call, req tool.CallRequest, where string, visit int) *Divergence {
	switch {
	case rec.ArgsSHA256 != "":
		h := sha256.Sum256(req.Input)
		if got := hex.EncodeToString(h[:]); got != rec.ArgsSHA256 {
			return &Divergence{Kind: KindArgs, Node: req.Node, Visit: visit, Pos: a.pos(req.Node, ""),
				Message: fmt.Sprintf("%s asks the model %s something else than the run did (request sha256 %s, recorded %s): the prompt, the tools offered or the turns before changed", where, req.Tool, short(got), short(rec.ArgsSHA256))}
		}
	case rec.Args != nil:
		now := blankAll(req.Input, a.redacted)
		if !canonicalEqual(now, rec.Args) && !(len(rec.Index) == 2 && canonicalEqual(now, wrapped(rec.Args))) {
			return &Divergence{Kind: KindArgs, Node: req.Node, Visit: visit, Pos: a.pos(req.Node, "args"),
				Message:  fmt.Sprintf("%s calls %s with other arguments than the run did", where, req.Tool),
				Recorded: textbound.Quote(string(orEmpty(rec.Args))), Replayed: textbound.Quote(string(orEmpty(now)))}
		}
	}
	return nil
}

// diverge keeps the first divergence and answers the call with it.
func (a *answerer) diverge(d *Divergence) error {
	a.mu.Lock()
	if a.first == nil {
		a.first = d
	}
	a.mu.Unlock()
	return &tool.Error{Kind: tool.KindPermanent, Code: CodeDiverged, Message: d.Message}
}

// divergence is the first divergence a call met, if any.
func (a *answerer) divergence() *Divergence {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first
}

func (a *answerer) pos(node, param string) string { return posOf(a.sites, node, param) }

// posOf is where node's param is written in the sources replayed
// (node's call when param is "" or not written), "" for a node they lack.
func posOf(sites map[string]*flows.Node, node, param string) string {
	n := sites[node]
	if n == nil {
		return ""
	}
	if param == "" {
		return n.Pos.String()
	}
	return n.ArgPos(param).String()
}

// parseKey reads the visit and index of a call from its idempotency key
// (RUN/NODE/VISIT[/INDEX...]), the engine's one spelling of a call's
// place.
func parseKey(req tool.CallRequest) (visit int, index []int, ok bool) {
	rest, found := strings.CutPrefix(req.IdempotencyKey, req.RunID+"/"+req.Node+"/")
	if !found {
		return 0, nil, false
	}
	parts := strings.Split(rest, "/")
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return 0, nil, false
		}
		nums[i] = n
	}
	return nums[0], nums[1:], true
}

// callName names a call for a person: the node's visit, and a fan-out's
// item or an agent's turn and call.
func (a *answerer) callName(node string, visit int, index []int) string {
	s := fmt.Sprintf("node %s (visit %d", node, visit)
	switch {
	case len(index) == 1 && a.sites[node] != nil && a.sites[node].Kind == flows.KindFanout:
		s += fmt.Sprintf(", item %d", index[0])
	case len(index) == 1:
		s += fmt.Sprintf(", turn %d", index[0])
	case len(index) == 2:
		s += fmt.Sprintf(", turn %d, call %d", index[0], index[1])
	}
	return s + ")"
}
