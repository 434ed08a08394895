package engine

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/runtime/internal/modelgate"
	"github.com/weirhq/weir/runtime/store"
)

// evModelWait: a model turn waits for its model's limits
// (max_concurrent, requests_per_minute, tokens_per_minute); its task is
// back in the queue, holding no worker slot, until the instant given.
const evModelWait = "model_wait"

// CodeModelRate is the code a provider's rate refusal reaches the engine
// with (the llm plugin's, for a 429): its Retry-After pauses the model's
// admission until then.
const CodeModelRate = "E_MODEL_RATE"

// modelKey names a model in the gate: its chat tool and alias.
func modelKey(tool, alias string) string { return tool + "/" + alias }

// admitTurn admits turn of the agent against its model's limits before
// the turn is sent (docs/design.md §9). Admitted, it returns the permit
// the turn holds until it ends (nil: the model has no limits) and marks
// the call admitted, so the plugin does not count it again. Otherwise it
// gives the task back to the queue until the gate's instant — no slot,
// no lease held while it waits, no try counted — and journals the first
// wait of the turn; ok is false and the step ends.
func (s *stepper) admitTurn(ctx context.Context, a *agentLoop, c *toolCall, body []byte) (p *modelgate.Permit, ok bool) {
	e, node := s.e, a.node
	lim := modelgate.Share(a.model.Limits, e.roll.serving(node.ModelTool))
	if !lim.Any() {
		return nil, true
	}
	turn := c.Index[0]
	ticket := turnTicket(s.run.ID, node.ID, a.visit, turn)
	now := e.clock.Now()
	p, w := e.models.Admit(modelKey(node.ModelTool, node.Model), lim, ticket, estimateTokens(len(body))+a.maxTokens, now)
	if w == nil {
		c.ModelAdmitted = true
		return p, true
	}
	first := s.cont.ModelWait != ticket
	s.cont.ModelWait = ticket
	s.commit(ctx, func(tx store.Tx) error {
		if err := s.releaseTaskTx(tx, now, w.Until, "", ""); err != nil {
			return err
		}
		if !first {
			return nil
		}
		return appendEvent(tx, s.run.ID, evModelWait, s.run.Attempt, node.ID, map[string]any{
			"turn": turn, "model": node.Model, "model_tool": node.ModelTool, "until": w.Until, "reason": w.Why}, now)
	})
	return nil, false
}

// turnTicket names one model turn: the same on every try of it.
func turnTicket(runID, node string, visit, turn int) string {
	return fmt.Sprintf("%s/%s/%d/%d", runID, node, visit, turn)
}

// turnRetries counts the failed tries of one model turn (Ticket) and the
// tokens the provider reported for them.
type turnRetries struct {
	Ticket string           `json:"ticket"`
	Tries  int              `json:"tries"`
	Usage  store.AgentUsage `json:"usage,omitzero"`
}

// turnRetried counts a failed try of the turn that will be tried again:
// a provider's rate refusal with a Retry-After pauses the model's
// admission until then, and what the try reported it used is waste,
// shown with the turn once it answers and in the model's stats.
func (s *stepper) turnRetried(a *agentLoop, c *toolCall, o callOutcome) {
	key := modelKey(a.node.ModelTool, a.node.Model)
	if o.Try.Code == CodeModelRate && !o.RetryAt.IsZero() {
		s.e.models.Pause(key, o.RetryAt)
	}
	ticket := turnTicket(s.run.ID, a.node.ID, a.visit, c.Index[0])
	if r := s.cont.TurnRetries; r == nil || r.Ticket != ticket {
		s.cont.TurnRetries = &turnRetries{Ticket: ticket}
	}
	r := s.cont.TurnRetries
	r.Tries++
	r.Usage.InputTokens += o.Wasted.InputTokens
	r.Usage.OutputTokens += o.Wasted.OutputTokens
	s.e.stats.turnRetried(key, o.Wasted)
}

// takeRetries moves the turn's failed tries onto its journaled record t.
func (s *stepper) takeRetries(t *store.AgentTurn) {
	if r := s.cont.TurnRetries; r != nil && r.Ticket == turnTicket(t.RunID, t.Node, t.Visit, t.Turn) {
		t.Retried, t.RetriedUsage = r.Tries, r.Usage
	}
	s.cont.TurnRetries = nil
}

// serving is how many live daemons of the fleet serve tool, this one
// included: each admits its model turns against that share of the
// model's limits. 1 on a store only this daemon uses.
func (r *fleetRoll) serving(tool string) int {
	n := 1
	if p := r.live.Load(); p != nil {
		for _, d := range *p {
			if _, ok := d.Tools[tool]; ok && d.ID != r.e.holder {
				n++
			}
		}
	}
	return n
}
