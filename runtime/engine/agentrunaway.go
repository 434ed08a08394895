package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// The runaway guard (docs/agents.md) watches each visit of an agent before
// every model turn: the same call (tool and the digest of its arguments'
// canonical JSON) answered with the same result (the digest of its
// canonical JSON) repeat_limit times, or error_limit calls in a row ending
// with the same error code, trip it. The counts are read from the turn
// records, never kept in memory, so a daemon that recovers the run after a
// kill counts what the one before it counted. A tripped guard parks the
// run on a wait of kind runaway, NODE@VISIT.runaway.N (DESIGN §12), that
// shows the diagnosis; a person's approval resumes the loop (its payload's
// note is sent to the model) and the guard counts afresh from there; a
// rejection, or on_runaway = "fail", ends the node with E_AGENT_RUNAWAY.

// WaitRunaway: an agent's runaway guard tripped; the run waits for a
// person to resume it (approve) or end it (reject, cancel). Its wait id is
// NODE@VISIT.runaway.N.
const WaitRunaway = "runaway"

// evRunaway records that an agent's runaway guard tripped, with its
// diagnosis and the wait it opened (none on on_runaway = "fail").
const evRunaway = "runaway"

// maxRunawayNoteBytes bounds the note a person gives the model when they
// resume a runaway agent: it is journaled on a turn record and sent with
// every later request of the visit.
const maxRunawayNoteBytes = 8 << 10

// RunawayWaitID is the id of the n-th runaway wait of visit of node:
// NODE@VISIT.runaway.N (DESIGN §12, wait ids per kind).
func RunawayWaitID(node string, visit, n int) string {
	return WaitID(node, visit) + "." + WaitRunaway + "." + strconv.Itoa(n)
}

// runawayCount is an agent node's runaway guard in one visit: how many
// runaway waits it opened (so a wait id is never reused after a
// decision), and After, the turns a person resumed the loop past: the
// guard counts the calls of later turns only.
type runawayCount struct {
	Visit int `json:"visit"`
	N     int `json:"n"`
	After int `json:"after,omitempty"`
}

// Why a runaway guard tripped (runawayDiagnosis.Why).
const (
	runawayRepeat = "repeat" // the same call answered alike repeat_limit times
	runawayErrors = "errors" // error_limit calls in a row ended with the same code
)

// runawayDiagnosis is what a tripped guard shows: the repeated call (for
// errors, the last of the calls in a row), how often against the limit,
// the turns it spans, and the tokens and cost of those turns and their
// calls — what the loop spent since it began going round.
type runawayDiagnosis struct {
	Why          string          `json:"why"`
	Tool         string          `json:"tool"`
	Arguments    json.RawMessage `json:"arguments"`
	Digest       string          `json:"digest"`
	ResultDigest string          `json:"result_digest,omitempty"`
	ErrorCode    string          `json:"error_code,omitempty"`
	Count        int             `json:"count"`
	Limit        int             `json:"limit"`
	FirstTurn    int             `json:"first_turn"`
	LastTurn     int             `json:"last_turn"`
	InputTokens  int64           `json:"input_tokens_since"`
	OutputTokens int64           `json:"output_tokens_since"`
	CostSince    int64           `json:"cost_since"`
}

// message is the diagnosis as one line of an error or an event.
func (d *runawayDiagnosis) message(node string) string {
	args := textbound.Quote(string(d.Arguments))
	if d.Why == runawayErrors {
		return fmt.Sprintf("agent %s: %d calls in a row ended with %s (error_limit %d), the last %s %s, in turns %d to %d; %d input and %d output tokens spent since",
			node, d.Count, d.ErrorCode, d.Limit, d.Tool, args, d.FirstTurn, d.LastTurn, d.InputTokens, d.OutputTokens)
	}
	return fmt.Sprintf("agent %s: the call %s %s was answered the same %d times (repeat_limit %d), in turns %d to %d; %d input and %d output tokens spent since",
		node, d.Tool, args, d.Count, d.Limit, d.FirstTurn, d.LastTurn, d.InputTokens, d.OutputTokens)
}

// detectRunaway is the guard's decision over the journaled turns it
// counts: the first trip, in the order the calls were asked for, or nil.
// Only ended calls count (notToolsAnswer says which errors do not); a
// call a person edited counts with the arguments it ran with.
func detectRunaway(turns []*store.AgentTurn, repeatLimit, errorLimit int) *runawayDiagnosis {
	sc := newRunawayScan(0, repeatLimit, errorLimit)
	for _, t := range turns {
		if sc.fold(t) {
			break
		}
	}
	return sc.diagnosis(turns)
}

// runawayScan is the guard's counts over the turns of a visit past after,
// folded in one turn at a time, so that the check before each turn looks
// only at the turns that ended since the last (the visit's memo keeps it
// between steps): the first trip, once found, stays.
type runawayScan struct {
	after, repeatLimit, errorLimit int
	// folded is how many turns past after are counted.
	folded              int
	counts              map[string]*runawaySeen
	streak, streakFirst int
	streakCode          string
	trip                *runawayDiagnosis
}

// runawaySeen is how often one call was answered alike, from which turn.
type runawaySeen struct{ n, first int }

func newRunawayScan(after, repeatLimit, errorLimit int) *runawayScan {
	return &runawayScan{after: after, repeatLimit: repeatLimit, errorLimit: errorLimit, counts: map[string]*runawaySeen{}}
}

// fold counts the ended calls of turn t; it says the guard tripped.
func (sc *runawayScan) fold(t *store.AgentTurn) bool {
	sc.folded++
	if sc.trip != nil {
		return true
	}
	var msg chat.Message
	_ = json.Unmarshal(t.Response, &msg) // validated before it was journaled
	for i, c := range t.Calls {
		if !c.Done {
			continue
		}
		args := json.RawMessage("{}")
		if i < len(msg.ToolCalls) {
			args = msg.ToolCalls[i].Arguments
		}
		if len(c.Edited) > 0 {
			args = c.Edited
		}
		if c.Error != nil && notToolsAnswer(c.Error.Code) {
			continue
		}
		digest := ProposalDigest(args)
		if c.Error != nil {
			if c.Error.Code != sc.streakCode || sc.streak == 0 {
				sc.streak, sc.streakFirst, sc.streakCode = 0, t.Turn, c.Error.Code
			}
			sc.streak++
			if sc.streak >= sc.errorLimit {
				sc.trip = &runawayDiagnosis{Why: runawayErrors, Tool: c.Tool, Arguments: args, Digest: digest, ErrorCode: c.Error.Code,
					Count: sc.streak, Limit: sc.errorLimit, FirstTurn: sc.streakFirst, LastTurn: t.Turn}
			}
		} else {
			sc.streak, sc.streakCode = 0, ""
			result := ProposalDigest(c.Result)
			key := c.Tool + "\x00" + digest + "\x00" + result
			seen := sc.counts[key]
			if seen == nil {
				seen = &runawaySeen{first: t.Turn}
				sc.counts[key] = seen
			}
			seen.n++
			if seen.n >= sc.repeatLimit {
				sc.trip = &runawayDiagnosis{Why: runawayRepeat, Tool: c.Tool, Arguments: args, Digest: digest, ResultDigest: result,
					Count: seen.n, Limit: sc.repeatLimit, FirstTurn: seen.first, LastTurn: t.Turn}
			}
		}
		if sc.trip != nil {
			return true
		}
	}
	return false
}

// diagnosis is the scan's trip with what turns (those it counts) spent
// since it began, or nil.
func (sc *runawayScan) diagnosis(turns []*store.AgentTurn) *runawayDiagnosis {
	if sc.trip == nil {
		return nil
	}
	d := *sc.trip
	d.spentSince(turns)
	return &d
}

// runaway is the guard's decision over the agent's turns past after: the
// scan kept in the visit's memo goes on from the turns it counted, over
// those whose calls all ended.
func (a *agentLoop) runaway(after, repeatLimit, errorLimit int) *runawayDiagnosis {
	sc := a.memo.scan
	if sc == nil || sc.after != after || sc.repeatLimit != repeatLimit || sc.errorLimit != errorLimit || after+sc.folded > len(a.turns) {
		sc = newRunawayScan(after, repeatLimit, errorLimit)
		a.memo.scan = sc
	}
	for _, t := range a.turns[after+sc.folded:] {
		if pendingCalls(t) > 0 || sc.fold(t) {
			break
		}
	}
	return sc.diagnosis(a.turns[after:])
}

// notToolsAnswer says a call's error code is the runtime's or a person's
// refusal, not the tool's answer: the budget (which stops the agent by
// itself), a rejection, an expired approval, the loop's timeout. Such ends
// are not the model going round: the guard neither counts them nor lets
// them break a row.
func notToolsAnswer(code string) bool {
	switch code {
	case CodeBudgetExhausted, CodeRejected, CodeApprovalExpired, CodeAgentTimeout:
		return true
	}
	return false
}

// spentSince sums the tokens and cost of the turns from d's first.
func (d *runawayDiagnosis) spentSince(turns []*store.AgentTurn) {
	for _, t := range turns {
		if t.Turn < d.FirstTurn {
			continue
		}
		d.InputTokens += t.Usage.InputTokens
		d.OutputTokens += t.Usage.OutputTokens
		d.CostSince += t.Cost
		for _, c := range t.Calls {
			d.CostSince += c.Cost
		}
	}
}

// runawayGuard runs before each model turn of the agent: it applies the
// decision on the visit's open runaway wait, or looks at the calls
// journaled since the last resume and, when the guard trips, parks the
// run on a new runaway wait (or, on on_runaway = "fail", fails the node).
// ok says the loop asks its next turn; otherwise more is the node's
// outcome.
func (s *stepper) runawayGuard(ctx context.Context, a *agentLoop) (ok, more bool) {
	node := a.node
	g := s.cont.Runaway[node.ID]
	if g.Visit != a.visit {
		g = runawayCount{Visit: a.visit}
	}
	if g.N > 0 {
		if ws := s.cont.Approvals[RunawayWaitID(node.ID, a.visit, g.N)]; ws != nil {
			return s.runawayDecided(ctx, a, g, ws)
		}
	}
	after := min(g.After, len(a.turns))
	d := a.runaway(after, node.RepeatLimitOrDefault(), node.ErrorLimitOrDefault())
	if d == nil {
		return true, false
	}
	now := s.e.clock.Now()
	detail := map[string]any{"diagnosis": d}
	if node.OnRunaway == flows.OnRunawayFail {
		if !s.commit(ctx, func(tx store.Tx) error {
			return appendEvent(tx, s.run.ID, evRunaway, s.run.Attempt, node.ID, detail, now)
		}) {
			return false, false
		}
		return false, s.nodeFailed(ctx, node, &store.RunError{Code: CodeAgentRunaway, Message: d.message(node.ID) + " (on_runaway = \"fail\")"})
	}
	g.N++
	until := now.Add(noTimeout)
	if node.Timeout > 0 {
		until = a.started.Add(node.Timeout) // the loop's own deadline
	}
	ws := &waitState{ID: RunawayWaitID(node.ID, a.visit, g.N), Kind: WaitRunaway, Node: node.ID, Since: now, Until: until, Visit: a.visit, Shown: mustJSON(d)}
	if s.cont.Runaway == nil {
		s.cont.Runaway = map[string]runawayCount{}
	}
	if s.cont.Approvals == nil {
		s.cont.Approvals = map[string]*waitState{}
	}
	s.cont.Runaway[node.ID] = g
	s.cont.Approvals[ws.ID] = ws
	detail["wait"] = ws.ID
	if s.commit(ctx, func(tx store.Tx) error {
		if err := appendEvent(tx, s.run.ID, evRunaway, s.run.Attempt, node.ID, detail, now); err != nil {
			return err
		}
		return s.parkTx(tx, now, until, WaitRunaway, "", map[string]any{"wait": ws.ID})
	}) {
		failpoint.Hit(failpoint.RunawayParked)
	}
	return false, false
}

// runawayDecided applies what a person decided on the runaway wait ws of
// the agent's visit: an approval resumes the loop (its note journaled on
// the last turn, sent to the model; the guard counts afresh from the next
// turn), a rejection fails the node with E_AGENT_RUNAWAY. Woken without a
// decision, the run parks again until the loop's deadline.
func (s *stepper) runawayDecided(ctx context.Context, a *agentLoop, g runawayCount, ws *waitState) (ok, more bool) {
	node := a.node
	d := ws.Decision
	if d == nil {
		now := s.e.clock.Now()
		if !now.Before(ws.Until) {
			return false, s.agentTimedOut(ctx, a)
		}
		s.commit(ctx, func(tx store.Tx) error {
			return s.parkTx(tx, now, ws.Until, WaitRunaway, "", map[string]any{"wait": ws.ID})
		})
		return false, false
	}
	s.cont.consumed(ws)
	delete(s.cont.Approvals, ws.ID)
	if !d.Approved {
		return false, s.nodeFailed(ctx, node, &store.RunError{Code: CodeAgentRunaway,
			Message: fmt.Sprintf("a person (%s) ended agent %s at its runaway wait %s: %s", d.By, node.ID, ws.ID, d.Reason)})
	}
	g.After = len(a.turns)
	s.cont.Runaway[node.ID] = g
	note, _ := runawayNote(d.Payload) // checked when it was decided
	if note == "" || len(a.turns) == 0 {
		if !s.commit(ctx, func(store.Tx) error { return nil }) {
			return false, false
		}
		return true, false
	}
	last := a.turns[len(a.turns)-1]
	next := *last
	next.Note = note
	var merged *store.AgentTurn
	if !s.commit(ctx, func(tx store.Tx) error {
		var err error
		merged, err = putTurnTx(tx, &next)
		return err
	}) {
		return false, false
	}
	*last = *merged
	return true, false
}

// runawayNote is the note an approval of a runaway wait gives the model:
// its payload is absent, or {"note": TEXT} with TEXT at most
// maxRunawayNoteBytes. Anything else is refused (E_BAD_REQUEST), the wait
// left open.
func runawayNote(payload json.RawMessage) (string, error) {
	if len(payload) == 0 {
		return "", nil
	}
	var p struct {
		Note *string `json:"note"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.Note == nil {
		return "", protocolErr(CodeBadRequest, `the payload of an approval of a runaway wait is {"note": TEXT}, a note the model is sent when the agent resumes (or none)`)
	}
	if len(*p.Note) > maxRunawayNoteBytes {
		return "", protocolErr(CodeBadRequest, "the note is %d bytes; a note is at most %d", len(*p.Note), maxRunawayNoteBytes)
	}
	return *p.Note, nil
}
