package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/store/storecount"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk/chat"
)

// fakeModel stands in for the plugin host in agent tests: a chat tool that
// plays a script of answers, and a few tools the agent may call. It is
// the seam the engine's Tools interface offers; the real llm plugin is
// tested with its own scripted server.
type fakeModel struct {
	mu sync.Mutex
	// script holds the answers of the model, one per turn, in order.
	script   []chat.Response
	requests []chat.Request
	// calls counts the calls of each non-model tool that reached it.
	calls map[string]int
	// blockSend makes mail.send wait for its context's end after
	// signalling sendStarted: a crash in the middle of a side effect.
	blockSend   bool
	sendStarted chan struct{}
	// together counts kv.get calls running at once; maxTogether is the
	// most seen.
	together, maxTogether int
	// gate holds kv.get calls until openAt of them are running at once.
	gate   chan struct{}
	openAt int
	// reportCost makes the model tool report the cost of each turn.
	reportCost int64
	// rateLimited is how many model turns fail with a retryable rate
	// limit before the script is played, each reporting wasteIn input
	// tokens used.
	rateLimited int
	wasteIn     int64
	// clock, when set, moves by think at every model turn: the time a
	// model takes to answer.
	clock *clock.Fake
	think time.Duration
	// prices of model "small", per million tokens.
	inputCost, outputCost int64
	// onTurn, when set, runs at every model turn, before it answers.
	onTurn func()
	// pricedReport is what each kv.priced call reports it cost (it
	// declares kvPricedCost); 0 reports the declared cost.
	pricedReport int64
	// loses is how many mail.lose calls lose their answer (an unknown
	// outcome) before one answers.
	loses int
	// posted holds the input of each mail.post call, in order.
	posted []string
	// limits are model "small"'s declared provider limits; turnsAt the
	// fake clock's time at each model turn, admitted whether the engine
	// said it admitted the turn against them.
	limits   flows.ModelLimits
	turnsAt  []time.Time
	admitted []bool
}

// kvPricedCost is kv.priced's declared cost per call.
const kvPricedCost = 5

func newFakeModel(script ...chat.Response) *fakeModel {
	return &fakeModel{script: script, calls: map[string]int{}, sendStarted: make(chan struct{}, 1)}
}

func (f *fakeModel) LookupTool(name string) (flows.ToolInfo, bool) {
	switch name {
	case "llm.chat":
		return flows.ToolInfo{Name: name, Idempotent: true, Chat: true, Cost: 7,
			Models: []flows.ModelInfo{{Alias: "small", MaxTokens: 100, InputCost: f.inputCost, OutputCost: f.outputCost, Limits: f.limits}}}, true
	case "kv.get":
		return flows.ToolInfo{Name: name, Idempotent: true, Description: "Reads a key.",
			InputSchema: []byte(`{"type":"object","properties":{"key":{"type":"string"}}}`)}, true
	case "kv.fail":
		return flows.ToolInfo{Name: name, Idempotent: true, Description: "Always fails."}, true
	case "kv.tick":
		return flows.ToolInfo{Name: name, Idempotent: true, Description: "Reads a counter that moves at every read."}, true
	case "kv.priced":
		return flows.ToolInfo{Name: name, Idempotent: true, Description: "Reads a key for a price.", Cost: kvPricedCost}, true
	case "mail.send":
		return flows.ToolInfo{Name: name, Description: "Sends mail."}, true
	case "mail.lose":
		return flows.ToolInfo{Name: name, Description: "Sends mail; loses answers.", OutputSchema: []byte(`{"type":"object","required":["sent"]}`)}, true
	case "mail.post":
		return flows.ToolInfo{Name: name, Description: "Posts mail.",
			InputSchema:  []byte(`{"type":"object","required":["to"],"properties":{"to":{"type":"string"},"body":{"type":"string"}},"additionalProperties":false}`),
			OutputSchema: []byte(`{"type":"object","required":["sent"],"properties":{"sent":{"type":"boolean"}}}`)}, true
	case "kv.many":
		return flows.ToolInfo{Name: name, Idempotent: true, Description: "Reads many keys.",
			InputSchema: []byte(`{"type":"array","items":{"type":"string"}}`)}, true
	}
	return flows.ToolInfo{}, false
}

// atGate counts a call of tool and, while a gate is set, holds it until
// openAt calls are in flight together; leave ends the call's count.
func (f *fakeModel) atGate(ctx context.Context, tool string) (leave func(), err error) {
	f.mu.Lock()
	f.calls[tool]++
	f.together++
	f.maxTogether = max(f.maxTogether, f.together)
	gate := f.gate
	if gate != nil && f.together == f.openAt {
		close(gate)
		f.gate = nil
	}
	f.mu.Unlock()
	leave = func() {
		f.mu.Lock()
		f.together--
		f.mu.Unlock()
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return leave, ctx.Err()
		}
	}
	return leave, nil
}

func (f *fakeModel) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	switch req.Tool {
	case "llm.chat":
		f.mu.Lock()
		defer f.mu.Unlock()
		var r chat.Request
		if err := json.Unmarshal(req.Input, &r); err != nil {
			return nil, &tool.Error{Kind: tool.KindSchema, Message: err.Error()}
		}
		f.requests = append(f.requests, r)
		f.admitted = append(f.admitted, req.ModelAdmitted)
		if f.clock != nil {
			f.turnsAt = append(f.turnsAt, f.clock.Now())
		}
		if f.onTurn != nil {
			f.onTurn()
		}
		if f.clock != nil {
			f.clock.Advance(f.think)
		}
		if f.rateLimited > 0 {
			f.rateLimited--
			return nil, &tool.Error{Kind: tool.KindRetryable, Code: "E_MODEL_RATE", Message: "slow down", InputTokens: f.wasteIn}
		}
		if len(f.script) == 0 {
			return nil, &tool.Error{Kind: tool.KindPermanent, Code: "E_SCRIPT_END", Message: "the script has no more answers"}
		}
		resp := f.script[0]
		f.script = f.script[1:]
		if f.reportCost > 0 {
			return &tool.CallResult{Output: mustJSON(resp), Cost: f.reportCost, CostReported: true}, nil
		}
		return &tool.CallResult{Output: mustJSON(resp), Cost: 7}, nil
	case "kv.get":
		leave, err := f.atGate(ctx, req.Tool)
		defer leave()
		if err != nil {
			return nil, err
		}
		var in map[string]any
		_ = json.Unmarshal(req.Input, &in)
		return &tool.CallResult{Output: mustJSON(map[string]any{"value": fmt.Sprint("v-", in["key"])})}, nil
	case "kv.priced":
		leave, err := f.atGate(ctx, req.Tool)
		defer leave()
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		cost := f.pricedReport
		f.mu.Unlock()
		if cost == 0 {
			cost = kvPricedCost
		}
		return &tool.CallResult{Output: json.RawMessage(`{"value":"priced"}`), Cost: cost, CostReported: true}, nil
	case "kv.many":
		f.count(req.Tool)
		return &tool.CallResult{Output: mustJSON(map[string]any{"got": req.Input})}, nil
	case "kv.tick":
		f.count(req.Tool)
		return &tool.CallResult{Output: mustJSON(map[string]any{"tick": f.called(req.Tool)})}, nil
	case "kv.fail":
		f.count(req.Tool)
		return nil, &tool.Error{Kind: tool.KindPermanent, Code: "E_KV_DOWN", Message: "the store is down"}
	case "mail.lose":
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls[req.Tool]++
		if f.loses > 0 {
			f.loses--
			return nil, &tool.Error{Kind: tool.KindUnknown, Message: "the answer was lost"}
		}
		return &tool.CallResult{Output: mustJSON(map[string]any{"sent": true, "call": f.calls[req.Tool]})}, nil
	case "mail.post":
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls[req.Tool]++
		f.posted = append(f.posted, string(req.Input))
		return &tool.CallResult{Output: json.RawMessage(`{"sent":true}`)}, nil
	case "mail.send":
		f.count(req.Tool)
		if f.blockSend {
			f.sendStarted <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &tool.CallResult{Output: json.RawMessage(`{"sent":true}`)}, nil
	}
	return nil, &tool.Error{Kind: tool.KindUnknownTool, Message: req.Tool}
}

func (f *fakeModel) count(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[name]++
}

func (f *fakeModel) called(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeModel) asked() []chat.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chat.Request(nil), f.requests...)
}

// Script helpers: a turn asking for tool calls, and a final answer.
func askTools(usage chat.Usage, calls ...chat.ToolCall) chat.Response {
	return chat.Response{Message: chat.Message{Role: chat.RoleAssistant, ToolCalls: calls}, StopReason: "tool_use", Usage: usage, Model: "m"}
}

func answer(text string, usage chat.Usage) chat.Response {
	return chat.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: text}, StopReason: chat.StopEndTurn, Usage: usage, Model: "m"}
}

// use is a turn's usage: tokens in and out.
func use(in, out int64) chat.Usage { return chat.Usage{InputTokens: in, OutputTokens: out} }

// kvTurns is a script of n turns that each ask for one kv.get and never
// answer.
func kvTurns(n int, usage chat.Usage) []chat.Response {
	var script []chat.Response
	for i := range n {
		script = append(script, askTools(usage, tc(fmt.Sprint("c", i), "kv.get", `{"key":"k"}`)))
	}
	return script
}

func tc(id, name, args string) chat.ToolCall {
	return chat.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

const agentSrc = `
flow(name = "research", nodes = [
    agent("a", model = "small", system = "Be brief.",
          prompt = lambda ctx: "Research " + ctx.input["topic"],
          tools = ["kv.get", "kv.fail", "mail.send"], at_most_once = True, max_turns = 4),
])

flow(name = "bounded", budget = 12, nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 8, max_tokens = 60, error = "fallback"),
    task("fallback", tool = "kv.get"),
])

flow(name = "priced", budget = 37, nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.priced"], max_turns = 4),
])

flow(name = "typed", nodes = [
    agent("a", model = "small", prompt = "Give a number", max_turns = 3,
          output = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}),
])

flow(name = "timed", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 8, timeout = "1m"),
])

flow(name = "capped", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 8, max_tokens = 60, cost = 10),
])

flow(name = "nomodel", nodes = [
    agent("a", model_tool = "llm.chat", prompt = "Go", max_turns = 2),
])

flow(name = "asking", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["mail.lose", "kv.get"], at_most_once = True, max_turns = 3,
          on_unknown = "ask", unknown_timeout = "1h"),
])

flow(name = "not_asking", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["mail.lose"], at_most_once = True, max_turns = 3),
])

flow(name = "approving", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get", "mail.send"], approve = ["mail.send"], max_turns = 3),
])

flow(name = "posting", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["mail.post"], approve = ["mail.post"], max_turns = 3),
])

flow(name = "posting_ttl", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["mail.post"], approve = ["mail.post"], max_turns = 3, approval_ttl = "10m"),
])

flow(name = "posting_ttl_read", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get", "mail.post"], approve = ["mail.post"], max_turns = 3, approval_ttl = "10m"),
])

flow(name = "approving_timed", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["mail.send"], approve = ["mail.send"], max_turns = 3, timeout = "1m", error = "fallback"),
    task("fallback", tool = "kv.get"),
])

flow(name = "helper", doc = "Looks a key up.", input = {"type": "object", "required": ["key"], "properties": {"key": {"type": "string"}}}, nodes = [
    task("h", tool = "kv.get", args = lambda ctx: {"key": ctx.input["key"]}),
])

flow(name = "gated", nodes = [
    wait("ok", next = "h"),
    task("h", tool = "kv.get", args = lambda ctx: {"key": "g"}),
])

flow(name = "delegating_gate", nodes = [
    agent("a", model = "small", prompt = "Go", flows = ["gated"], max_turns = 3),
])

flow(name = "gated_budget", budget = 30, nodes = [
    wait("ok", next = "h"),
    task("h", tool = "kv.priced"),
])

flow(name = "delegating_two", budget = 100, nodes = [
    agent("a", model = "small", prompt = "Go", flows = ["gated_budget", "gated"], max_turns = 3),
])

flow(name = "batching", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.many"], max_turns = 3),
])

flow(name = "delegating", nodes = [
    agent("a", model = "small", prompt = "Go", flows = ["helper"], max_turns = 3),
])

flow(name = "looping", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get", "kv.tick", "kv.fail"], max_turns = 12),
])

flow(name = "looping3", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 12, repeat_limit = 3),
])

flow(name = "looping_fail", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 12, on_runaway = "fail"),
])

flow(name = "bounded_ask", budget = 12, on_budget = "ask", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 8),
])

flow(name = "long", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 100),
])

flow(name = "agent_then", nodes = [
    agent("a", model = "small", prompt = "Go", tools = ["kv.get"], max_turns = 3, next = "after"),
    task("after", tool = "kv.get", args = lambda ctx: {"key": ctx.results["a"]["answer"] + ctx.input["suffix"]}),
])
`

// agentBundle is an engine over a memstore with a fake clock and the fake
// model's tools.
type agentBundle struct {
	eng      *Engine
	st       *memstore.Store
	stopOnce sync.Once
	model    *fakeModel
	clock    *clock.Fake
}

func setupAgent(t *testing.T, st *memstore.Store, fk *clock.Fake, m *fakeModel) *agentBundle {
	t.Helper()
	return setupAgentConfig(t, Config{Store: st, Tools: m, Clock: fk}, m)
}

func setupAgentConfig(t *testing.T, cfg Config, m *fakeModel) *agentBundle {
	t.Helper()
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, time.Millisecond
	if cfg.LeaseTimeout == 0 {
		// The fake clock's jumps stand for a model's thinking time: a
		// lease must not expire under them while its renewer, a goroutine
		// of its own, has not yet run (then a turn is asked twice, as
		// after a real lost lease).
		cfg.LeaseTimeout = 24 * time.Hour
	}
	if cfg.QueueTimeout == 0 {
		// Nor may a queued task's deadline pass under them: a jump past
		// an approval's TTL while the approved call's task waits for its
		// dispatch dropped it with E_QUEUE_TIMEOUT
		// (TestAgentApprovalInTimeBeatsItsExpiry, twice under load).
		cfg.QueueTimeout = 24 * time.Hour
	}
	st, _ := cfg.Store.(*memstore.Store)
	if h, ok := cfg.Store.(*hookedStore); ok {
		st = h.Store
	}
	if c, ok := cfg.Store.(*storecount.Store); ok {
		st = c.Store.(*memstore.Store)
	}
	fk := cfg.Clock.(*clock.Fake)
	eng, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Register(context.Background(), []SourceFile{{Path: "agent.star", Src: agentSrc}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diagnostics) > 0 {
		t.Fatalf("registering:\n%s", res.Diagnostics)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := &agentBundle{eng: eng, st: st, model: m, clock: fk}
	t.Cleanup(b.stop)
	return b
}

// stop stops the engine, letting held work drain, and closes its store,
// once.
func (b *agentBundle) stop() {
	b.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.eng.Stop(ctx)
		b.st.Close()
	})
}

// crash ends the engine as a kill -9 would: the store is closed first, so
// the data stays as it was, and held work is cut off without draining.
func (b *agentBundle) crash(t *testing.T) {
	t.Helper()
	b.stopOnce.Do(func() {
		if err := b.st.Close(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		b.eng.Stop(ctx)
	})
}

func (b *agentBundle) run(t *testing.T, flow, input string) *store.Run {
	t.Helper()
	return b.runAdvancing(t, flow, input, 0)
}

// runAdvancing is run with the fake clock moved by step before each look
// at the run: past the backoff of the retries it waits for.
func (b *agentBundle) runAdvancing(t *testing.T, flow, input string, step time.Duration) *store.Run {
	t.Helper()
	return b.terminalAdvancing(t, b.submit(t, flow, input), step)
}

// submit starts a run of flow for alice and returns its id.
func (b *agentBundle) submit(t *testing.T, flow, input string) string {
	t.Helper()
	res, err := b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: flow, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatal(err)
	}
	return res.RunID
}

// reopen is a new engine over the data b's store held when it closed (see
// crash), with the same model and clock: the process started again.
func (b *agentBundle) reopen(t *testing.T) *agentBundle {
	t.Helper()
	st, err := b.st.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	return setupAgent(t, st, b.clock, b.model)
}

func (b *agentBundle) terminal(t *testing.T, id string) *store.Run {
	t.Helper()
	return b.terminalAdvancing(t, id, 0)
}

func (b *agentBundle) terminalAdvancing(t *testing.T, id string, step time.Duration) *store.Run {
	t.Helper()
	var run *store.Run
	testutil.Eventually(t, 30*time.Second, func() error {
		if step > 0 {
			b.clock.Advance(step)
		}
		var err error
		if run, err = b.eng.Get(context.Background(), "alice", id); err != nil {
			return err
		}
		if !run.Phase.Terminal() {
			return fmt.Errorf("run %s is %s", id, run.Phase)
		}
		return nil
	})
	return run
}

func (b *agentBundle) turns(t *testing.T, runID string) []*store.AgentTurn {
	t.Helper()
	var turns []*store.AgentTurn
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		turns, err = tx.AgentTurnList(store.AgentTurnListParams{RunID: runID, Node: "a", Visit: 1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return turns
}

func (b *agentBundle) events(t *testing.T, runID, typ string) []*store.Event {
	t.Helper()
	evs, err := b.eng.Events(context.Background(), "alice", runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*store.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

type agentResult struct {
	Answer any `json:"answer"`
	Turns  int `json:"turns"`
	Usage  struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
	Cost int64 `json:"cost"`
}

func resultOf(t *testing.T, run *store.Run) agentResult {
	t.Helper()
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("run %s %+v, want completed", run.Phase, run.Error)
	}
	var r agentResult
	if err := json.Unmarshal(run.Output, &r); err != nil {
		t.Fatalf("output %s: %v", run.Output, err)
	}
	return r
}

// TestAgentToolUseThenAnswer: the model asks for tools (two reads at
// once, a failing tool, a side effect), each result goes back to it under
// its call id, errors with their codes; then it answers and the node's
// result carries the answer, the turns, the usage and the cost.
func TestAgentToolUseThenAnswer(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(100, 10), tc("c1", "kv.get", `{"key":"x"}`), tc("c2", "kv__get", `{"key":"y"}`),
			tc("c3", "kv.fail", `{}`), tc("c4", "mail.send", `{"to":"bob"}`), tc("c5", "web.search", `{}`)),
		answer("done: v-x v-y", use(200, 20)),
	)
	// The two reads are idempotent: both must be running at once before
	// either may return.
	m.gate, m.openAt = make(chan struct{}), 2
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "research", `{"topic":"rivers"}`)
	r := resultOf(t, run)
	if r.Answer != "done: v-x v-y" || r.Turns != 2 || r.Usage.InputTokens != 300 || r.Usage.OutputTokens != 30 || r.Cost != 14 {
		t.Errorf("result %+v: want the answer, 2 turns, 300/30 tokens and cost 14 (the tool's declared 7 a turn)", r)
	}
	if run.Spent != 14 {
		t.Errorf("run spent %d, want the 14 its turns cost", run.Spent)
	}
	reqs := m.asked()
	if len(reqs) != 2 {
		t.Fatalf("%d model turns, want 2", len(reqs))
	}
	first := reqs[0]
	if first.System != "Be brief." || first.Model != "small" || first.MaxTokens != 100 || len(first.Messages) != 1 || first.Messages[0].Content != "Research rivers" {
		t.Errorf("first request %+v", first)
	}
	var names []string
	for _, d := range first.Tools {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "kv.get,kv.fail,mail.send" || first.Tools[0].Description != "Reads a key." || len(first.Tools[0].InputSchema) == 0 {
		t.Errorf("tools offered %+v: want the agent's tools with their descriptions and schemas", first.Tools)
	}
	// The second turn sees the first answer and one tool message per call.
	second := reqs[1].Messages
	if len(second) != 7 || second[1].Role != chat.RoleAssistant || len(second[1].ToolCalls) != 5 {
		t.Fatalf("second request messages %+v", second)
	}
	byID := map[string]chat.Message{}
	for _, msg := range second[2:] {
		if msg.Role != chat.RoleTool {
			t.Errorf("message %+v: want a tool message", msg)
		}
		byID[msg.ToolCallID] = msg
	}
	for id, want := range map[string]string{"c1": `{"value":"v-x"}`, "c2": `{"value":"v-y"}`, "c4": `{"sent":true}`} {
		if byID[id].Content != want || byID[id].IsError {
			t.Errorf("call %s told %+v, want %s", id, byID[id], want)
		}
	}
	for id, code := range map[string]string{"c3": "E_KV_DOWN", "c5": CodeUnknownTool} {
		if !byID[id].IsError || !strings.Contains(byID[id].Content, code) {
			t.Errorf("call %s told %+v, want an error with %s", id, byID[id], code)
		}
	}
	m.mu.Lock()
	together := m.maxTogether
	m.mu.Unlock()
	if together != 2 {
		t.Errorf("at most %d kv.get calls ran at once, want 2", together)
	}
	if m.called("mail.send") != 1 || m.called("kv.get") != 2 || m.called("kv.fail") != 1 {
		t.Errorf("calls %v", m.calls)
	}
	turns := b.turns(t, run.ID)
	if len(turns) != 2 || turns[0].V != store.AgentTurnVersion || len(turns[0].Calls) != 5 || pendingCalls(turns[0]) != 0 ||
		turns[0].RequestBytes == 0 || len(turns[0].RequestDigest) != 64 {
		t.Fatalf("journaled turns %+v", turns)
	}
	if ms := b.eng.Stats().Models; len(ms) != 1 || ms[0] != (ModelStats{Model: "llm.chat/small", Turns: 2, InputTokens: 300, OutputTokens: 30, Cost: 14}) {
		t.Errorf("model stats %+v, want llm.chat/small with 2 turns, 300/30 tokens and cost 14", ms)
	}
	p, err := b.eng.Progress(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Agents) != 1 || p.Agents[0] != (AgentView{Node: "a", Visit: 1, Turns: 2, InputTokens: 300, OutputTokens: 30, Cost: 14}) {
		t.Errorf("progress agents %+v, want node a's 2 turns, 300/30 tokens and cost 14", p.Agents)
	}
	evs := b.events(t, run.ID, evAgentTurn)
	if len(evs) != 2 {
		t.Fatalf("%d agent_turn events, want 2", len(evs))
	}
	if d := evs[0].Detail; d["model"] != "small" || d["input_tokens"] != float64(100) || fmt.Sprint(d["tools"]) != "[kv.get kv.get kv.fail mail.send web.search]" {
		t.Errorf("first turn event %v", d)
	}
}

// TestAgentMaxTurns: a model that never answers takes the node's error
// wire (here: fails the run) with E_MAX_TURNS once max_turns are used,
// and its last turn's calls are not run.
func TestAgentMaxTurns(t *testing.T) {
	t.Parallel()
	m := newFakeModel(kvTurns(5, use(1, 1))...)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "research", `{"topic":"x"}`)
	wantFailed(t, run, CodeMaxTurns)
	if n := len(m.asked()); n != 4 {
		t.Errorf("the model was asked %d turns, want max_turns = 4", n)
	}
	if n := m.called("kv.get"); n != 3 {
		t.Errorf("kv.get ran %d times, want 3 (the last turn's call is not run)", n)
	}
}

// TestAgentBudgetStopsBeforeTheTurn: each turn reserves its worst case
// (request bytes / 3 plus max_tokens, at the model's prices) and settles to
// the reported usage, or to the reservation when no usage is reported;
// when the next turn cannot be covered the node takes its error wire with
// E_BUDGET_EXHAUSTED before the model is asked, and nothing is spent past
// the budget.
func TestAgentBudgetStopsBeforeTheTurn(t *testing.T) {
	t.Parallel()
	// Prices: 200 units per million input tokens, 100_000 per million
	// output. With max_tokens = 60 a turn reserves ceil((prompt*200 +
	// 6_000_000) / 1e6) = 7 (prompts here are far below 5000 tokens).
	prices := flows.ModelInfo{InputCost: 200, OutputCost: 100_000}
	for _, tt := range []struct {
		name  string
		usage chat.Usage
		cost  int64 // of one turn
		turns int   // that budget 12 covers
	}{
		// Settled to 2 a turn: 0+7, 2+7, 4+7 fit in 12; 6+7 does not.
		{"usage reported", use(30, 10), 2, 3},
		// No usage: charged the reservation, 7; 7+7 does not fit.
		{"no usage", chat.Usage{}, 7, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newFakeModel(kvTurns(8, tt.usage)...)
			m.inputCost, m.outputCost = prices.InputCost, prices.OutputCost
			b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
			run := b.run(t, "bounded", `{}`)
			if run.Phase != store.PhaseCompleted {
				t.Fatalf("run %s %+v, want completed through the fallback", run.Phase, run.Error)
			}
			turns := b.turns(t, run.ID)
			var spent int64
			for _, at := range turns {
				if at.Reserved != 7 || at.Cost != tt.cost {
					t.Errorf("turn %d reserved %d cost %d, want 7 and %d", at.Turn, at.Reserved, at.Cost, tt.cost)
				}
				spent += at.Cost
			}
			if len(turns) != tt.turns || len(m.asked()) != tt.turns {
				t.Errorf("%d turns journaled, %d asked, want %d: the turn that cannot be covered is never asked", len(turns), len(m.asked()), tt.turns)
			}
			if spent > 12 || run.Spent != spent {
				t.Errorf("turns cost %d, run spent %d; budget 12", spent, run.Spent)
			}
			failed := b.events(t, run.ID, evNodeFailed)
			if len(failed) != 1 || failed[0].Detail["code"] != CodeBudgetExhausted {
				t.Errorf("node_failed events %+v, want one with %s", failed, CodeBudgetExhausted)
			}
		})
	}
}

// TestAgentOutputSchemaCorrection: a final answer that does not satisfy
// the output schema goes back to the model as a correction turn, counted
// in max_turns; the valid answer is the node's result as JSON.
func TestAgentOutputSchemaCorrection(t *testing.T) {
	t.Parallel()
	m := newFakeModel(answer("seven", use(1, 1)), answer(`{"n": 7}`, use(1, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	r := resultOf(t, b.run(t, "typed", `{}`))
	if fmt.Sprint(r.Answer) != "map[n:7]" || r.Turns != 2 {
		t.Errorf("result %+v, want the JSON answer after 2 turns", r)
	}
	reqs := m.asked()
	if len(reqs) != 2 || len(reqs[1].Messages) != 3 || reqs[1].Messages[2].Role != chat.RoleUser || !strings.Contains(reqs[1].Messages[2].Content, "output schema") {
		t.Fatalf("requests %+v: the second turn carries the correction", reqs)
	}
	if len(reqs[0].OutputSchema) == 0 {
		t.Error("the output schema was not passed to the model tool")
	}
}

// TestAgentCrashAfterJournaledTurn: the process dies while a
// non-idempotent call the journaled turn asked for is running. After a
// restart over the same data the model is not asked that turn again, the
// call is not run again, and the model is told its outcome is unknown.
func TestAgentCrashAfterJournaledTurn(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(10, 1), tc("c1", "kv.get", `{"key":"x"}`), tc("c2", "mail.send", `{"to":"bob"}`)),
		answer("gave up on the mail", use(10, 1)),
	)
	m.blockSend = true
	st := memstore.New()
	fk := clock.NewFake(time.Now())
	b := setupAgent(t, st, fk, m)
	runID := b.submit(t, "research", `{"topic":"x"}`)
	select {
	case <-m.sendStarted:
	case <-time.After(30 * time.Second):
		t.Fatal("mail.send was never called")
	}
	// The crash: the data stays as it was when the call began; nothing
	// the old process does afterwards reaches it.
	b.crash(t)
	if len(m.asked()) != 1 {
		t.Fatalf("%d turns asked before the crash, want 1", len(m.asked()))
	}
	m.mu.Lock()
	m.blockSend = false
	m.mu.Unlock()
	b2 := b.reopen(t)
	run := b2.terminal(t, runID)
	r := resultOf(t, run)
	if r.Answer != "gave up on the mail" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	reqs := m.asked()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d turns in all, want 2: the journaled turn is never asked again", len(reqs))
	}
	if n := m.called("mail.send"); n != 1 {
		t.Errorf("mail.send ran %d times, want once: a non-idempotent call is never run again", n)
	}
	var told *chat.Message
	for i, msg := range reqs[1].Messages {
		if msg.ToolCallID == "c2" {
			told = &reqs[1].Messages[i]
		}
	}
	if told == nil || !told.IsError || !strings.Contains(told.Content, CodeOutcomeUnknown) {
		t.Errorf("the model was told %+v about the mail, want %s", told, CodeOutcomeUnknown)
	}
}

// TestAgentTurnRetriedAndFailed: a retryable model error parks the run and
// retries the same turn after the backoff (no turn journaled twice); a
// permanent one fails the node with the tool's own code.
func TestAgentTurnRetriedAndFailed(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(1, 1), tc("c1", "kv.get", `{"key":"x"}`)), answer("ok", use(1, 1)))
	m.rateLimited = 1
	fk := clock.NewFake(time.Now())
	b := setupAgent(t, memstore.New(), fk, m)
	run := b.runAdvancing(t, "research", `{"topic":"x"}`, 10*time.Millisecond) // past the retry's backoff
	if r := resultOf(t, run); r.Answer != "ok" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	if n := len(m.asked()); n != 3 {
		t.Errorf("the model tool was called %d times, want 3 (one rate-limited try, two turns)", n)
	}
	if n := len(b.turns(t, run.ID)); n != 2 {
		t.Errorf("%d turns journaled, want 2", n)
	}
	if evs := b.events(t, run.ID, evRetry); len(evs) != 1 || evs[0].Detail["code"] != "E_MODEL_RATE" ||
		evs[0].Detail["turn"] != float64(1) || evs[0].Detail["item"] != nil {
		t.Errorf("retry events %+v, want one for the rate limit naming turn 1", evs)
	}
	// The failed try reported no usage: nothing is shown as its waste,
	// but the try is counted with the turn that answered.
	if turns := b.turns(t, run.ID); turns[0].Retried != 1 || turns[0].RetriedUsage != (store.AgentUsage{}) || turns[1].Retried != 0 {
		t.Errorf("turns' retries %d %+v / %d, want 1 with no usage on turn 1", turns[0].Retried, turns[0].RetriedUsage, turns[1].Retried)
	}

	failed := b.run(t, "research", `{"topic":"y"}`) // the script is spent
	if failed.Phase != store.PhaseFailed || failed.Error == nil || failed.Error.Code != "E_SCRIPT_END" {
		t.Errorf("run %s %+v, want failed with the model tool's code", failed.Phase, failed.Error)
	}
}

// TestAgentTurnBeyondBudgetInFlight: a turn whose worst case is more than
// the engine ever lets be in flight can never be admitted; the node takes
// its error wire with E_BUDGET_IN_FLIGHT instead of waiting forever, and
// the model is not asked.
func TestAgentTurnBeyondBudgetInFlight(t *testing.T) {
	t.Parallel()
	m := newFakeModel(answer("never", use(1, 1)))
	m.inputCost, m.outputCost = 200, 100_000 // a turn reserves 7
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: clock.NewFake(time.Now()), MaxBudgetInFlight: 5}, m)
	run := b.run(t, "bounded", `{}`)
	if run.Phase != store.PhaseCompleted {
		t.Fatalf("run %s %+v, want completed through the fallback", run.Phase, run.Error)
	}
	failed := b.events(t, run.ID, evNodeFailed)
	if len(failed) != 1 || failed[0].Detail["code"] != "E_BUDGET_IN_FLIGHT" {
		t.Errorf("node_failed events %+v, want one with E_BUDGET_IN_FLIGHT", failed)
	}
	if len(m.asked()) != 0 {
		t.Error("the model was asked a turn that could not be admitted")
	}
}

// TestAgentMalformedResponse: a model tool whose answer is not a chat
// response (no stop reason here) fails the node with E_MODEL_RESPONSE; it
// is not taken for an empty final answer.
func TestAgentMalformedResponse(t *testing.T) {
	t.Parallel()
	m := newFakeModel(chat.Response{Message: chat.Message{Content: "hi"}})
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "typed", `{}`)
	wantFailed(t, run, CodeModelResponse)
}

// TestAgentTimeoutBoundsTheLoop: the node's timeout bounds the whole loop,
// from its first turn: once it has passed the node takes its error wire
// with E_AGENT_TIMEOUT and the model is not asked again.
func TestAgentTimeoutBoundsTheLoop(t *testing.T) {
	t.Parallel()
	m := newFakeModel(kvTurns(8, use(1, 1))...)
	fk := clock.NewFake(time.Now())
	m.clock, m.think = fk, 40*time.Second
	b := setupAgent(t, memstore.New(), fk, m)
	run := b.run(t, "timed", `{}`)
	wantFailed(t, run, CodeAgentTimeout)
	// Asked at 0s and 40s; at 80s the minute has passed.
	if n := len(m.asked()); n != 2 {
		t.Errorf("the model was asked %d turns, want 2 within the minute", n)
	}
}

// TestAgentNodeCostCapsTurnsAndCalls: the node's cost bounds what its
// turns and calls spend together, checked before each turn like the run's
// budget.
func TestAgentNodeCostCapsTurnsAndCalls(t *testing.T) {
	t.Parallel()
	m := newFakeModel(kvTurns(8, use(30, 10))...)
	m.inputCost, m.outputCost = 200, 100_000 // a turn reserves 7 and costs 2
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "capped", `{}`)
	wantFailed(t, run, CodeBudgetExhausted)
	// 0+7 and 2+7 fit in 10; 4+7 does not.
	if n := len(m.asked()); n != 2 || run.Spent != 4 {
		t.Errorf("%d turns asked, run spent %d; want 2 turns and 4", n, run.Spent)
	}
}

// TestAgentCrashBeforeCallsEnd: the process dies after a turn is journaled
// while the idempotent call it asked for runs. After a restart the model is
// not asked that turn again; the call runs again (it is idempotent, under
// the same key) and its result reaches the next turn.
func TestAgentCrashBeforeCallsEnd(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(10, 1), tc("c1", "kv.get", `{"key":"x"}`)), answer("ok", use(10, 1)))
	m.gate, m.openAt = make(chan struct{}), 99 // never opens: kv.get runs until the crash
	st := memstore.New()
	fk := clock.NewFake(time.Now())
	b := setupAgent(t, st, fk, m)
	runID := b.submit(t, "research", `{"topic":"x"}`)
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := m.called("kv.get"); n != 1 {
			return fmt.Errorf("kv.get called %d times", n)
		}
		return nil
	})
	b.crash(t)
	m.mu.Lock()
	m.gate = nil
	m.mu.Unlock()
	b2 := b.reopen(t)
	r := resultOf(t, b2.terminal(t, runID))
	if r.Answer != "ok" || r.Turns != 2 {
		t.Errorf("result %+v", r)
	}
	reqs := m.asked()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d turns in all, want 2", len(reqs))
	}
	if n := m.called("kv.get"); n != 2 {
		t.Errorf("kv.get called %d times, want 2 (once cut off, once again after the restart)", n)
	}
	if msgs := reqs[1].Messages; len(msgs) != 3 || msgs[2].ToolCallID != "c1" || msgs[2].Content != `{"value":"v-x"}` {
		t.Errorf("second turn's messages %+v, want the call's result", msgs)
	}
}

// TestAgentRepeatsOnlyValidCalls: calls a model gives without ids, with
// repeated ids, under the provider's form of a name or with arguments that
// are not an object are journaled so that the next request is one the
// chat contract accepts; the call with bad arguments is not run and the
// model is told why.
func TestAgentRepeatsOnlyValidCalls(t *testing.T) {
	t.Parallel()
	m := newFakeModel(
		askTools(use(1, 1), tc("", "kv__get", `{"key":"x"}`), tc("", "kv.get", `[1]`), tc("d", "kv.get", `{"key":"y"}`), tc("d", "kv.get", `{"key":"z"}`)),
		answer("ok", use(1, 1)),
	)
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	resultOf(t, b.run(t, "research", `{"topic":"x"}`))
	reqs := m.asked()
	if len(reqs) != 2 {
		t.Fatalf("%d turns asked", len(reqs))
	}
	msgs := reqs[1].Messages
	ids := map[string]bool{}
	for _, c := range msgs[1].ToolCalls {
		if c.ID == "" || ids[c.ID] || c.Name != "kv.get" || !isJSONObject(c.Arguments) {
			t.Errorf("repeated call %+v: want a unique id, the weir name and object arguments", c)
		}
		ids[c.ID] = true
	}
	bad := 0
	for _, msg := range msgs[2:] {
		if !ids[msg.ToolCallID] {
			t.Errorf("tool message %+v answers no call", msg)
		}
		if msg.IsError {
			bad++
			if !strings.Contains(msg.Content, CodeBadInput) {
				t.Errorf("tool message %+v, want %s", msg, CodeBadInput)
			}
		}
	}
	if len(msgs) != 6 || bad != 1 {
		t.Errorf("%d messages with %d errors, want 4 tool messages, one an error", len(msgs), bad)
	}
	if n := m.called("kv.get"); n != 3 {
		t.Errorf("kv.get ran %d times, want 3 (not the call with bad arguments)", n)
	}
}

// TestAgentRequestTheContractRefuses: a turn whose request the chat
// contract would refuse (here: no model alias) fails the node with
// E_CHAT_REQUEST before the model tool is called.
func TestAgentRequestTheContractRefuses(t *testing.T) {
	t.Parallel()
	m := newFakeModel(answer("x", use(1, 1)))
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	run := b.run(t, "nomodel", `{}`)
	wantFailed(t, run, CodeChatRequest)
	if !strings.Contains(run.Error.Message, "model") {
		t.Fatalf("run %s %+v, want failed with %s about the model", run.Phase, run.Error, CodeChatRequest)
	}
	if len(m.asked()) != 0 {
		t.Error("the model tool was called with a request the contract refuses")
	}
}

// TestAgentTurnRetriesExhausted: a model that stays rate-limited is tried
// agentTurnRetries + 1 times, then the turn is dead-lettered under the
// model tool and the node fails with E_RETRIES_EXHAUSTED.
func TestAgentTurnRetriesExhausted(t *testing.T) {
	t.Parallel()
	m := newFakeModel(answer("never", use(1, 1)))
	m.rateLimited = 100
	fk := clock.NewFake(time.Now())
	b := setupAgent(t, memstore.New(), fk, m)
	run := b.runAdvancing(t, "typed", `{}`, 10*time.Millisecond) // past each retry's backoff
	wantFailed(t, run, CodeRetriesExhausted)
	if n := len(m.asked()); n != agentTurnRetries+1 {
		t.Errorf("the model tool was tried %d times, want %d", n, agentTurnRetries+1)
	}
	dls, err := b.eng.Ops().DeadLetters(context.Background(), "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Tool != "llm.chat" || dls[0].Node != "a" || len(dls[0].Errors) != agentTurnRetries+1 {
		t.Errorf("dead letters %+v, want one for llm.chat at node a with every try's error", dls)
	}
	if n := len(b.turns(t, run.ID)); n != 0 {
		t.Errorf("%d turns journaled for a turn that never answered", n)
	}
}

// TestAgentCallsTogetherBounded: a turn asking for more idempotent calls
// than maxAgentCallsTogether runs that many at once, and all of them.
func TestAgentCallsTogetherBounded(t *testing.T) {
	t.Parallel()
	var calls []chat.ToolCall
	for i := range maxAgentCallsTogether + 2 {
		calls = append(calls, tc(fmt.Sprint("c", i), "kv.get", fmt.Sprintf(`{"key":"k%d"}`, i)))
	}
	m := newFakeModel(askTools(use(1, 1), calls...), answer("ok", use(1, 1)))
	// Every call holds until the test lets them go, once the bound is
	// running: a call beyond the bound would be running by then too.
	m.gate, m.openAt = make(chan struct{}), -1
	b := setupAgent(t, memstore.New(), clock.NewFake(time.Now()), m)
	runID := b.submit(t, "research", `{"topic":"x"}`)
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := m.called("kv.get"); n < maxAgentCallsTogether {
			return fmt.Errorf("%d calls started", n)
		}
		return nil
	})
	m.mu.Lock()
	close(m.gate)
	m.mu.Unlock()
	resultOf(t, b.terminal(t, runID))
	m.mu.Lock()
	most := m.maxTogether
	m.mu.Unlock()
	if most != maxAgentCallsTogether {
		t.Errorf("at most %d calls ran together, want %d", most, maxAgentCallsTogether)
	}
	if n := m.called("kv.get"); n != maxAgentCallsTogether+2 {
		t.Errorf("kv.get ran %d times, want %d", n, maxAgentCallsTogether+2)
	}
}

// TestAgentCancelRecordedElsewhereQueuesNoCall: another daemon of a fleet
// records the run's cancel in the store while the model answers, and this
// engine has not heard of it yet. The turn's calls are never queued, none
// is made, and the run ends cancelled.
func TestAgentCancelRecordedElsewhereQueuesNoCall(t *testing.T) {
	t.Parallel()
	m := newFakeModel(askTools(use(100, 10), tc("c1", "kv.get", `{"key":"x"}`), tc("c2", "mail.send", `{"to":"bob"}`)),
		answer("never asked", use(1, 1)))
	st := memstore.New()
	m.onTurn = func() {
		err := st.Update(context.Background(), func(tx store.Tx) error {
			runs, err := tx.RunList(store.RunListParams{})
			if err != nil {
				return err
			}
			for _, r := range runs {
				r.CancelRequested = true
				if err := tx.RunUpdate(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	b := setupAgent(t, st, clock.NewFake(time.Now()), m)
	run := b.run(t, "research", `{"topic":"rivers"}`)
	if run.Phase != store.PhaseCancelled {
		t.Fatalf("%s %+v: want cancelled", run.Phase, run.Error)
	}
	if m.called("kv.get") != 0 || m.called("mail.send") != 0 || len(m.asked()) != 1 {
		t.Errorf("calls %v after %d turns: a cancelled run's calls must never be made", m.calls, len(m.asked()))
	}
}
