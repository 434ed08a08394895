package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// The agent kind's runs take their model turns from a scripted
// OpenAI-compatible server the soak runs on loopback, through the real llm
// plugin: the model asks for an idempotent echo, a non-idempotent mail and
// a testkit.once call whose probe cannot tell in its first turn, and
// answers once it has their results. A kill that leaves the once call's
// outcome unknown parks the call for a person (resolve.go). The server
// answers from the conversation alone, so turns of many runs interleave in
// any order, and it records every request with the time it was read: the
// agent invariant holds them against the journaled turns.

const invAgent = "agent turns never asked again once journaled"

// agentPrompt starts an agent run's conversation; the request id follows.
const agentPrompt = "Agent task "

var agentTaskRE = regexp.MustCompile(`Agent task (req-[0-9]+)`)

// agentFlowSrc is the agent kind's flow: the model alias "small" is the
// llm plugin's block in the config the soak gives every daemon.
const agentFlowSrc = `
flow(
    name = "soak_agent",
    nodes = [
        agent("a", model = "small", prompt = lambda ctx: "` + agentPrompt + `" + ctx.input["id"],
              tools = ["testkit.echo", "mail.send", "testkit.once"], at_most_once = True, on_unknown = "ask", max_turns = 3, next = "done"),
        task("done", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "answer": ctx.results["a"]["answer"]}),
    ],
)
`

// agentKind is the agent shape of run in the mixed workload.
var agentKind = &kind{
	name: "agent", flow: "soak_agent", weight: 2, src: agentFlowSrc,
	input: idInput,
	check: func(v *apitypes.Run, in map[string]any, evs []apitypes.Event, _ *records) []string {
		switch v.Phase {
		case apitypes.PhaseFailed:
			// Kills may end an agent run as designed: its task lost its
			// lease too often (E_ATTEMPTS_EXCEEDED), or its at-most-once
			// mail.send started on a daemon that died (E_OUTCOME_UNKNOWN).
			// Either needs a lease that expired; nothing else may fail it.
			if killedTooOften(v, evs) || (errCode(v) == "E_OUTCOME_UNKNOWN" && hasEvent(evs, "expired")) {
				return nil
			}
			return []string{fmt.Sprintf("agent run %s failed: %s", v.ID, errCode(v))}
		case apitypes.PhaseCompleted:
			return wantOutput(v, map[string]any{"id": in["id"], "answer": "done " + in["id"].(string)})
		}
		return nil
	},
}

// agentModel is the soak's model server and the config that points the
// llm plugin at it.
type agentModel struct {
	srv    *llmtest.Server
	config string // the daemon config file
}

// startAgentModel serves the soak's model on a free loopback port and
// writes the daemon config that configures the llm plugin for it.
func startAgentModel() (*agentModel, error) {
	srv := llmtest.NewScript(llmtest.Script{})
	srv.Respond = respondAgent
	if err := srv.Start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "weir-soak-*.hcl")
	if err == nil {
		_, err = fmt.Fprintf(f, `plugin "llm" {
  providers = { local = { kind = "openai", base_url = %q } }
  models = { small = { provider = "local", model = "soak", max_tokens = 256, input_cost = %d, output_cost = %d } }
}
`, srv.OpenAIBaseURL(), agentTokenPrice, agentTokenPrice)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &agentModel{srv: srv, config: f.Name()}, nil
}

func (m *agentModel) Close() {
	m.srv.Close()
	os.Remove(m.config)
}

// agentTokenPrice is the model's price of a token, in budget units per
// million (a fiftieth of a unit): turns cost a few units, so a budget
// wait's raise is a small number and a cut-off ask's reservation is not 0.
const agentTokenPrice = 20000

// chatMessage is a message of a model request as the soak reads it.
type chatMessage struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
}

// readRequest is the request id and the messages of a model request.
func readRequest(body []byte) (string, []chatMessage, error) {
	m := agentTaskRE.FindSubmatch(body)
	if m == nil {
		return "", nil, fmt.Errorf("soak model: no agent task in the request")
	}
	var req struct {
		Messages []chatMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "", nil, err
	}
	return string(m[1]), req.Messages, nil
}

// respondAgent is the model of every agent kind, told apart by the mark
// their prompt ends with: the agent kind's first turn asks for the echo,
// the mail and the once call, a turn that sees their results answers.
func respondAgent(_ string, body []byte) llmtest.Step {
	id, msgs, err := readRequest(body)
	if err != nil {
		return llmtest.Step{Status: 400, ErrorMessage: err.Error()}
	}
	switch {
	case bytes.Contains(body, []byte(steerMark)):
		return respondSteer(id, msgs)
	case bytes.Contains(body, []byte(topupMark)):
		return respondTopup(id, msgs)
	}
	for _, m := range msgs {
		if m.Role == "tool" {
			return llmtest.Step{Text: "done " + id}
		}
	}
	return llmtest.Step{ToolCalls: []llmtest.ToolCall{
		{Name: "testkit__echo", Arguments: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))},
		{Name: "mail__send", Arguments: json.RawMessage(fmt.Sprintf(`{"to":"ops@example.com","body":"soak %s"}`, id))},
		{Name: "testkit__once", Arguments: json.RawMessage(fmt.Sprintf(`{"value":"%s/agent","probe":"unknown"}`, id))},
	}}
}

// agentTurnKey names one model turn of one agent run: the run's request id
// and the turn's number (the assistant messages before it, plus one).
type agentTurnKey struct {
	reqID string
	turn  int
}

// requestTurn reads which turn of which run a model request asks.
func requestTurn(body []byte) (agentTurnKey, bool) {
	m := agentTaskRE.FindSubmatch(body)
	if m == nil {
		return agentTurnKey{}, false
	}
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return agentTurnKey{}, false
	}
	k := agentTurnKey{reqID: string(m[1]), turn: 1}
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			k.turn++
		}
	}
	return k, true
}

// agentTally is what the agent invariant found, for its summary.
type agentTally struct {
	asked, journaled, again, cut int
}

// checkAgentTurns holds every model request against the journaled turns:
// a turn whose answer was journaled (its agent_turn event) is never asked
// again after it; a turn asked more than once was cut off by a kill or a
// cancel before its answer was journaled, so a daemon died at least that
// many times.
func checkAgentTurns(w *world, f *final) []string {
	_, bad := tallyAgentTurns(w, f)
	return bad
}

func tallyAgentTurns(w *world, f *final) (agentTally, []string) {
	var t agentTally
	var bad []string
	journaled := map[agentTurnKey]time.Time{}
	// cut is what each journaled turn reports crashes may have cut off
	// of it before it was journaled (its agent_turn event's cut).
	cut := map[agentTurnKey]int{}
	for _, v := range f.runs {
		if !isAgentFlow(v.Flow) {
			continue
		}
		reqID, ok := inputID(v)
		if !ok {
			bad = append(bad, fmt.Sprintf("agent run %s has no request id in its input", v.ID))
			continue
		}
		for _, e := range f.events[v.ID] {
			if e.Type != "agent_turn" {
				continue
			}
			n, _ := e.Detail["turn"].(float64)
			k := agentTurnKey{reqID: reqID, turn: int(n)}
			if _, dup := journaled[k]; dup {
				bad = append(bad, fmt.Sprintf("run %s journaled turn %d twice", v.ID, k.turn))
			}
			journaled[k] = e.At
			t.journaled++
			c, _ := e.Detail["cut"].(float64)
			cut[k] = int(c)
			t.cut += int(c)
		}
	}
	asked := map[agentTurnKey]int{}
	for _, r := range f.modelRequests {
		k, ok := requestTurn(r.Body)
		if !ok {
			bad = append(bad, fmt.Sprintf("a model request names no agent task: %.200s", r.Body))
			continue
		}
		t.asked++
		asked[k]++
		if at, ok := journaled[k]; ok && r.At.After(at) {
			bad = append(bad, fmt.Sprintf("%s's turn %d was asked again at %s, after its answer was journaled at %s",
				k.reqID, k.turn, r.At.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano)))
		}
	}
	kills := 0
	for _, n := range f.kills {
		kills += n
	}
	for k, n := range asked {
		t.again += n - 1
		if n-1 > kills {
			bad = append(bad, fmt.Sprintf("%s's turn %d was asked %d times with %d kills in all", k.reqID, k.turn, n, kills))
		}
		if _, ok := journaled[k]; ok && n-1 > cut[k] {
			// The turn's report is the upper bound of the asks crashes
			// cut off: it may count too many, never too few.
			bad = append(bad, fmt.Sprintf("%s's turn %d was asked %d times, and its record reports %d asks cut off", k.reqID, k.turn, n, cut[k]))
		}
	}
	if countFlow(f, agentKind.flow) > 0 && countFlowPhase(f, agentKind.flow, apitypes.PhaseCompleted) == 0 {
		bad = append(bad, fmt.Sprintf("none of the %d agent runs completed: the agent kind was not exercised", countFlow(f, agentKind.flow)))
	}
	for k := range journaled {
		if asked[k] == 0 {
			bad = append(bad, fmt.Sprintf("%s's turn %d is journaled but the model was never asked it", k.reqID, k.turn))
		}
	}
	return t, bad
}

// hasEvent says whether the timeline holds an event of type typ.
// killedTooOften says run v failed as kills may fail any run by design:
// its task lost its lease to them more often than a task may
// (E_ATTEMPTS_EXCEEDED, with an expired lease in its timeline).
func killedTooOften(v *apitypes.Run, evs []apitypes.Event) bool {
	return v.Phase == apitypes.PhaseFailed && errCode(v) == "E_ATTEMPTS_EXCEEDED" && hasEvent(evs, "expired")
}

// lostTooManyLeases says run v failed as kills may fail any run by
// design (killedTooOften), also when a call of it that is not idempotent
// had started then, which makes its error E_OUTCOME_UNKNOWN with the lost
// leases in its message.
func lostTooManyLeases(v *apitypes.Run, evs []apitypes.Event) bool {
	return killedTooOften(v, evs) || v.Phase == apitypes.PhaseFailed && errCode(v) == "E_OUTCOME_UNKNOWN" &&
		v.Error != nil && strings.Contains(v.Error.Message, "lost its lease") && hasEvent(evs, "expired")
}

func hasEvent(evs []apitypes.Event, typ string) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// countEvents counts the events of type typ in a timeline.
func countEvents(evs []apitypes.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// inputID returns the request id a client-started run was sent with.
func inputID(v apitypes.Run) (string, bool) {
	var in map[string]any
	if json.Unmarshal(v.Input, &in) != nil {
		return "", false
	}
	id, ok := in["id"].(string)
	return id, ok && strings.HasPrefix(id, "req-")
}

// agentKinds are the kinds whose runs are agents asking the soak's
// model: every journaled turn of theirs is held against its requests.
var agentKinds = []*kind{agentKind, steerKind, topupKind}

func isAgentFlow(flow string) bool {
	for _, k := range agentKinds {
		if k.flow == flow {
			return true
		}
	}
	return false
}

func agentSummary(w *world, f *final) string {
	t, _ := tallyAgentTurns(w, f)
	n := 0
	for _, k := range agentKinds {
		n += countFlow(f, k.flow)
	}
	return fmt.Sprintf("%d agent runs; the model was asked %d turns, %d journaled, %d asked again after a kill or cancel cut them off, none after its answer was journaled; the turns report %d asks cut off (an upper bound, at their reservations)",
		n, t.asked, t.journaled, t.again, t.cut)
}
