package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/chat"
)

// plugin holds what outlives one call: the parsed config with its
// provider clients and per-model limiters. A plugin process receives one
// config; sdktest may pass several, so they are kept by their text.
type plugin struct {
	getenv func(string) (string, bool)
	now    func() time.Time
	// jitter(n) is uniform in [0, n): the spread of overload backoffs.
	jitter func(n int64) int64

	mu      sync.Mutex
	configs map[string]*setup
}

// setup is one config made ready for calls.
type setup struct {
	err       error
	cfg       *config
	providers map[string]provider
	limiters  map[string]*limiter
	keys      []string // every key, to redact
}

// provider makes one streamed model turn. A turn that fails may still
// return a response carrying only the usage the provider reported before
// it failed.
type provider interface {
	turn(ctx context.Context, t *turnRequest) (*chat.Response, error)
}

// turnRequest is one turn as a provider sees it.
type turnRequest struct {
	req       *chat.Request
	model     *modelConfig
	maxTokens int64
	// offers are the request's tools as this provider accepts them.
	offers []offer
	// names maps the provider-side tool names offered back to weir's.
	names map[string]string
	// progress reports the output tokens streamed so far.
	progress func(outputTokens int64)
	// text shows a delta of the answer's text as it streams (sdk's
	// Call.Partial: a no-op unless someone watches).
	text func(delta string)
	// run and node identify the agent asking (empty for `weir tool
	// call`), and traceparent is the turn's place in the run's trace;
	// they go out as the headers of callerHeaders.
	run, node, traceparent, tracestate string
}

// The headers that tell a model endpoint which run and node a turn is for:
// a gateway can log them, and the scripted model server matches a step to
// an agent by its node; and the W3C traceparent, so a gateway's or
// provider's spans join the run's trace. Providers ignore headers they do
// not know.
const (
	headerRun   = "X-Weir-Run"
	headerNode  = "X-Weir-Node"
	headerTrace = "traceparent"
	headerState = "tracestate"
)

// maxCallerHeader bounds the value of a caller header; a tracestate may
// take the 512 characters the W3C spec asks to be passed on.
const (
	maxCallerHeader = 256
	maxTraceState   = 512
)

// callerHeaders are the caller headers of t, each left out when its value
// is empty, longer than maxCallerHeader (a tracestate maxTraceState) or
// not printable ASCII (run ids and node ids are identifiers, the trace
// headers W3C's; anything else is not sent).
func (t *turnRequest) callerHeaders() map[string]string {
	h := map[string]string{}
	for name, v := range map[string]string{headerRun: t.run, headerNode: t.node, headerTrace: t.traceparent, headerState: t.tracestate} {
		limit := maxCallerHeader
		if name == headerState {
			limit = maxTraceState
		}
		if v != "" && len(v) <= limit && printableASCII(v) {
			h[name] = v
		}
	}
	return h
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func newPlugin(getenv func(string) (string, bool)) *plugin {
	return &plugin{getenv: getenv, now: time.Now, jitter: rand.Int64N, configs: map[string]*setup{}}
}

func (p *plugin) tool() sdk.Tool {
	return sdk.Tool{
		Name: "llm.chat",
		Description: "One model turn in the chat contract (" + chat.Contract + "): the conversation and the tools on offer in, " +
			"the model's text or tool calls out, with usage and cost. The model is an alias of the llm plugin's config.",
		Effect:       sdk.EffectRead,
		Contract:     chat.Contract,
		InputSchema:  chat.RequestSchema,
		OutputSchema: chat.ResponseSchema,
		Run:          p.run,
	}
}

// tools is the plugin's manifest for its config section raw: llm.chat
// with the configured models. A config the plugin refuses yields llm.chat
// without models: registration then refuses every alias, and a call
// answers why the config is refused (E_CONFIG) rather than the plugin
// failing to start.
func (p *plugin) tools(raw json.RawMessage) ([]sdk.Tool, error) {
	t := p.tool()
	if s := p.setupFor(raw); s.err == nil {
		for _, alias := range sortedKeys(s.cfg.Models) {
			m := s.cfg.Models[alias]
			t.Models = append(t.Models, sdk.Model{Alias: alias, MaxTokens: m.MaxTokens, InputCost: m.InputCost, OutputCost: m.OutputCost,
				MaxConcurrent: m.MaxConcurrent, RequestsPerMinute: m.RequestsPerMinute, TokensPerMinute: m.TokensPerMinute})
		}
	}
	return []sdk.Tool{t}, nil
}

// setupFor parses raw once and builds its clients and limiters.
func (p *plugin) setupFor(raw json.RawMessage) *setup {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.configs[string(raw)]; ok {
		return s
	}
	s := &setup{providers: map[string]provider{}, limiters: map[string]*limiter{}}
	s.cfg, s.err = parseConfig(raw, p.getenv)
	if s.err == nil {
		for name, pc := range s.cfg.Providers {
			s.keys = append(s.keys, pc.apiKey)
			client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
			switch pc.Kind {
			case kindOpenAI:
				s.providers[name] = newOpenAI(pc, client)
			case kindOpenAIResponses:
				s.providers[name] = newResponses(pc, client)
			case kindAnthropic:
				s.providers[name] = newAnthropic(pc, client)
			}
		}
		for alias, m := range s.cfg.Models {
			s.limiters[alias] = newLimiter(m, p.now)
		}
	}
	p.configs[string(raw)] = s
	return s
}

func (p *plugin) run(ctx context.Context, call *sdk.Call) (any, error) {
	s := p.setupFor(call.Config)
	if s.err != nil {
		return nil, failf(codeConfig, false, "the llm plugin's config is refused: %s", redact(s.err.Error(), s.keys)).toolError()
	}
	var req chat.Request
	if err := json.Unmarshal(call.Input, &req); err != nil {
		return nil, failf(codeBadRequest, false, "the input is not a chat request: %v", err).toolError()
	}
	if err := req.Validate(); err != nil {
		return nil, failf(codeBadRequest, false, "%v", err).toolError()
	}
	m, ok := s.cfg.Models[req.Model]
	if !ok {
		return nil, failf(codeBadRequest, false, "unknown model alias %q (configured: %s)", req.Model, strings.Join(sortedKeys(s.cfg.Models), ", ")).toolError()
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = m.MaxTokens
	}
	if maxTokens > m.MaxTokens {
		return nil, failf(codeBadRequest, false, "max_tokens %d is above the %d that model %q allows", maxTokens, m.MaxTokens, m.Alias).toolError()
	}
	names := make(map[string]string, len(req.Tools))
	for _, t := range req.Tools {
		mapped, _ := chat.ProviderToolName(t.Name) // Validate checked it
		names[mapped] = t.Name
	}
	pc := s.cfg.Providers[m.Provider]
	offered, oerr := offers(pc.Kind, req.Tools)
	if oerr != nil {
		return nil, oerr.toolError()
	}
	estimate := chat.EstimateInputTokens(&req)
	// weir admitted the turn against the limits this plugin declared
	// (docs/design.md §9); only a call it did not (`weir tool call`, an
	// older host) is counted here.
	settle := func(int64) {}
	if !call.ModelAdmitted {
		var lerr *modelError
		if settle, lerr = s.limiters[m.Alias].acquire(estimate + maxTokens); lerr != nil {
			return nil, lerr.toolError()
		}
	}
	used := int64(-1) // unknown until the provider answers
	defer func() { settle(used) }()

	resp, err := s.providers[m.Provider].turn(ctx, &turnRequest{
		req: &req, model: m, maxTokens: maxTokens, offers: offered, names: names,
		progress: func(out int64) { call.Progress(out, maxTokens) },
		text:     call.Partial,
		run:      call.RunID, node: call.Node, traceparent: call.TraceParent, tracestate: call.TraceState,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		me := classify(err, fmt.Sprintf("provider %q (%s, model %s)", pc.Name, pc.Kind, m.Model), p.now())
		me.Msg = redact(me.Msg, s.keys)
		if resp != nil { // what the provider said the failed turn used
			me.used = resp.Usage
		}
		if me.overload && me.Retryable && me.RetryAfter == 0 {
			// The provider named no wait: back off in seconds, not at
			// the engine's base, which would spend the retries at once.
			me.RetryAfter = overloadBackoff(call.Attempt, p.jitter)
		}
		if refusedBeforeTurn(me.Code) {
			used = 0
		}
		call.Logger().Warn("model call failed", "model", m.Alias, "code", me.Code, "error", me.Msg)
		return nil, me.toolError()
	}
	if resp.Usage.InputTokens == 0 && resp.Usage.OutputTokens == 0 {
		// No usage reported: charge the worst case (docs/design.md §9).
		resp.Usage = chat.Usage{InputTokens: estimate, OutputTokens: maxTokens}
		resp.UsageEstimated = true
	}
	resp.Provider = genAIProvider(pc.Kind)
	used = resp.Usage.InputTokens + resp.Usage.OutputTokens
	call.Progress(resp.Usage.OutputTokens, maxTokens)
	return sdk.Result{Output: resp, Cost: turnCost(resp.Usage, m)}, nil
}

// refusedBeforeTurn tells the codes of a provider's refusal of the
// request: no tokens were spent on it.
func refusedBeforeTurn(code string) bool {
	switch code {
	case codeRate, codeAuth, codeNotFound, codeContext, codeBadRequest:
		return true
	}
	return false
}

// turnCost is a turn's cost in budget units: prices are per million
// tokens, and each turn is rounded up. Saturates instead of overflowing.
func turnCost(u chat.Usage, m *modelConfig) int64 {
	in := new(big.Int).Mul(big.NewInt(u.InputTokens), big.NewInt(m.InputCost))
	out := new(big.Int).Mul(big.NewInt(u.OutputTokens), big.NewInt(m.OutputCost))
	total := in.Add(in, out)
	million := big.NewInt(1_000_000)
	total.Add(total, big.NewInt(999_999))
	total.Quo(total, million)
	if !total.IsInt64() {
		return 1<<63 - 1
	}
	return total.Int64()
}

// maxAnswerBytes bounds the text and tool arguments of one answer: a
// server that ignores max_tokens must not fill the plugin's memory or
// exceed the host's message limit.
const maxAnswerBytes = 1 << 20

// answerSize counts the bytes of an answer as it streams.
type answerSize int64

func (a *answerSize) add(n int) error {
	*a += answerSize(n)
	if *a > maxAnswerBytes {
		return &malformedError{msg: fmt.Sprintf("the answer exceeds the limit of %d bytes", maxAnswerBytes)}
	}
	return nil
}

// parseArguments checks a tool call's arguments: a JSON object, "" read
// as {}.
func parseArguments(name, args string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), nil
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &v); err != nil || v == nil {
		return nil, &malformedError{msg: fmt.Sprintf("the arguments of tool call %s are not a JSON object", name)}
	}
	return json.RawMessage(args), nil
}

// addToolCall adds the model's call id of tool name with arguments args
// to resp as weir's tool call. A call without its id or name makes the
// turn malformed (unnamed says so in the provider's words), and so do
// arguments that are not a JSON object, unless the turn was cut short by
// its token bound: that call is left out, and the stop reason says why.
func (t *turnRequest) addToolCall(resp *chat.Response, id, name, args, unnamed string) error {
	if id == "" || name == "" {
		return &malformedError{msg: unnamed}
	}
	parsed, err := parseArguments(name, args)
	if err != nil {
		if resp.StopReason == chat.StopMaxTokens {
			return nil
		}
		return err
	}
	resp.Message.ToolCalls = append(resp.Message.ToolCalls, chat.ToolCall{ID: id, Name: t.weirName(name), Arguments: parsed})
	return nil
}

// weirName maps a tool name the model used back to weir's: through the
// names offered, or by the reverse mapping for a name it invented.
func (t *turnRequest) weirName(provider string) string {
	if n, ok := t.names[provider]; ok {
		return n
	}
	return chat.UnmapToolName(provider)
}

// systemPrompt joins the request's system prompt and its system messages.
func systemPrompt(r *chat.Request) string {
	parts := []string{}
	if r.System != "" {
		parts = append(parts, r.System)
	}
	for _, m := range r.Messages {
		if m.Role == chat.RoleSystem && m.Content != "" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// genAIProvider is the GenAI conventions' provider name of a provider
// kind: the API the provider speaks (an OpenAI-compatible server is
// "openai"), since the plugin cannot tell who runs it.
func genAIProvider(kind string) string {
	if kind == "openai-responses" {
		return "openai"
	}
	return kind
}
