package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/internal/ledger"
	"github.com/weirhq/weir/runtime/internal/transcript"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// An agent node (docs/design.md §9) runs as durable steps in its run's worker.
// Each model turn is one call of the node's model tool through callTool,
// with the idempotency key run/node/visit/turn, and its answer is
// journaled as a store.AgentTurn before any tool call it asks for is
// dispatched. Each requested call then goes through callTool with the
// index [turn, call]; its end is written into the turn record and goes
// back to the model as the call's result, errors included. Replay reads
// the journaled turns: a turn already answered is never asked again, and a
// non-idempotent call is never run twice (callTool's started record makes
// an interrupted one E_OUTCOME_UNKNOWN, which the model is told).

// Codes an agent node fails with.
const (
	CodeMaxTurns       = "E_MAX_TURNS"        // the agent used max_turns without a final answer
	CodeModelResponse  = "E_MODEL_RESPONSE"   // the model tool's output is not a chat response
	CodeModelStopped   = "E_MODEL_STOPPED"    // the model ended without an answer (refused, or cut short)
	CodePromptTooLarge = "E_PROMPT_TOO_LARGE" // a turn's request exceeds maxAgentRequestBytes
	CodeAgentTurns     = "E_AGENT_TURNS"      // the journaled turns cannot be read
	CodeAgentTimeout   = "E_AGENT_TIMEOUT"    // the loop ran longer than the node's timeout
	CodeChatRequest    = "E_CHAT_REQUEST"     // the next turn's request is not one the chat contract accepts
	CodeAgentRunaway   = "E_AGENT_RUNAWAY"    // the runaway guard tripped on a node that says on_runaway = "fail", or a person rejected its runaway wait
)

const (
	// maxAgentRequestBytes bounds one model turn's request: the plugin
	// host's default message limit, so a conversation that outgrows it is
	// refused by the engine with its own code before the wire refuses it.
	maxAgentRequestBytes = 4 << 20
	// defaultAgentMaxTokens bounds a turn's output when neither the node
	// nor the model declares max_tokens, so the worst case reserved from
	// the budget is a number.
	defaultAgentMaxTokens = 4096
	// agentTurnRetries is how many times a model turn's retryable error
	// (rate limit, provider unavailable) is retried, with the engine's
	// backoff, before the node fails.
	agentTurnRetries = 3
	// maxAgentToolCalls bounds the tool calls one turn may ask for (the
	// chat contract's limit): a turn record holds them all.
	maxAgentToolCalls = 128
	// maxAgentCallsTogether bounds how many idempotent calls of one turn
	// run at once; the rest wait for one of them to end.
	maxAgentCallsTogether = 8
	// tokenPriceUnit: model prices are budget units per million tokens.
	tokenPriceUnit = 1_000_000
)

// evAgentTurn records a journaled model turn in the timeline: the model,
// the tokens, the cost and the tools it asked for.
const evAgentTurn = "agent_turn"

// agentLoop is one visit of an agent node being worked: what every turn's
// request is built from, and the turns journaled so far.
type agentLoop struct {
	node   *flows.Node
	visit  int
	system string
	prompt string
	tools  []chat.ToolDef
	// model is the model tool's model alias (prices, output limit);
	// declaredCost the model tool's per-call cost, used when it has no
	// prices.
	model        flows.ModelInfo
	declaredCost int64
	maxTokens    int64
	turns        []*store.AgentTurn
	// memo holds what the visit's final turns add up to (agentmemo.go):
	// its final turns are the first of turns.
	memo *visitMemo
	// started is when the loop began (its first turn), for the node's
	// timeout, which bounds the whole loop.
	started time.Time
}

// spent is what the visit's turns and calls were charged so far.
func (a *agentLoop) spent() int64 {
	var n int64
	from := 0
	if a.memo != nil {
		n, from = a.memo.spent, len(a.memo.final)
	}
	for _, t := range a.turns[from:] {
		n += turnSpent(t)
	}
	return n
}

// usage is the tokens the visit's turns used so far.
func (a *agentLoop) usage() store.AgentUsage {
	var u store.AgentUsage
	from := 0
	if a.memo != nil {
		u, from = a.memo.usage, len(a.memo.final)
	}
	for _, t := range a.turns[from:] {
		u.InputTokens += t.Usage.InputTokens
		u.OutputTokens += t.Usage.OutputTokens
	}
	return u
}

// turnSpent is what turn t and its calls were charged.
func turnSpent(t *store.AgentTurn) int64 {
	n := t.Cost
	for _, c := range t.Calls {
		n += c.Cost
	}
	return n
}

// callTimeout is how long the next call may take: what is left of the
// node's timeout, or the default tool timeout; ok is false once the
// timeout has passed.
func (a *agentLoop) callTimeout(now time.Time) (time.Duration, bool) {
	if a.node.Timeout <= 0 {
		return 0, true
	}
	left := a.started.Add(a.node.Timeout).Sub(now)
	return left, left > 0
}

// agentNode runs an agent node's loop from its last journaled turn until
// the model gives a final answer (the node's result), the turns run out
// (E_MAX_TURNS) or the budget cannot cover the next turn
// (E_BUDGET_EXHAUSTED). It reports whether the run goes on in this worker.
func (s *stepper) agentNode(ctx context.Context, node *flows.Node) bool {
	a, rerr := s.loadAgent(ctx, node)
	if rerr != nil {
		return s.nodeFailed(ctx, node, rerr)
	}
	if a == nil {
		return false // interrupted while reading
	}
	defer func() {
		// Kept for the visit's next step while the run stays on it.
		if s.cont.Node == node.ID && s.cont.Visits[node.ID] == a.visit {
			a.memo.advance(a.turns)
			s.e.agents.give(a.memo)
		}
	}()
	for {
		if s.cancelRequested() {
			s.finish(ctx, store.PhaseCancelled, nil, nil)
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		// The timeout is checked before each call (agentTurn, agentCalls),
		// not here: an answer that came in time is taken.
		var loop, more bool
		n := len(a.turns)
		var last *store.AgentTurn
		if n > 0 {
			last = a.turns[n-1]
		}
		switch {
		case last != nil && len(last.Calls) == 0 && last.Correction == "":
			loop, more = s.agentAnswer(ctx, a, last)
		case last != nil && pendingCalls(last) > 0 && n >= node.MaxTurns:
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeMaxTurns,
				Message: fmt.Sprintf("agent %s used its %d turns; its last turn asked for %d more tool calls, which were not run", node.ID, node.MaxTurns, pendingCalls(last))})
		case last != nil && pendingCalls(last) > 0:
			loop, more = s.agentCalls(ctx, a, last)
		case n >= node.MaxTurns:
			return s.nodeFailed(ctx, node, &store.RunError{Code: CodeMaxTurns,
				Message: fmt.Sprintf("agent %s used its %d turns without a final answer", node.ID, node.MaxTurns)})
		default:
			// The runaway guard looks at the calls journaled so far before
			// the model is asked again.
			if loop, more = s.runawayGuard(ctx, a); loop {
				loop, more = s.agentTurn(ctx, a)
			}
		}
		if !loop {
			return more
		}
	}
}

// loadAgent evaluates the node's prompt and system, resolves its model
// and tools in the catalog and reads the visit's journaled turns. A nil
// loop with a nil error means the context ended.
func (s *stepper) loadAgent(ctx context.Context, node *flows.Node) (*agentLoop, *store.RunError) {
	e := s.e
	a := &agentLoop{node: node, visit: s.cont.Visits[node.ID]}
	var err error
	if a.prompt, err = s.callString(node.Prompt, "prompt"); err != nil {
		return nil, &store.RunError{Code: CodeCallable, Message: err.Error()}
	}
	if node.System != nil {
		if a.system, err = s.callString(node.System, "system"); err != nil {
			return nil, &store.RunError{Code: CodeCallable, Message: err.Error()}
		}
	}
	mt, ok := e.tools.LookupTool(node.ModelTool)
	if !ok {
		return nil, &store.RunError{Code: CodeUnknownTool, Message: fmt.Sprintf("agent %s: no installed plugin provides its model tool %s", node.ID, node.ModelTool)}
	}
	a.model, _ = mt.Model(node.Model)
	a.declaredCost = mt.Cost
	switch {
	case node.MaxTokens > 0:
		a.maxTokens = int64(node.MaxTokens)
	case a.model.MaxTokens > 0:
		a.maxTokens = int64(a.model.MaxTokens)
	default:
		a.maxTokens = defaultAgentMaxTokens
	}
	for _, name := range node.Tools {
		info, ok := e.tools.LookupTool(name)
		if !ok {
			return nil, &store.RunError{Code: CodeUnknownTool, Message: fmt.Sprintf("agent %s: no installed plugin provides its tool %s", node.ID, name)}
		}
		def := chat.ToolDef{Name: name, Description: info.Description}
		def.InputSchema, _ = offerSchema(info.InputSchema)
		a.tools = append(a.tools, def)
	}
	for _, name := range node.Flows {
		// A flow is offered as a tool whose input is the flow's input
		// (wrapped when it is not an object: offerSchema); a call of it
		// is a child run (agentflows.go).
		cfe, err := e.book.latest(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			return nil, &store.RunError{Code: ErrorCode(err), Message: fmt.Sprintf("agent %s: its flow %s: %v", node.ID, name, err)}
		}
		def := chat.ToolDef{Name: name, Description: cfe.flow.Doc}
		def.InputSchema, _ = offerSchema(cfe.flow.Input)
		if def.Description == "" {
			def.Description = "Runs the flow " + name + " and answers its output."
		}
		a.tools = append(a.tools, def)
	}
	key := visitKey{run: s.run.ID, node: node.ID, visit: a.visit}
	memo := e.agents.take(key)
	err = e.st.View(ctx, func(tx store.Tx) error {
		var err error
		a.turns, a.memo, err = readTurnsTx(tx, key, memo)
		return err
	})
	if ctx.Err() != nil {
		return nil, nil
	}
	if err != nil {
		return nil, &store.RunError{Code: CodeAgentTurns, Message: err.Error()}
	}
	if rerr := checkTurns(node.ID, a.turns, len(a.memo.final)); rerr != nil {
		return nil, rerr
	}
	a.memo.advance(a.turns)
	a.started = e.clock.Now()
	if len(a.turns) > 0 {
		a.started = a.turns[0].At
	}
	return a, nil
}

// cutAsks is how many times the next turn may have been asked and cut off
// by a crash before its answer was journaled: the leases the run's step
// lost (its step task's attempt grew) since an agent step last wrote the
// last turn (a step that wrote it after a lease was lost had not asked the
// next turn yet), or, for the first turn, since the run began — an upper
// bound, since a lease may have been lost elsewhere in a step. Only the
// step asks the model: the run's attempt, which every task's lost lease
// raises (a turn's calls in flight at a crash), would count a crash once
// per call. A turn written before turns kept their step's attempt counts
// from the run's, as then; one written before either, none.
func (a *agentLoop) cutAsks(attempt, step int) int {
	if n := len(a.turns); n > 0 {
		switch last := a.turns[n-1]; {
		case last.StepAttempt > 0:
			return max(0, step-last.StepAttempt)
		case last.Attempt > 0:
			return max(0, attempt-last.Attempt)
		}
		return 0
	}
	return max(0, step-1)
}

// written marks turn t as written by this step: a lease lost before it
// cut no ask of the next turn.
func (s *stepper) written(t *store.AgentTurn) {
	t.Attempt = max(t.Attempt, s.run.Attempt)
	t.StepAttempt = max(t.StepAttempt, s.task.Attempt)
}

// agentTimedOut takes the node's error wire with E_AGENT_TIMEOUT.
func (s *stepper) agentTimedOut(ctx context.Context, a *agentLoop) bool {
	return s.nodeFailed(ctx, a.node, &store.RunError{Code: CodeAgentTimeout,
		Message: fmt.Sprintf("agent %s ran longer than its timeout %s (%d turns)", a.node.ID, a.node.Timeout, len(a.turns))})
}

// callString evaluates a callable that must give a string.
func (s *stepper) callString(ref *flows.CallableRef, what string) (string, error) {
	if ref == nil {
		return "", fmt.Errorf("%s is missing", what)
	}
	v, err := s.fe.call(s.evalCtx(), *ref, s.flowCtx())
	if err != nil {
		return "", err
	}
	str, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s returned %T, want a string", what, v)
	}
	return str, nil
}

// messages rebuilds the conversation from the prompt and the journaled
// turns: each turn's answer, then the result of each call it asked for,
// then the correction a rejected final answer was sent, or the note of a
// person who resumed the loop after its runaway guard parked it.
// The messages of the final turns come from the visit's memo.
func (a *agentLoop) messages() []chat.Message {
	from := 0
	var final []chat.Message
	if a.memo != nil {
		from, final = len(a.memo.final), a.memo.msgs
	}
	msgs := make([]chat.Message, 0, 1+len(final)+4*(len(a.turns)-from))
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: a.prompt})
	msgs = append(msgs, final...)
	for _, t := range a.turns[from:] {
		msgs = append(msgs, transcript.Turn(t)...)
	}
	return msgs
}

// reservation is a turn's worst case in budget units: the prompt
// estimated at a third of the request's bytes plus max_tokens of output,
// at the model's prices, rounded up; the model tool's declared per-call
// cost when it gives no prices.
func (a *agentLoop) reservation(requestBytes int) int64 {
	if a.model.InputCost == 0 && a.model.OutputCost == 0 {
		return a.declaredCost
	}
	return tokenCost(estimateTokens(requestBytes), a.maxTokens, a.model)
}

// estimateTokens is the conservative prompt-token bound of docs/design.md §9: a
// third of the request's bytes, rounded up (tokenizers average about four
// bytes a token); chat.EstimateInputTokens of the same request, without
// encoding it again.
func estimateTokens(requestBytes int) int64 { return (int64(requestBytes) + 2) / 3 }

// tokenCost prices tokens at m's prices per million, rounded up, without
// overflow.
func tokenCost(in, out int64, m flows.ModelInfo) int64 {
	sum := new(big.Int).Mul(big.NewInt(in), big.NewInt(m.InputCost))
	sum.Add(sum, new(big.Int).Mul(big.NewInt(out), big.NewInt(m.OutputCost)))
	sum.Add(sum, big.NewInt(tokenPriceUnit-1))
	sum.Quo(sum, big.NewInt(tokenPriceUnit))
	if !sum.IsInt64() {
		return 1<<63 - 1
	}
	return sum.Int64()
}

// agentTurn asks the model for the next turn and journals its answer.
// loop says the agent goes on; otherwise more is the node's outcome.
func (s *stepper) agentTurn(ctx context.Context, a *agentLoop) (loop, more bool) {
	e, node := s.e, a.node
	turn := len(a.turns) + 1
	body, rerr := a.request(turn)
	if rerr != nil {
		return false, s.nodeFailed(ctx, node, rerr)
	}
	reserve := a.reservation(len(body))
	if ok, more := s.agentReserve(ctx, a, reserve, fmt.Sprintf("turn %d of agent %s (worst case %d)", turn, node.ID, reserve)); !ok {
		return false, more
	}
	timeout, ok := a.callTimeout(e.clock.Now())
	if !ok {
		return false, s.agentTimedOut(ctx, a)
	}
	c := &toolCall{Run: s.run, Attempt: s.run.Attempt, Node: node, Visit: a.visit, Index: []int{turn}, Tool: node.ModelTool,
		Input: body, Timeout: timeout, Retries: agentTurnRetries, Tries: s.cont.Tries, TaskID: s.task.ID}
	permit, ok := s.admitTurn(ctx, a, c, body)
	if !ok {
		return false, false
	}
	asked := e.clock.Now()
	// The turn's estimate stands in the model's window unless the
	// provider reports its usage below (the first Release wins).
	defer permit.Release(-1)
	o := s.callTool(ctx, c, func(fn func(tx store.Tx) error) error { return s.commitE(ctx, fn) })
	if ended, more := s.turnUnanswered(ctx, a, c, o); ended {
		return false, more
	}

	resp, rerr := turnResponse(node, turn, o.Output)
	if rerr != nil {
		return false, s.nodeFailed(ctx, node, rerr)
	}
	calls, names := journalCalls(node, turn, resp.Message.ToolCalls)
	resp.Message.Role = chat.RoleAssistant

	reported, cost := a.turnCost(resp, o, reserve)
	if reported {
		permit.Release(resp.Usage.InputTokens + resp.Usage.OutputTokens)
	}
	s.spent += cost - o.Cost // callTool charged o.Cost already

	digest := sha256.Sum256(body)
	now := e.clock.Now()
	t := &store.AgentTurn{V: store.AgentTurnVersion, RunID: s.run.ID, Node: node.ID, Visit: a.visit, Turn: turn, Model: node.Model,
		RequestDigest: hex.EncodeToString(digest[:]), RequestBytes: len(body), Response: mustJSON(resp.Message),
		StopReason: string(resp.StopReason), Usage: store.AgentUsage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens},
		UsageReported: reported, Reserved: reserve, Cost: cost, Calls: calls, At: asked}
	t.Cut = a.cutAsks(s.run.Attempt, s.task.Attempt)
	s.written(t)
	t.CutReserved = int64(t.Cut) * reserve
	s.takeRetries(t)
	t.Prompt = tracedPrompt(e.cfg.Load(), a, turn)
	s.cont.Tries = 0
	var spent int64
	ok = s.commit(ctx, func(tx store.Tx) error {
		if o.RecordDone {
			if err := idemDoneTx(tx, c, o.Key, o.Output, nil, now); err != nil {
				return err
			}
		}
		if err := tx.AgentTurnPut(t); err != nil {
			return err
		}
		var err error
		if spent, err = s.chargeTx(tx, node.ID, cost, reserve, map[string]any{"turn": turn, "tool": node.ModelTool, "model": node.Model}, now); err != nil {
			return err
		}
		detail := map[string]any{
			"turn": turn, "model": node.Model, "model_tool": node.ModelTool, "stop_reason": resp.StopReason,
			"input_tokens": resp.Usage.InputTokens, "output_tokens": resp.Usage.OutputTokens, "usage_reported": reported,
			"reserved": reserve, "cost": cost, "tools": names, "asked_at": asked, "max_tokens": a.maxTokens,
			"response_model": resp.Model, "provider": resp.Provider}
		if t.Cut > 0 {
			detail["cut"], detail["cut_reserved"] = t.Cut, t.CutReserved
		}
		return appendEvent(tx, s.run.ID, evAgentTurn, s.run.Attempt, node.ID, detail, now)
	})
	if !ok {
		return false, false
	}
	s.run.Spent = spent
	// Settled in the ledger now, before the calls the turn asked for are
	// queued: a call dispatched while the ledger did not know what the
	// turn cost (more than it reserved, say) would be admitted on budget
	// the run no longer has.
	s.slice, _, _ = e.ledger.Reslice(s.slice, s.spent, 0)
	s.spent = 0
	a.turns = append(a.turns, t)
	e.stats.turn(node.ModelTool+"/"+node.Model, t, cost, reserve)
	return true, false
}

// turnUnanswered ends the step of a turn the model did not answer, as
// its call's outcome says (ended false: it answered); more is the
// node's outcome.
func (s *stepper) turnUnanswered(ctx context.Context, a *agentLoop, c *toolCall, o callOutcome) (ended, more bool) {
	node := a.node
	switch o.End {
	case callRetry:
		s.turnRetried(a, c, o)
		return true, s.retryLater(ctx, c, o)
	case callExhausted:
		return true, s.exhausted(ctx, node, node.ModelTool, o)
	case callInterrupted:
		if s.cancelRequested() {
			s.finish(ctx, store.PhaseCancelled, nil, nil)
		}
		return true, false
	case callAbandoned:
		return true, false
	case callFailed:
		if o.RecordDone {
			now := s.e.clock.Now()
			if !s.commit(ctx, func(tx store.Tx) error { return idemDoneTx(tx, c, o.Key, nil, o.Err, now) }) {
				return true, false
			}
		}
		return true, s.nodeFailed(ctx, node, o.Err)
	}
	return false, false
}

// request is the chat request of turn, encoded, or why the turn cannot
// ask it.
func (a *agentLoop) request(turn int) ([]byte, *store.RunError) {
	node := a.node
	req := chat.Request{Model: node.Model, System: a.system, Messages: a.messages(), Tools: a.tools,
		MaxTokens: a.maxTokens, OutputSchema: node.OutputSchema}
	if err := req.Validate(); err != nil {
		return nil, &store.RunError{Code: CodeChatRequest,
			Message: fmt.Sprintf("agent %s: turn %d: %v", node.ID, turn, err)}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &store.RunError{Code: CodeChatRequest, Message: err.Error()}
	}
	if len(body) > maxAgentRequestBytes {
		return nil, &store.RunError{Code: CodePromptTooLarge,
			Message: fmt.Sprintf("agent %s: turn %d's request is %d bytes, more than the limit of %d", node.ID, turn, len(body), maxAgentRequestBytes)}
	}
	return body, nil
}

// turnResponse decodes the model tool's answer to turn of the agent node,
// or says why it is no chat response the agent can go on from.
func turnResponse(node *flows.Node, turn int, out json.RawMessage) (chat.Response, *store.RunError) {
	var resp chat.Response
	if err := json.Unmarshal(out, &resp); err != nil {
		return resp, &store.RunError{Code: CodeModelResponse,
			Message: fmt.Sprintf("agent %s: %s answered turn %d with something that is not a chat response: %v", node.ID, node.ModelTool, turn, err)}
	}
	if resp.StopReason == "" || (resp.Message.Role != "" && resp.Message.Role != chat.RoleAssistant) {
		return resp, &store.RunError{Code: CodeModelResponse,
			Message: fmt.Sprintf("agent %s: %s answered turn %d without a stop reason or with a %q message; a chat response has an assistant message and a stop reason", node.ID, node.ModelTool, turn, resp.Message.Role)}
	}
	if len(resp.Message.ToolCalls) > maxAgentToolCalls {
		return resp, &store.RunError{Code: CodeModelResponse,
			Message: fmt.Sprintf("agent %s: the model asked for %d tool calls in turn %d, more than the limit of %d", node.ID, len(resp.Message.ToolCalls), turn, maxAgentToolCalls)}
	}
	return resp, nil
}

// turnCost settles a turn: the tool's reported cost, else the reported
// usage at the model's prices; a turn without usage (reported false) is
// charged its reservation.
func (a *agentLoop) turnCost(resp chat.Response, o callOutcome, reserve int64) (reported bool, cost int64) {
	reported = !resp.UsageEstimated && (resp.Usage.InputTokens > 0 || resp.Usage.OutputTokens > 0)
	switch {
	case !reported:
		cost = reserve
	case o.CostReported:
		cost = o.Cost
	case a.model.InputCost > 0 || a.model.OutputCost > 0:
		cost = tokenCost(resp.Usage.InputTokens, resp.Usage.OutputTokens, a.model)
	default:
		cost = o.Cost
	}
	return reported, cost
}

// journalCalls makes the calls a turn asked for into the records the turn
// journals, and rewrites the answer's calls so that every later request
// that repeats them is one the chat contract accepts: each call gets an id
// unique in its turn (a provider's may be missing or repeated), the weir
// name of the tool it resolved to, and JSON-object arguments. A call with
// other arguments ends at once with E_BAD_INPUT; it is never run.
func journalCalls(node *flows.Node, turn int, tcs []chat.ToolCall) ([]store.AgentCall, []string) {
	calls := make([]store.AgentCall, len(tcs))
	names := make([]string, len(tcs))
	seen := map[string]bool{}
	for i := range tcs {
		tc := &tcs[i]
		if tc.ID == "" || seen[tc.ID] {
			tc.ID = fmt.Sprintf("call-%d-%d", turn, i)
		}
		seen[tc.ID] = true
		if tc.Name == "" {
			tc.Name = "unnamed"
		}
		tc.Name = offeredTool(node, tc.Name)
		calls[i] = store.AgentCall{ID: tc.ID, Tool: tc.Name}
		names[i] = tc.Name
		if !isJSONObject(tc.Arguments) {
			calls[i] = callEnded(calls[i], nil, &store.RunError{Code: CodeBadInput,
				Message: fmt.Sprintf("the arguments of the call of %s were not a JSON object; it was not run", tc.Name)})
			tc.Arguments = json.RawMessage("{}")
		}
	}
	return calls, names
}

// chargeTx charges cost, admitted on reserved, to the run's record (the
// package's chargeTx) and returns the new total.
func (s *stepper) chargeTx(tx store.Tx, node string, cost, reserved int64, detail map[string]any, now time.Time) (int64, error) {
	run, err := chargeTx(tx, hostOf(s.e), s.run.ID, s.run.Attempt, node, cost, reserved, detail, now)
	if err != nil {
		return 0, err
	}
	return run.Spent, nil
}

// agentReserve settles what the agent spent so far and reserves cost for
// its next call. When the run's budget (or the node's own cost, turns
// and calls together) cannot cover it the node takes its error wire with
// E_BUDGET_EXHAUSTED, before the call (or, when it says on_budget = "ask"
// and the run's budget is what falls short, parks on a budget wait:
// askBudget); so it does
// with E_BUDGET_IN_FLIGHT when the cost is more than the engine ever lets
// be in flight. When the budget in flight is only used up for now the
// run yields its slot and comes back at the scheduler's next tick (the
// dispatcher does not know an agent's turn costs, so the run must not
// come straight back). ok says the reservation holds.
func (s *stepper) agentReserve(ctx context.Context, a *agentLoop, cost int64, what string) (ok, more bool) {
	e, node := s.e, a.node
	if node.Cost > 0 && a.spent()+cost > node.Cost {
		return false, s.nodeFailed(ctx, node, &store.RunError{Code: CodeBudgetExhausted,
			Message: fmt.Sprintf("agent %s's cost %d cannot cover %s (spent %d)", node.ID, node.Cost, what, a.spent())})
	}
	slice, why, ok := e.ledger.Reslice(s.slice, s.spent, cost)
	s.slice, s.spent = slice, 0
	cfg := e.cfg.Load()
	switch {
	case ok:
		s.settleBudgetWait(a)
		return true, false
	case why == ledger.RunBudgetExhausted && asksBudget(node) && s.run.Budget > 0:
		return false, s.askBudget(ctx, a, cost, what)
	case why == ledger.RunBudgetExhausted:
		return false, s.nodeFailed(ctx, node, &store.RunError{Code: CodeBudgetExhausted,
			Message: fmt.Sprintf("run budget %d cannot cover %s (spent %d)", s.run.Budget, what, e.ledger.Spent(s.run.ID))})
	case why == ledger.NoBudgetInFlight && cfg.MaxBudgetInFlight > 0 && cost > cfg.MaxBudgetInFlight:
		return false, s.nodeFailed(ctx, node, &store.RunError{Code: string(ledger.NoBudgetInFlight),
			Message: fmt.Sprintf("%s is more than the engine's budget in flight (%d): it can never be admitted", what, cfg.MaxBudgetInFlight)})
	}
	e.stats.admissionBlocked(string(why))
	now := e.clock.Now()
	s.commit(ctx, func(tx store.Tx) error { return s.releaseTaskTx(tx, now, now.Add(cfg.Tick), "", "") })
	return false, false
}

// offeredTool maps the name a model called back to the agent's tool: the
// weir name itself, or its provider form (a chat tool that did not map
// it back). A name the agent does not offer is kept as the model gave
// it, and the call fails with E_UNKNOWN_TOOL.
func offeredTool(node *flows.Node, name string) string {
	all := offered(node)
	if slices.Contains(all, name) {
		return name
	}
	if n, err := flows.ToolNameFromModel(name); err == nil && slices.Contains(all, n) {
		return n
	}
	return name
}

// offered lists what an agent offers its model: its tools, then its
// flows.
func offered(node *flows.Node) []string {
	return append(slices.Clone(node.Tools), node.Flows...)
}

func pendingCalls(t *store.AgentTurn) int {
	n := 0
	for _, c := range t.Calls {
		if !c.Done {
			n++
		}
	}
	return n
}

// agentCalls moves on the calls a journaled turn asked for that have not
// ended. Calls of tools the agent does not offer, and proposals a person
// rejected, end at once; proposals not yet decided wait as approval
// waits. The others each become a task of their own (TaskAgentCall),
// admitted by the dispatcher like any task (a worker slot and a budget
// slice) and run through callTool with the index [turn, call]: the
// idempotent ones together (at most maxAgentCallsTogether at once), the
// others one at a time. While they run the agent is parked and holds no
// slot; each call's end is written into the turn record and wakes it. A
// tool's error is the call's result, not the node's failure. Calls of
// the agent's flows are child runs, started together with the other calls
// and running beside them (startFlowCalls, agentFlowCalls).
func (s *stepper) agentCalls(ctx context.Context, a *agentLoop, t *store.AgentTurn) (loop, more bool) {
	e, node := s.e, a.node
	var msg chat.Message
	if err := json.Unmarshal(t.Response, &msg); err != nil || len(msg.ToolCalls) != len(t.Calls) {
		return false, s.nodeFailed(ctx, node, &store.RunError{Code: CodeAgentTurns, Message: fmt.Sprintf("agent %s: turn %d's journaled answer does not match its calls", node.ID, t.Turn)})
	}
	now := e.clock.Now()
	if !s.expireApprovals(ctx, a, now) {
		return false, false
	}
	p, unknowns, err := s.planCalls(ctx, a, t, msg, now)
	if err != nil {
		e.admission.storageFailed(err)
		return false, false
	}
	flowCalls, undecided, fresh, ends, inFlight := p.flowCalls, p.undecided, p.fresh, p.ends, p.inFlight
	if _, ok := a.callTimeout(now); !ok {
		return false, s.agentTimedOut(ctx, a)
	}
	if len(fresh) > 0 {
		// The proposals are shown (and can be decided) before the other
		// calls run.
		if !s.commit(ctx, func(tx store.Tx) error { return s.approvalsAskedTx(tx, fresh, now) }) {
			return false, false
		}
	}

	if !s.startFlowCalls(ctx, a, t, msg, flowCalls) {
		return false, false
	}
	queue := p.queue()
	if rerr := s.agentCallsCost(a, t, queue); rerr != nil {
		return false, s.nodeFailed(ctx, node, rerr)
	}
	if len(queue) > 0 || len(ends) > 0 {
		tasks := make([]*store.Task, len(queue))
		for j, i := range queue {
			tasks[j] = &store.Task{ID: newID("task"), RunID: s.run.ID, Owner: s.run.Owner, Kind: store.TaskAgentCall, Node: node.ID, Visit: a.visit,
				Item: t.Turn, Call: i, Tool: t.Calls[i].Tool, Attempt: 1, ReadyAt: now, CreatedAt: now}
			c := t.Calls[i]
			c.Task = tasks[j].ID
			if ws := s.cont.Approvals[WaitID(node.ID, a.visit, t.Turn, i)]; ws != nil && ws.Decision != nil && len(ws.Decision.Arguments) > 0 {
				// An edit: the arguments are the call's from the write
				// that queues it, which consumes the decision.
				c.Edited = ws.Decision.Arguments
			}
			ends[i] = c
		}
		park := inFlight+len(queue) > 0
		cancelSeen := false
		ok := s.agentCallsDone(ctx, t, ends, 0, func(tx store.Tx) error {
			// A cancel another daemon recorded while this step ran
			// reaches this one only by announcement: the store says so
			// first, and no call of a cancelled run is queued.
			cancelSeen = false
			if len(tasks) > 0 {
				run, err := tx.RunGet(s.run.ID)
				if err != nil {
					return err
				}
				if run.CancelRequested {
					cancelSeen = true
					return errCancelSeen
				}
			}
			for _, task := range tasks {
				if err := tx.TaskPut(task); err != nil {
					return err
				}
			}
			if !park {
				return nil
			}
			return s.parkOnCallsTx(tx, t, now, inFlight+len(queue), unknowns)
		})
		if !ok {
			if cancelSeen {
				s.cancelSeen(ctx, errCancelSeen)
			}
			return false, false
		}
		if len(queue) > 0 {
			failpoint.Hit(failpoint.AgentCallsQueued)
			e.wake.kick()
		}
		if park {
			return false, false
		}
	} else if inFlight > 0 {
		s.commit(ctx, func(tx store.Tx) error { return s.parkOnCallsTx(tx, t, now, inFlight, unknowns) })
		return false, false
	}
	if loop, more := s.agentFlowCalls(ctx, a, t, flowCalls); !loop {
		return false, more
	}
	if len(undecided)+len(unknowns) > 0 {
		return false, s.awaitPeople(ctx, a, undecided, unknowns, now)
	}
	return true, false
}

// agentCallsCost refuses the queued calls of turn t when the node's own
// cost (if it has one) cannot cover their declared costs beside what the
// agent spent.
func (s *stepper) agentCallsCost(a *agentLoop, t *store.AgentTurn, queue []int) *store.RunError {
	node := a.node
	if node.Cost <= 0 {
		return nil
	}
	var cost int64
	for _, i := range queue {
		info, _ := s.e.tools.LookupTool(t.Calls[i].Tool)
		cost += info.Cost
	}
	if a.spent()+cost <= node.Cost {
		return nil
	}
	return &store.RunError{Code: CodeBudgetExhausted,
		Message: fmt.Sprintf("agent %s's cost %d cannot cover the %d tool calls of turn %d (%d; spent %d)", node.ID, node.Cost, len(queue), t.Turn, cost, a.spent())}
}

// agentCallPlan sorts the calls of an agent's turn by how they go on.
type agentCallPlan struct {
	flowCalls []int                   // calls of the agent's flows: child runs, all at once
	together  []int                   // idempotent calls, run together up to the bound
	alone     []int                   // other calls, one at a time
	undecided []*waitState            // approvals no one decided yet
	fresh     []*waitState            // approvals first asked now
	ends      map[int]store.AgentCall // calls that end now, by index
	inFlight  int                     // calls queued or running already
	// aloneInFlight says one of those is not idempotent.
	aloneInFlight bool
}

// planCalls applies the unknown waits of t's calls (agentUnknowns), then
// sorts its calls (sortCalls): the plan, with the ends of both, and the
// unknown waits still open.
func (s *stepper) planCalls(ctx context.Context, a *agentLoop, t *store.AgentTurn, msg chat.Message, now time.Time) (*agentCallPlan, []*waitState, error) {
	ends, unknowns, err := s.agentUnknowns(ctx, a, t, msg, now)
	if err != nil {
		return nil, nil, err
	}
	p := s.sortCalls(a, t, msg, now)
	for i, c := range ends {
		if _, ok := p.ends[i]; !ok {
			p.ends[i] = c
		}
	}
	return p, unknowns, nil
}

// sortCalls sorts the calls of turn t (whose journaled answer is msg) that
// have not ended.
func (s *stepper) sortCalls(a *agentLoop, t *store.AgentTurn, msg chat.Message, now time.Time) *agentCallPlan {
	e, node := s.e, a.node
	p := &agentCallPlan{ends: map[int]store.AgentCall{}}
	for i, c := range t.Calls {
		if c.Done {
			continue
		}
		if callAsking(c) {
			// Its outcome unknown, it holds the place of the one call
			// that is not idempotent until a person resolves it.
			p.aloneInFlight = true
			continue
		}
		if c.Task != "" {
			p.inFlight++
			if info, _ := e.tools.LookupTool(c.Tool); !info.Idempotent {
				p.aloneInFlight = true
			}
			continue
		}
		if slices.Contains(node.Flows, c.Tool) {
			p.flowCalls = append(p.flowCalls, i)
			continue
		}
		if !slices.Contains(node.Tools, c.Tool) {
			p.ends[i] = callEnded(c, nil, &store.RunError{Code: CodeUnknownTool,
				Message: fmt.Sprintf("%s is not one of the tools offered (%s)", c.Tool, strings.Join(offered(node), ", "))})
			continue
		}
		if slices.Contains(node.Approve, c.Tool) {
			ws, isNew := s.approvalWait(a, t, i, msg.ToolCalls[i].Arguments, now)
			if isNew {
				p.fresh = append(p.fresh, ws)
			}
			switch d := ws.Decision; {
			case d == nil:
				p.undecided = append(p.undecided, ws)
				continue
			case d.Expired:
				p.ends[i] = callEnded(c, nil, approvalExpired(c.Tool, node.ApprovalTTL))
				continue
			case !d.Approved:
				p.ends[i] = callEnded(c, nil, &store.RunError{Code: CodeRejected,
					Message: fmt.Sprintf("a person (%s) rejected this call of %s: %s", d.By, c.Tool, d.Reason)})
				continue
			case d.Respond:
				// Answered in the tool's place: the tool never runs.
				end := callEnded(c, d.Result, nil)
				end.Responded = true
				p.ends[i] = end
				continue
			}
		}
		if info, _ := e.tools.LookupTool(c.Tool); info.Idempotent {
			p.together = append(p.together, i)
		} else {
			p.alone = append(p.alone, i)
		}
	}
	return p
}

// queue is what may run now: idempotent calls up to the bound, and a
// non-idempotent one when none is running.
func (p *agentCallPlan) queue() []int {
	var queue []int
	for _, i := range p.together {
		if p.inFlight+len(queue) >= maxAgentCallsTogether {
			break
		}
		queue = append(queue, i)
	}
	if len(p.alone) > 0 && !p.aloneInFlight && p.inFlight+len(queue) < maxAgentCallsTogether {
		queue = append(queue, p.alone[0])
	}
	return queue
}

// callEnded is c with its end.
func callEnded(c store.AgentCall, out json.RawMessage, rerr *store.RunError) store.AgentCall {
	c.Done = true
	if rerr != nil {
		c.Error = rerr
		return c
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	c.Result = out
	return c
}

// agentCallsDone writes the ends of calls into their turn record, with
// what they cost and extra writes (a non-idempotent call's done record),
// in one step.
func (s *stepper) agentCallsDone(ctx context.Context, t *store.AgentTurn, ends map[int]store.AgentCall, cost int64, extra func(tx store.Tx) error) bool {
	next := *t
	next.Calls = slices.Clone(t.Calls)
	for i, c := range ends {
		next.Calls[i] = c
	}
	s.written(&next)
	for i, c := range next.Calls {
		// A decided proposal is consumed once its call ended, or is
		// queued to run.
		id := WaitID(t.Node, t.Visit, t.Turn, i)
		if ws := s.cont.Approvals[id]; ws != nil && ws.Decision != nil && (c.Done || c.Task != "") {
			s.cont.consumed(ws)
			delete(s.cont.Approvals, id)
		}
	}
	now := s.e.clock.Now()
	var spent int64
	ok := s.commit(ctx, func(tx store.Tx) error {
		if extra != nil {
			if err := extra(tx); err != nil {
				return err
			}
		}
		merged, err := putTurnTx(tx, &next)
		if err != nil {
			return err
		}
		next = *merged
		// Calls ended here were made in the agent's slot, which reserved
		// their declared costs.
		spent, err = s.chargeTx(tx, t.Node, cost, cost, nil, now)
		return err
	})
	if ok {
		s.run.Spent = spent
		*t = next
	}
	return ok
}

// agentAnswer ends the node with the model's final answer, or, when the
// answer does not satisfy the node's output schema, journals the
// correction the next turn sends back.
func (s *stepper) agentAnswer(ctx context.Context, a *agentLoop, t *store.AgentTurn) (loop, more bool) {
	node := a.node
	var msg chat.Message
	_ = json.Unmarshal(t.Response, &msg)
	if chat.StopReason(t.StopReason) == chat.StopRefusal || chat.StopReason(t.StopReason) == chat.StopMaxTokens {
		return false, s.nodeFailed(ctx, node, &store.RunError{Code: CodeModelStopped,
			Message: fmt.Sprintf("agent %s: the model ended turn %d with %s and no answer", node.ID, t.Turn, t.StopReason)})
	}
	var answer any = msg.Content
	if len(node.OutputSchema) > 0 {
		if err := s.e.book.validateAgentAnswer(ctx, node.OutputSchema, []byte(msg.Content)); err != nil {
			why := "Your answer does not match the required output schema: " + err.Error() + ". Answer again with JSON alone that matches it."
			if len(a.turns) >= node.MaxTurns {
				return false, s.nodeFailed(ctx, node, &store.RunError{Code: CodeMaxTurns,
					Message: fmt.Sprintf("agent %s used its %d turns; its last answer does not match the output schema: %v", node.ID, node.MaxTurns, err)})
			}
			next := *t
			next.Correction = why
			s.written(&next)
			if !s.commit(ctx, func(tx store.Tx) error { return tx.AgentTurnPut(&next) }) {
				return false, false
			}
			*t = next
			return true, false
		}
		var v any
		_ = json.Unmarshal([]byte(msg.Content), &v)
		answer = v
	}
	usage := a.usage()
	cost := a.spent()
	out := mustJSON(map[string]any{"answer": answer, "turns": len(a.turns),
		"usage": map[string]int64{"input_tokens": usage.InputTokens, "output_tokens": usage.OutputTokens}, "cost": cost})
	return false, s.resultDone(ctx, node, out, map[string]any{"turns": len(a.turns), "cost": cost,
		"input_tokens": usage.InputTokens, "output_tokens": usage.OutputTokens})
}

func isJSONObject(b []byte) bool {
	var v map[string]json.RawMessage
	return len(b) > 0 && json.Unmarshal(b, &v) == nil && v != nil
}

// AgentView is what an agent node's latest visit has done so far, for
// display: its journaled turns, their tokens, and what its turns and
// calls cost.
type AgentView struct {
	Node         string `json:"node"`
	Visit        int    `json:"visit"`
	Turns        int    `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cost         int64  `json:"cost"`
	// CutTurns is how many asks of its turns crashes may have cut off
	// before their answers were journaled (store.AgentTurn.Cut), and
	// CutReserved the upper bound of what they cost: the provider may
	// have billed them, weir never saw their usage.
	CutTurns    int   `json:"cut_turns,omitempty"`
	CutReserved int64 `json:"cut_reserved,omitempty"`
	// RetriedTurns is how many tries of its turns failed and were tried
	// again, and RetriedInputTokens and RetriedOutputTokens what the
	// provider reported they used (store.AgentTurn.Retried).
	RetriedTurns        int   `json:"retried_turns,omitempty"`
	RetriedInputTokens  int64 `json:"retried_input_tokens,omitempty"`
	RetriedOutputTokens int64 `json:"retried_output_tokens,omitempty"`
}

// agentView sums the journaled turns of one visit of an agent node.
func agentView(tx store.Tx, runID, node string, visit int) (AgentView, error) {
	turns, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: runID, Node: node, Visit: visit})
	if err != nil {
		return AgentView{}, err
	}
	a := &agentLoop{turns: turns}
	u := a.usage()
	v := AgentView{Node: node, Visit: visit, Turns: len(turns), Cost: a.spent(), InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
	for _, t := range turns {
		v.CutTurns += t.Cut
		v.CutReserved += t.CutReserved
		v.RetriedTurns += t.Retried
		v.RetriedInputTokens += t.RetriedUsage.InputTokens
		v.RetriedOutputTokens += t.RetriedUsage.OutputTokens
	}
	return v, nil
}
