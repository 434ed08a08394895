package replay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// A counterfactual replay (Options.Model) keeps the run's tool answers
// and asks its agents' model turns again, of a live model, to see what
// another model (or prompt) would decide. A tool call the new turns ask
// for that the run made the same way is answered from the recording; a
// read tool it never made is called for real only with LiveReads; an
// idempotent or at-most-once one is never called: the replay stops there
// and says so.

// askLive asks a model turn of the live model tool, with the
// counterfactual model in place of the flow's.
func (a *answerer) askLive(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(req.Input, &body); err != nil {
		return nil, &tool.Error{Kind: tool.KindSchema, Tool: req.Tool, Message: "the chat request is not a JSON object"}
	}
	model, _ := json.Marshal(a.model)
	body["model"] = model
	in, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req.Input = in
	a.mu.Lock()
	a.asked++
	a.mu.Unlock()
	return a.live.Call(ctx, req)
}

// newCall is a call of an agent's new turn that the run did not make so:
// a read is made for real with liveReads, anything else stops the replay.
func (a *answerer) newCall(ctx context.Context, req tool.CallRequest, where string, visit int) (*tool.CallResult, error) {
	info := a.catalog[req.Tool]
	if _, known := a.catalog[req.Tool]; known && a.liveReads && info.Class() == flows.EffectRead {
		return a.live.Call(ctx, req)
	}
	why := fmt.Sprintf("it is %s: an idempotent or at-most-once tool is never called in a replay", info.Class())
	if info.Class() == flows.EffectRead {
		why = "it is a read, called for real only with --live-reads"
	}
	return nil, a.diverge(&Divergence{Kind: KindLacks, Node: req.Node, Visit: visit, Pos: a.pos(req.Node, ""),
		Message:  fmt.Sprintf("%s: the new model asks for %s, which the run never called so; %s. The replay stops here", where, req.Tool, why),
		Replayed: textbound.Quote(string(req.Input))})
}

// wrapped is args as a model gives a tool whose input is not an object
// (the agent offers it under "input"): the value under "input".
func wrapped(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || len(m) != 1 || m["input"] == nil {
		return nil
	}
	return m["input"]
}

// TurnSide is one side of a model turn in a counterfactual's diff: the
// calls it asked for, its text, its tokens and cost.
type TurnSide struct {
	Calls        []string `json:"calls,omitempty"` // TOOL ARGS, in order
	Text         string   `json:"text,omitempty"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	Cost         int64    `json:"cost"`
}

// TurnDiff is one model turn, as the run took it and as the
// counterfactual did (nil: that side has no such turn).
type TurnDiff struct {
	Node     string    `json:"node"`
	Visit    int       `json:"visit"`
	Turn     int       `json:"turn"`
	Same     bool      `json:"same"`
	Recorded *TurnSide `json:"recorded,omitempty"`
	Replayed *TurnSide `json:"replayed,omitempty"`
}

// turnDiffs pairs the recorded turns with the replay's, by node, visit
// and turn, in the recording's order then the replay's new ones.
func turnDiffs(recorded, replayed []json.RawMessage) []TurnDiff {
	type place struct {
		node        string
		visit, turn int
	}
	var order []place
	sides := map[place]*TurnDiff{}
	add := func(raw json.RawMessage, replay bool) {
		var t store.AgentTurn
		if json.Unmarshal(raw, &t) != nil {
			return
		}
		p := place{t.Node, t.Visit, t.Turn}
		d := sides[p]
		if d == nil {
			d = &TurnDiff{Node: t.Node, Visit: t.Visit, Turn: t.Turn}
			sides[p] = d
			order = append(order, p)
		}
		side := sideOf(t)
		if replay {
			d.Replayed = side
		} else {
			d.Recorded = side
		}
	}
	for _, r := range recorded {
		add(r, false)
	}
	for _, r := range replayed {
		add(r, true)
	}
	out := make([]TurnDiff, 0, len(order))
	for _, p := range order {
		d := sides[p]
		d.Same = d.Recorded != nil && d.Replayed != nil && sameCalls(d.Recorded.Calls, d.Replayed.Calls) && d.Recorded.Text == d.Replayed.Text
		out = append(out, *d)
	}
	return out
}

func sideOf(t store.AgentTurn) *TurnSide {
	msg := messageOf(t.Response)
	s := &TurnSide{Text: textbound.Quote(msg.Content), InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens, Cost: t.Cost}
	if msg.Content == "" {
		s.Text = ""
	}
	for _, c := range msg.ToolCalls {
		args, err := canonical(orEmpty(c.Arguments))
		if err != nil {
			args = c.Arguments
		}
		s.Calls = append(s.Calls, c.Name+" "+textbound.Quote(string(args)))
	}
	return s
}

func sameCalls(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
