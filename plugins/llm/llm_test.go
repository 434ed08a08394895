package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/sdk/chat"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("llm")) }

// kinds are the provider kinds every end-to-end test runs against.
var kinds = []string{kindOpenAI, kindOpenAIResponses, kindAnthropic}

// startLLM starts a scripted server playing steps and the real llm plugin
// configured with one provider of kind on it and the model alias "small".
func startLLM(t *testing.T, kind string, model string, steps ...llmtest.Step) (*llmtest.Server, *plugintest.Plugin) {
	t.Helper()
	srv := llmtest.New(steps...)
	serve(t, srv, kind)
	// Every request weir sent must be one the real provider accepts.
	t.Cleanup(func() { checkConforms(t, srv) })
	if model == "" {
		model = `{"provider":"local","model":"m-1","input_cost":100,"output_cost":400,"max_tokens":256}`
	}
	return srv, plugintest.Start(t, "llm", providerConfig1(kind, srv, model))
}

// forEachKind runs test once for each provider kind, in parallel subtests
// named after the kind.
func forEachKind(t *testing.T, test func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			test(t, kind)
		})
	}
}

// serve starts the scripted server srv until the test ends and returns
// the base URL a provider of kind is configured with to reach it.
func serve(t *testing.T, srv *llmtest.Server, kind string) string {
	t.Helper()
	srv.StartT(t)
	return baseURL(srv, kind)
}

// baseURL is the base URL a provider of kind is configured with to reach
// srv: the OpenAI-style path, or the server's root for Anthropic.
func baseURL(srv *llmtest.Server, kind string) string {
	if kind == kindAnthropic {
		return srv.URL()
	}
	return srv.OpenAIBaseURL()
}

func providerConfig1(kind string, srv *llmtest.Server, model string) string {
	return fmt.Sprintf(`{"providers":{"local":{"kind":%q,"base_url":%q}},"models":{"small":%s}}`, kind, baseURL(srv, kind), model)
}

func call(p *plugintest.Plugin, req chat.Request, progress func(done, total int64)) (*chat.Response, *host.CallResult, error) {
	in, _ := json.Marshal(req)
	res, err := p.Host.Call(context.Background(), host.CallRequest{Tool: "llm.chat", Input: in, IdempotencyKey: "k", Attempt: 1, Progress: progress})
	if err != nil {
		return nil, nil, err
	}
	var resp chat.Response
	if err := json.Unmarshal(res.Output, &resp); err != nil {
		return nil, nil, err
	}
	return &resp, res, nil
}

func ask(text string) chat.Request {
	return chat.Request{Model: "small", System: "be brief", Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}}
}

func TestTextAnswerUsageAndCost(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, kind string) {
		srv, p := startLLM(t, kind, "", llmtest.Step{Text: "Paris is the capital of France.", Usage: &llmtest.Usage{InputTokens: 1234, OutputTokens: 567}})
		resp, res, err := call(p, ask("capital of France?"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Content != "Paris is the capital of France." || resp.StopReason != chat.StopEndTurn || len(resp.Message.ToolCalls) != 0 {
			t.Fatalf("answer %+v", resp)
		}
		if resp.Usage != (chat.Usage{InputTokens: 1234, OutputTokens: 567}) || resp.UsageEstimated || resp.Model != "m-1" {
			t.Fatalf("usage %+v estimated %v model %q", resp.Usage, resp.UsageEstimated, resp.Model)
		}
		// ceil((1234*100 + 567*400) / 1e6) = ceil(0.3502) = 1
		if !res.CostReported || res.Cost != 1 {
			t.Fatalf("cost %d reported %v, want 1", res.Cost, res.CostReported)
		}
		if b := srv.Billed(); b.InputTokens != 1234 || b.OutputTokens != 567 || srv.Turns() != 1 {
			t.Fatalf("server billed %+v over %d turns", b, srv.Turns())
		}
		reqs := srv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		var body map[string]any
		json.Unmarshal(reqs[0].Body, &body)
		// The output limit goes in the provider kind's own field.
		limit := map[string]string{kindOpenAI: "max_completion_tokens", kindOpenAIResponses: "max_output_tokens", kindAnthropic: "max_tokens"}[kind]
		if body["stream"] != true || body["model"] != "m-1" || body[limit] != 256.0 {
			t.Fatalf("request %s", reqs[0].Body)
		}
		for _, other := range []string{"max_completion_tokens", "max_output_tokens", "max_tokens"} {
			if other != limit && body[other] != nil {
				t.Fatalf("%s sent beside %s: %s", other, limit, reqs[0].Body)
			}
		}
		switch kind {
		case kindOpenAI:
			if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Fatalf("no stream_options.include_usage: %s", reqs[0].Body)
			}
		case kindOpenAIResponses:
			// Stateless: the provider keeps nothing a later turn needs.
			if body["instructions"] != "be brief" || body["store"] != false {
				t.Fatalf("instructions or store: %s", reqs[0].Body)
			}
		default:
			if !strings.Contains(string(reqs[0].Body), `"system":[{"text":"be brief"`) || reqs[0].Header.Get("Anthropic-Version") == "" {
				t.Fatalf("system prompt or API version not sent: %s %v", reqs[0].Body, reqs[0].Header)
			}
		}
		// No api_key_env: no credential of any kind is sent.
		if h := reqs[0].Header; h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
			t.Fatalf("a credential was sent to a provider configured without one: %v", h)
		}
	})
}

func TestCostRoundsUpPerTurn(t *testing.T) {
	t.Parallel()
	_, p := startLLM(t, kindOpenAI, `{"provider":"local","model":"m-1","input_cost":3000000,"output_cost":15000000,"max_tokens":256}`,
		llmtest.Step{Text: "ok", Usage: &llmtest.Usage{InputTokens: 1001, OutputTokens: 7}})
	_, res, err := call(p, ask("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// (1001*3e6 + 7*15e6) / 1e6 = 3003 + 105 = 3108 exactly.
	if res.Cost != 3108 {
		t.Fatalf("cost %d, want 3108", res.Cost)
	}
}

func TestToolCallsBothWays(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, kind string) {
		srv, p := startLLM(t, kind, "",
			llmtest.Step{Text: "Let me look.", ToolCalls: []llmtest.ToolCall{
				{ID: "c1", Name: "notes__put", Arguments: json.RawMessage(`{"key":"topic/rivers","text":"the Seine is 777 km long"}`)},
				{ID: "c2", Name: "web__search", Arguments: json.RawMessage(`{"q":"Seine"}`)},
			}},
			llmtest.Step{Text: "Done."})
		req := ask("research the Seine")
		req.Tools = []chat.ToolDef{
			{Name: "notes.put", Description: "store a note", InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"text":{"type":"string"}},"required":["key","text"]}`)},
			{Name: "web.search", Description: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		}
		resp, _, err := call(p, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StopReason != chat.StopToolUse || resp.Message.Content != "Let me look." || len(resp.Message.ToolCalls) != 2 {
			t.Fatalf("answer %+v", resp)
		}
		c0, c1 := resp.Message.ToolCalls[0], resp.Message.ToolCalls[1]
		if c0.ID != "c1" || c0.Name != "notes.put" || c1.ID != "c2" || c1.Name != "web.search" {
			t.Fatalf("tool calls %+v", resp.Message.ToolCalls)
		}
		var args map[string]string
		if err := json.Unmarshal(c0.Arguments, &args); err != nil || args["text"] != "the Seine is 777 km long" {
			t.Fatalf("arguments %s", c0.Arguments)
		}
		sent := string(srv.Requests()[0].Body)
		if !strings.Contains(sent, `"notes__put"`) || !strings.Contains(sent, `"web__search"`) || strings.Contains(sent, `"notes.put"`) {
			t.Fatalf("tool names not mapped for the provider: %s", sent)
		}

		// The next turn carries the calls and their results back.
		req.Messages = append(req.Messages, resp.Message,
			chat.Message{Role: chat.RoleTool, ToolCallID: "c1", Content: "stored"},
			chat.Message{Role: chat.RoleTool, ToolCallID: "c2", Content: "E_UNAVAILABLE: search is down", IsError: true})
		resp, _, err = call(p, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Content != "Done." || resp.StopReason != chat.StopEndTurn {
			t.Fatalf("second answer %+v", resp)
		}
		var second struct {
			Messages []map[string]any `json:"messages"`
			Input    []map[string]any `json:"input"`
		}
		json.Unmarshal(srv.Requests()[1].Body, &second)
		b, _ := json.Marshal(second.Messages)
		got := string(b)
		switch kind {
		case kindOpenAIResponses:
			// user, assistant text, two function calls, two outputs.
			b, _ := json.Marshal(second.Input)
			got := string(b)
			if len(second.Input) != 6 || second.Input[2]["type"] != "function_call" || second.Input[2]["call_id"] != "c1" || second.Input[2]["name"] != "notes__put" ||
				second.Input[4]["type"] != "function_call_output" || second.Input[4]["call_id"] != "c1" || !strings.Contains(got, "ERROR: E_UNAVAILABLE") {
				t.Fatalf("second request input %s", got)
			}
		case kindOpenAI:
			// system, user, assistant with two calls, two tool messages.
			if len(second.Messages) != 5 || second.Messages[3]["role"] != "tool" || second.Messages[3]["tool_call_id"] != "c1" ||
				!strings.Contains(got, `"name":"notes__put"`) || !strings.Contains(got, "ERROR: E_UNAVAILABLE") {
				t.Fatalf("second request messages %s", got)
			}
		default:
			// user, assistant (text + two tool_use), user (two tool_result).
			if len(second.Messages) != 3 || second.Messages[2]["role"] != "user" ||
				!strings.Contains(got, `"tool_use_id":"c2"`) || !strings.Contains(got, `"is_error":true`) || !strings.Contains(got, `"name":"notes__put"`) {
				t.Fatalf("second request messages %s", got)
			}
		}
	})
}

func TestStreamingProgress(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, kind string) {
		hold := make(chan struct{})
		_, p := startLLM(t, kind, "", llmtest.Step{Text: "one two three four five", Hold: hold})
		var mu sync.Mutex
		var reports [][2]int64
		seen := make(chan struct{}, 1)
		done := make(chan error, 1)
		go func() {
			_, _, err := call(p, ask("count"), func(d, total int64) {
				mu.Lock()
				reports = append(reports, [2]int64{d, total})
				mu.Unlock()
				select {
				case seen <- struct{}{}:
				default:
				}
			})
			done <- err
		}()
		// The server holds the turn after its first delta: progress
		// must have reached us while the turn is still open.
		select {
		case <-seen:
		case err := <-done:
			t.Fatalf("call ended before any progress: %v", err)
		case <-time.After(60 * time.Second):
			t.Fatal("no progress while the turn streamed")
		}
		mu.Lock()
		first := reports[0]
		mu.Unlock()
		if first[0] < 1 || first[1] != 256 {
			t.Fatalf("first progress %v, want tokens so far of 256", first)
		}
		close(hold)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestTextStreamsAsPartials: each text delta the provider streams reaches
// a caller that asked for partials while the turn is still open, in order,
// numbered from 1, and together they are the answer's text; a tool call's
// arguments are not text.
func TestTextStreamsAsPartials(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, kind string) {
		hold := make(chan struct{})
		const answer = "one two three four five"
		_, p := startLLM(t, kind, "",
			llmtest.Step{Text: answer, Hold: hold},
			llmtest.Step{Text: "look", ToolCalls: []llmtest.ToolCall{{Name: "notes__put", Arguments: json.RawMessage(`{"key":"a"}`)}}})
		var mu sync.Mutex
		var pieces []string
		first := make(chan struct{})
		partials := func(seq uint64, delta []byte) {
			mu.Lock()
			defer mu.Unlock()
			if seq != uint64(len(pieces)+1) {
				t.Errorf("piece %d after %d", seq, len(pieces))
			}
			pieces = append(pieces, string(delta))
			if len(pieces) == 1 {
				close(first)
			}
		}
		type answered struct {
			resp *chat.Response
			err  error
		}
		done := make(chan answered, 1)
		go func() {
			resp, err := callPartials(p, ask("count"), partials)
			done <- answered{resp, err}
		}()
		select { // the server holds the turn after its first delta
		case <-first:
		case a := <-done:
			t.Fatalf("the turn ended before its first piece arrived: %v", a.err)
		}
		close(hold)
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		mu.Lock()
		got := pieces
		pieces = nil
		mu.Unlock()
		if want := strings.SplitAfter(answer, " "); strings.Join(got, "|") != strings.Join(want, "|") || a.resp.Message.Content != answer {
			t.Fatalf("pieces %q for the answer %q, want %q", got, a.resp.Message.Content, want)
		}

		req := ask("note it")
		req.Tools = []chat.ToolDef{{Name: "notes.put", Description: "put", InputSchema: json.RawMessage(`{"type":"object"}`)}}
		resp, err := callPartials(p, req, func(seq uint64, delta []byte) {
			mu.Lock()
			defer mu.Unlock()
			pieces = append(pieces, string(delta))
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(resp.Message.ToolCalls) != 1 || strings.Join(pieces, "") != resp.Message.Content {
			t.Fatalf("pieces %q for a turn that said %q and called %v: want its text only", pieces, resp.Message.Content, resp.Message.ToolCalls)
		}
	})
}

// callPartials calls llm.chat with req, asking for its partials.
func callPartials(p *plugintest.Plugin, req chat.Request, partials func(seq uint64, delta []byte)) (*chat.Response, error) {
	in, _ := json.Marshal(req)
	res, err := p.Host.Call(context.Background(), host.CallRequest{Tool: "llm.chat", Input: in, IdempotencyKey: "k", Attempt: 1, Partials: partials})
	if err != nil {
		return nil, err
	}
	var resp chat.Response
	if err := json.Unmarshal(res.Output, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// errorCase is one failure a provider can answer, and what the engine
// must see of it.
type errorCase struct {
	name      string
	step      llmtest.Step
	kind      host.Kind
	code      string
	mustSay   string
	wantTries int // requests the server sees for one call
}

var errorCases = []errorCase{
	{"429", llmtest.Step{Status: 429, RetryAfter: "7"}, host.KindRetryable, codeRate, "429", 1},
	{"500", llmtest.Step{Status: 500}, host.KindRetryable, codeUnavailable, "500", 1},
	{"529", llmtest.Step{Status: 529, ErrorMessage: "Overloaded"}, host.KindRetryable, codeUnavailable, "answered 529 Overloaded: Overloaded", 1},
	{"401", llmtest.Step{Status: 401}, host.KindPermanent, codeAuth, "401", 1},
	{"403", llmtest.Step{Status: 403}, host.KindPermanent, codeAuth, "403", 1},
	{"404", llmtest.Step{Status: 404, ErrorMessage: "model m-1 does not exist"}, host.KindPermanent, codeNotFound, "does not exist", 1},
	{"context", llmtest.Step{Status: 400, ErrorCode: "context_length_exceeded"}, host.KindPermanent, codeContext, "400", 1},
	{"400", llmtest.Step{Status: 400, ErrorMessage: "temperature must be below 2"}, host.KindPermanent, codeBadRequest, "temperature", 1},
	{"malformed", llmtest.Step{Text: "a b c", Malformed: true}, host.KindRetryable, codeMalformed, "", 1},
	{"bad arguments", llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "notes__put", RawArguments: `{"key": nope`}}}, host.KindRetryable, codeMalformed, "", 1},
	{"too long", llmtest.Step{Text: strings.Repeat(strings.Repeat("x", 4095)+" ", 300)}, host.KindRetryable, codeMalformed, "limit of 1048576 bytes", 1},
	{"cut short", llmtest.Step{Text: "a b c", CutShort: true}, host.KindRetryable, codeUnavailable, "ended before", 1},
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		for _, tc := range errorCases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv, p := startLLM(t, kind, "", tc.step)
				req := ask("x")
				req.Tools = []chat.ToolDef{{Name: "notes.put"}}
				_, _, err := call(p, req, nil)
				plugintest.WantKind(t, err, tc.kind)
				te := err.(*host.ToolError)
				if te.Code != tc.code || !strings.Contains(te.Message, tc.mustSay) {
					t.Fatalf("error %v, want code %s saying %q", te, tc.code, tc.mustSay)
				}
				// A provider's Retry-After is passed on; an overloaded one
				// that names none is given seconds (attempt 1: 2s plus up to
				// half of jitter); other failures leave it to the engine.
				want := map[string][2]time.Duration{"429": {7 * time.Second, 7 * time.Second}, "529": {2 * time.Second, 3 * time.Second}}[tc.name]
				if te.RetryAfter < want[0] || te.RetryAfter > want[1] {
					t.Fatalf("retry after %v, want %v..%v", te.RetryAfter, want[0], want[1])
				}
				// The SDKs' own retries are off: every try is the engine's.
				if n := len(srv.Requests()); n != tc.wantTries {
					t.Fatalf("server saw %d requests for one call, want %d", n, tc.wantTries)
				}
			})
		}
	}
}

// A stream cut off after its start has told what its prompt costs
// (Anthropic's message_start carries the input tokens): the retryable
// error carries the tokens, which the provider bills though no answer
// came, so weir can show the waste of retried turns. An OpenAI stream
// says its usage only at the end: its cut-off turn reports none, and a
// refusal before any turn (a 429) none either.
func TestFailedTurnReportsWhatItUsed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   string
		step   llmtest.Step
		wantIn int64
	}{
		{kindAnthropic, llmtest.Step{Text: "a b c", CutShort: true, Usage: &llmtest.Usage{InputTokens: 321, OutputTokens: 9}}, 321},
		{kindOpenAI, llmtest.Step{Text: "a b c", CutShort: true, Usage: &llmtest.Usage{InputTokens: 321, OutputTokens: 9}}, 0},
		{kindAnthropic, llmtest.Step{Status: 429, RetryAfter: "1"}, 0},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.kind, tc.step.Status), func(t *testing.T) {
			t.Parallel()
			_, p := startLLM(t, tc.kind, "", tc.step)
			_, _, err := call(p, ask("x"), nil)
			plugintest.WantKind(t, err, host.KindRetryable)
			if te := err.(*host.ToolError); te.InputTokens != tc.wantIn || te.OutputTokens < 0 || (tc.wantIn == 0 && te.OutputTokens != 0) {
				t.Fatalf("error %v reports %d tokens in and %d out, want %d in", te, te.InputTokens, te.OutputTokens, tc.wantIn)
			}
		})
	}
}

func TestUnreachableProviderIsRetryable(t *testing.T) {
	t.Parallel()
	srv := llmtest.New()
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	srv.Close() // nothing listens there now
	p := plugintest.Start(t, "llm", providerConfig1(kindOpenAI, srv, `{"provider":"local","model":"m","max_tokens":10}`))
	_, _, err := call(p, ask("x"), nil)
	plugintest.WantKind(t, err, host.KindRetryable)
	if err.(*host.ToolError).Code != codeUnavailable {
		t.Fatalf("error %v", err)
	}
}

func TestNoUsageIsChargedTheReservation(t *testing.T) {
	t.Parallel()
	_, p := startLLM(t, kindOpenAI, `{"provider":"local","model":"m","input_cost":1000000,"output_cost":1000000,"max_tokens":100}`,
		llmtest.Step{Text: "hi", NoUsage: true})
	req := ask("x")
	resp, res, err := call(p, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	est := chat.EstimateInputTokens(&req)
	if !resp.UsageEstimated || resp.Usage.InputTokens != est || resp.Usage.OutputTokens != 100 || res.Cost != est+100 {
		t.Fatalf("usage %+v estimated %v cost %d, want the reservation %d+100", resp.Usage, resp.UsageEstimated, res.Cost, est)
	}
}

func TestRequestRefusals(t *testing.T) {
	t.Parallel()
	srv, p := startLLM(t, kindAnthropic, "")
	for name, tc := range map[string]struct {
		req  chat.Request
		want string
	}{
		"unknown alias":  {chat.Request{Model: "huge", Messages: ask("x").Messages}, `unknown model alias "huge" (configured: small)`},
		"max_tokens":     {chat.Request{Model: "small", MaxTokens: 257, Messages: ask("x").Messages}, "max_tokens 257 is above the 256"},
		"bad tool name":  {chat.Request{Model: "small", Messages: ask("x").Messages, Tools: []chat.ToolDef{{Name: "a__b"}}}, `"a__b"`},
		"tool no callid": {chat.Request{Model: "small", Messages: []chat.Message{{Role: chat.RoleTool, Content: "x"}}}, "tool_call_id"},
	} {
		_, _, err := call(p, tc.req, nil)
		plugintest.WantKind(t, err, host.KindPermanent)
		if te := err.(*host.ToolError); te.Code != codeBadRequest || !strings.Contains(te.Message, tc.want) {
			t.Errorf("%s: %v, want %s saying %q", name, te, codeBadRequest, tc.want)
		}
	}
	// The input schema refuses what is not a chat request at all.
	plugintest.WantKind(t, p.Call("llm.chat", `{"model":"small","messages":[{"role":"robot"}]}`, "k", nil), host.KindSchema)
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("refused requests reached the provider %d times", n)
	}
}

func TestLocalLimitsRefuseBeforeTheProvider(t *testing.T) {
	t.Parallel()
	t.Run("max_concurrent", func(t *testing.T) {
		t.Parallel()
		hold := make(chan struct{})
		srv, p := startLLM(t, kindOpenAI, `{"provider":"local","model":"m","max_tokens":10,"max_concurrent":1}`,
			llmtest.Step{Text: "slow answer", Hold: hold}, llmtest.Step{Text: "next"})
		done := make(chan error, 1)
		started := make(chan struct{}, 1)
		go func() {
			_, _, err := call(p, ask("first"), func(int64, int64) {
				select {
				case started <- struct{}{}:
				default:
				}
			})
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("first call ended early: %v", err)
		case <-time.After(60 * time.Second):
			t.Fatal("first call never streamed")
		}
		_, _, err := call(p, ask("second"), nil)
		plugintest.WantKind(t, err, host.KindRetryable)
		if te := err.(*host.ToolError); te.Code != codeRateLocal || !strings.Contains(te.Message, "max_concurrent is 1") || te.RetryAfter != time.Second {
			t.Fatalf("second call: %v", te)
		}
		close(hold)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Fatalf("the provider saw %d requests, want 1", n)
		}
		// The slot is free again.
		if _, _, err := call(p, ask("third"), nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("requests_per_minute", func(t *testing.T) {
		t.Parallel()
		srv, p := startLLM(t, kindAnthropic, `{"provider":"local","model":"m","max_tokens":10,"requests_per_minute":1}`, llmtest.Step{Text: "a"}, llmtest.Step{Text: "b"})
		if _, _, err := call(p, ask("1"), nil); err != nil {
			t.Fatal(err)
		}
		_, _, err := call(p, ask("2"), nil)
		plugintest.WantKind(t, err, host.KindRetryable)
		if te := err.(*host.ToolError); te.Code != codeRateLocal || !strings.Contains(te.Message, "requests_per_minute is 1") || te.RetryAfter <= 0 {
			t.Fatalf("second call: %v", te)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Fatalf("the provider saw %d requests, want 1", n)
		}
		// The host declares the limits and admits turns against them
		// itself: a call it admitted is not counted here again.
		info, ok := p.Host.LookupTool("llm.chat")
		if !ok || len(info.Models) != 1 || info.Models[0].Limits.RequestsPerMinute != 1 {
			t.Fatalf("the catalog's model %+v lacks its requests_per_minute", info.Models)
		}
		in, _ := json.Marshal(ask("3"))
		if _, err := p.Host.Call(context.Background(), host.CallRequest{Tool: "llm.chat", Input: in, IdempotencyKey: "k3", Attempt: 1, ModelAdmitted: true}); err != nil {
			t.Fatalf("a call the host admitted was refused by the plugin's own count: %v", err)
		}
		if n := len(srv.Requests()); n != 2 {
			t.Fatalf("the provider saw %d requests, want 2", n)
		}
	})
}

func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ config, want string }{
		"unknown top key":      {`{"providers":{},"models":{},"modles":{}}`, `llm config: unknown key "modles"`},
		"unknown provider key": {`{"providers":{"p":{"kind":"openai","url":"http://x"}}}`, `providers.p: unknown key "url"`},
		"unknown kind":         {`{"providers":{"p":{"kind":"gemini"}}}`, `providers.p.kind: unknown provider kind "gemini"`},
		"bad base_url":         {`{"providers":{"p":{"kind":"openai","base_url":"ftp://x"}}}`, `providers.p.base_url`},
		"unknown provider":     {`{"providers":{"p":{"kind":"openai"}},"models":{"s":{"provider":"q","model":"m","max_tokens":1}}}`, `models.s.provider: no provider "q"`},
		"unknown model key":    {`{"providers":{"p":{"kind":"openai"}},"models":{"s":{"provider":"p","model":"m","max_tokens":1,"price":3}}}`, `models.s: unknown key "price"`},
		"missing max_tokens":   {`{"providers":{"p":{"kind":"openai"}},"models":{"s":{"provider":"p","model":"m"}}}`, `models.s.max_tokens: required`},
		"negative cost":        {`{"providers":{"p":{"kind":"openai"}},"models":{"s":{"provider":"p","model":"m","max_tokens":1,"input_cost":-1}}}`, `models.s.input_cost: -1 is outside`},
		"wrong type":           {`{"providers":{"p":{"kind":"openai"}},"models":{"s":{"provider":"p","model":"m","max_tokens":"lots"}}}`, `models.s.max_tokens: want a whole number`},
		// The host passes a plugin only the variables its block's env lists.
		"missing key variable": {`{"providers":{"p":{"kind":"anthropic","api_key_env":"WEIR_TEST_NO_SUCH_KEY"}}}`, `providers.p.api_key_env: the variable WEIR_TEST_NO_SUCH_KEY is not set`},
		"key not in env":       {`{"env":["OTHER"],"providers":{"p":{"kind":"anthropic","api_key_env":"K"}}}`, `providers.p.api_key_env: K is not listed in the block's env`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := plugintest.Start(t, "llm", tc.config)
			_, _, err := call(p, ask("x"), nil)
			plugintest.WantKind(t, err, host.KindPermanent)
			if te := err.(*host.ToolError); te.Code != codeConfig || !strings.Contains(te.Message, tc.want) {
				t.Fatalf("%v, want %s saying %q", te, codeConfig, tc.want)
			}
		})
	}
}

func TestManifest(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "llm", "")
	info, ok := p.Host.LookupTool("llm.chat")
	if !ok || !info.Idempotent {
		t.Fatalf("llm.chat: found %v, idempotent %v", ok, info.Idempotent)
	}
	for _, tm := range p.Host.Tools() {
		if tm.Name == "llm.chat" && !chat.SpeaksContract(string(tm.InputSchema)) {
			t.Fatal("llm.chat does not declare the chat contract")
		}
	}
}

// TestManifestCarriesModels: llm.chat's manifest is made from the config
// at launch, with the configured models and prices, and the host's
// catalog shows them to registration.
func TestManifestCarriesModels(t *testing.T) {
	t.Parallel()
	cfgA := `{"providers":{"local":{"kind":"openai","base_url":"http://127.0.0.1:1/v1"}},"models":{"small":{"provider":"local","model":"m-1","input_cost":100,"output_cost":400,"max_tokens":256}}}`
	p := plugintest.Start(t, "llm", cfgA)
	info, ok := p.Host.LookupTool("llm.chat")
	if !ok || !info.Chat {
		t.Fatalf("llm.chat: found %v, chat %v", ok, info.Chat)
	}
	want := []flows.ModelInfo{{Alias: "small", MaxTokens: 256, InputCost: 100, OutputCost: 400}}
	if !reflect.DeepEqual(info.Models, want) {
		t.Fatalf("models = %+v, want %+v", info.Models, want)
	}
	for _, tm := range p.Host.Tools() {
		if tm.Name == "llm.chat" && tm.Contract != chat.Contract {
			t.Errorf("contract = %q", tm.Contract)
		}
	}
	var schema bool
	for _, pl := range p.Host.Plugins() {
		schema = schema || (pl.Name == "llm" && len(pl.Manifest.ConfigSchema) > 0)
	}
	if !schema {
		t.Error("the llm plugin declares no config schema")
	}
	p.Host.Close()

	// A changed config is a new launch and a new manifest, cached beside
	// the first (by binary checksum and config hash).
	cfgB := `{"providers":{"local":{"kind":"openai","base_url":"http://127.0.0.1:1/v1"}},"models":{"big":{"provider":"local","model":"m-2","input_cost":7,"output_cost":9,"max_tokens":64}}}`
	for _, c := range []struct {
		cfg  string
		want []flows.ModelInfo
	}{{cfgB, []flows.ModelInfo{{Alias: "big", MaxTokens: 64, InputCost: 7, OutputCost: 9}}}, {cfgA, want}} {
		cat, err := host.LoadCatalogFor(host.Config{PluginsDir: p.PluginsDir, DataDir: p.DataDir,
			PluginConfig: map[string]json.RawMessage{"llm": json.RawMessage(c.cfg)}})
		if err != nil {
			t.Fatal(err)
		}
		info, _ := cat.LookupTool("llm.chat")
		if !reflect.DeepEqual(info.Models, c.want) {
			t.Errorf("models with config %s = %+v, want %+v", c.cfg, info.Models, c.want)
		}
	}
	cached, err := filepath.Glob(filepath.Join(p.PluginsDir, host.ManifestDir, "*.json"))
	if err != nil || len(cached) != 3 { // installed without config, then A and B
		t.Errorf("manifest cache holds %v (%v), want 3 files", cached, err)
	}
}

// TestToolSchemasAreNormalised: tools whose schemas a provider refuses as
// they are (a bare object, no schema, an MCP server's draft-07 schema with
// a nested bare object, a root anyOf) are offered in a form each provider
// accepts, and the whole turn goes through; startLLM's check holds every
// request to the provider's published schema and rules.
func TestToolSchemasAreNormalised(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, kind string) {
		srv, p := startLLM(t, kind, "", llmtest.Step{Text: "ok"})
		req := ask("x")
		req.Tools = []chat.ToolDef{
			{Name: "kv.list", Description: "lists keys", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "clock.now"},
			{Name: "fs.stat", InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",` +
				`"properties":{"path":{"type":"string"},"opts":{"type":"object"},"list":{"type":"array","items":{"type":"object"}}},"required":["path"],"additionalProperties":false}`)},
			{Name: "cal.update", Description: "moves an event", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"at":{"type":"string"}},` +
				`"anyOf":[{"required":["id"]},{"required":["at"]}]}`)},
		}
		if _, _, err := call(p, req, nil); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		if err := conforms(t, reqs[0]); err != nil {
			t.Fatalf("refused: %v\n%s", err, reqs[0].Body)
		}
		body := string(reqs[0].Body)
		// What the tool said is kept: its properties, required and
		// additionalProperties; the root anyOf is told in words.
		for _, want := range []string{`"required":["path"]`, `"additionalProperties":false`, `Its input must also match: {\"anyOf\":[{\"required\":[\"id\"]},{\"required\":[\"at\"]}]}`} {
			if !strings.Contains(body, want) {
				t.Errorf("request lacks %s:\n%s", want, body)
			}
		}
		if strings.Contains(body, "draft-07") {
			t.Errorf("$schema of another draft sent:\n%s", body)
		}
	})
}

// TestNonObjectToolSchemaRefused: the chat contract offers object schemas;
// a tool of another type is refused before any request, not sent for the
// provider to refuse the whole turn.
func TestNonObjectToolSchemaRefused(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, kind string) {
		srv, p := startLLM(t, kind, "", llmtest.Step{Text: "never"})
		req := ask("x")
		req.Tools = []chat.ToolDef{{Name: "batch.run", InputSchema: json.RawMessage(`{"type":"array","items":{"type":"string"}}`)}}
		_, _, err := call(p, req, nil)
		plugintest.WantKind(t, err, host.KindPermanent)
		if te := err.(*host.ToolError); te.Code != codeBadRequest || !strings.Contains(te.Message, `tool batch.run: input_schema is of type "array"`) {
			t.Fatalf("error %v", te)
		}
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("the provider saw %d requests", n)
		}
	})
}

// The run and node of the call go out as headers, in both wire formats,
// so that a gateway can log them and the scripted model server can aim a
// step at one agent, and the call's trace as its traceparent; a tool call
// without a run sends none of them.
func TestCallerHeadersReachTheProvider(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, kind string) {
		srv, p := startLLM(t, kind, "", llmtest.Step{Node: "critic", Text: "aimed"}, llmtest.Step{Text: "anyone"})
		in, _ := json.Marshal(ask("hi"))
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		res, err := p.Host.Call(context.Background(), host.CallRequest{Tool: "llm.chat", Input: in, IdempotencyKey: "k", Attempt: 1, RunID: "r-42", Node: "critic", TraceParent: tp})
		if err != nil {
			t.Fatal(err)
		}
		var resp chat.Response
		if err := json.Unmarshal(res.Output, &resp); err != nil || resp.Message.Content != "aimed" {
			t.Fatalf("answer %+v %v", resp, err)
		}
		if _, _, err := call(p, ask("hi"), nil); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		if h := reqs[0].Header; h.Get(llmtest.NodeHeader) != "critic" || h.Get(headerNode) != "critic" || h.Get(headerRun) != "r-42" || h.Get("Traceparent") != tp {
			t.Fatalf("headers of a run's call %v", h)
		}
		if h := reqs[1].Header; h.Get(headerNode) != "" || h.Get(headerRun) != "" || h.Get("Traceparent") != "" {
			t.Fatalf("headers of a call without a run %v", h)
		}
	})
}
