package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	oaisse "github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/sdk/chat"
	"github.com/weirhq/weir/sdk/sdktest"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func header(kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{Header: h}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	type want struct {
		retryable  bool
		code       string
		retryAfter time.Duration
	}
	for name, tc := range map[string]struct {
		err  error
		want want
	}{
		"openai 429 seconds":     {&openai.Error{StatusCode: 429, Response: header("Retry-After", "3")}, want{true, codeRate, 3 * time.Second}},
		"openai 429 ms":          {&openai.Error{StatusCode: 429, Response: header("Retry-After-Ms", "1500", "Retry-After", "9")}, want{true, codeRate, 1500 * time.Millisecond}},
		"openai 429 date":        {&openai.Error{StatusCode: 429, Response: header("Retry-After", t0.Add(90*time.Second).Format(http.TimeFormat))}, want{true, codeRate, 90 * time.Second}},
		"openai 429 huge":        {&openai.Error{StatusCode: 429, Response: header("Retry-After", "99999999")}, want{true, codeRate, maxRetryAfter}},
		"openai 429 none":        {&openai.Error{StatusCode: 429}, want{true, codeRate, 0}},
		"openai 500":             {&openai.Error{StatusCode: 500}, want{true, codeUnavailable, 0}},
		"openai 503 retry-after": {&openai.Error{StatusCode: 503, Response: header("Retry-After", "2")}, want{true, codeUnavailable, 2 * time.Second}},
		"openai 408":             {&openai.Error{StatusCode: 408}, want{true, codeUnavailable, 0}},
		"openai 401":             {&openai.Error{StatusCode: 401}, want{false, codeAuth, 0}},
		"openai 403":             {&openai.Error{StatusCode: 403}, want{false, codeAuth, 0}},
		"openai 404":             {&openai.Error{StatusCode: 404}, want{false, codeNotFound, 0}},
		"openai context code":    {&openai.Error{StatusCode: 400, Code: "context_length_exceeded"}, want{false, codeContext, 0}},
		"openai context text":    {&openai.Error{StatusCode: 400, Message: "This model's maximum context length is 8192 tokens"}, want{false, codeContext, 0}},
		"openai 400":             {&openai.Error{StatusCode: 400, Message: "bad temperature"}, want{false, codeBadRequest, 0}},
		"openai 422":             {&openai.Error{StatusCode: 422}, want{false, codeBadRequest, 0}},
		"openai stream rate":     {&oaisse.StreamError{Event: oaisse.Event{Data: []byte(`{"error":{"type":"rate_limit_exceeded","message":"slow"}}`)}}, want{true, codeRate, 0}},
		"openai stream other":    {&oaisse.StreamError{Event: oaisse.Event{Data: []byte(`{"error":{"type":"server_error"}}`)}}, want{true, codeUnavailable, 0}},
		"anthropic 529":          {&anthropic.Error{StatusCode: 529}, want{true, codeUnavailable, 0}},
		"anthropic 429":          {&anthropic.Error{StatusCode: 429, Response: header("retry-after", "11")}, want{true, codeRate, 11 * time.Second}},
		"anthropic context":      {&anthropic.Error{StatusCode: 400, Message: "prompt is too long: 250000 tokens > 200000 maximum"}, want{false, codeContext, 0}},
		"anthropic 402 billing":  {&anthropic.Error{StatusCode: 402}, want{false, codeAuth, 0}},
		"malformed":              {&malformedError{msg: "x"}, want{true, codeMalformed, 0}},
		"cut short":              {&cutShortError{msg: "x"}, want{true, codeUnavailable, 0}},
		"json syntax":            {fmt.Errorf("decoding: %w", &json.SyntaxError{}), want{true, codeMalformed, 0}},
		"connection refused":     {&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, want{true, codeUnavailable, 0}},
		"unexpected eof":         {fmt.Errorf("read: %w", io.ErrUnexpectedEOF), want{true, codeUnavailable, 0}},
		"timeout":                {fmt.Errorf("request: %w", context.DeadlineExceeded), want{true, codeUnavailable, 0}},
		"local limit":            {&modelError{Code: codeRateLocal, Retryable: true, RetryAfter: time.Second}, want{true, codeRateLocal, time.Second}},
		"unknown":                {errors.New("something odd"), want{true, codeUnavailable, 0}},
	} {
		got := classify(tc.err, "provider", t0)
		if (want{got.Retryable, got.Code, got.RetryAfter}) != tc.want {
			t.Errorf("%s: got {%v %s %v}, want %+v", name, got.Retryable, got.Code, got.RetryAfter, tc.want)
		}
	}
}

func TestAnthropicErrorInsideStream(t *testing.T) {
	t.Parallel()
	// A stream that began with 200 and then sent an error event.
	for typ, code := range map[string]string{"overloaded_error": codeUnavailable, "rate_limit_error": codeRate, "invalid_request_error": codeBadRequest, "authentication_error": codeAuth} {
		var e anthropic.Error
		if err := e.UnmarshalJSON([]byte(`{"type":"error","error":{"type":"` + typ + `","message":"m"}}`)); err != nil {
			t.Fatal(err)
		}
		e.StatusCode = 200
		if got := classify(&e, "p", t0); got.Code != code {
			t.Errorf("%s inside a stream: %s, want %s", typ, got.Code, code)
		}
	}
}

func TestErrorMessageCarriesCodeAndRetryAfter(t *testing.T) {
	t.Parallel()
	e := &modelError{Code: codeRate, Retryable: true, RetryAfter: 7 * time.Second, Msg: "provider answered 429"}
	if e.Error() != "E_MODEL_RATE: provider answered 429 (retry after 7s)" {
		t.Fatalf("%q", e.Error())
	}
	if got := classify(&openai.Error{StatusCode: 401, Message: "Incorrect API key provided: sk-abc"}, "p", t0); strings.Contains(got.Msg, "sk-abc") {
		t.Fatalf("an auth failure quotes the provider: %q", got.Msg)
	}
}

func TestTurnCost(t *testing.T) {
	t.Parallel()
	m := &modelConfig{InputCost: 100, OutputCost: 400}
	for _, tc := range []struct {
		in, out, want int64
	}{
		{0, 0, 0},
		{1, 0, 1},                 // any spend rounds up to a unit
		{10000, 0, 1},             // exactly 1.0
		{10001, 0, 2},             // just above
		{1_000_000, 250_000, 200}, // 100 + 100
	} {
		if got := turnCost(chat.Usage{InputTokens: tc.in, OutputTokens: tc.out}, m); got != tc.want {
			t.Errorf("cost of %d in, %d out = %d, want %d", tc.in, tc.out, got, tc.want)
		}
	}
	// The largest prices and usage saturate rather than overflow.
	big := &modelConfig{InputCost: maxCostPerMTok, OutputCost: maxCostPerMTok}
	if got := turnCost(chat.Usage{InputTokens: 1 << 62, OutputTokens: 1 << 62}, big); got != 1<<63-1 {
		t.Errorf("saturated cost %d", got)
	}
}

// fakeClock is the limiter's clock in tests.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestLimiter(t *testing.T) {
	t.Parallel()
	t.Run("concurrency", func(t *testing.T) {
		c := &fakeClock{now: t0}
		l := newLimiter(&modelConfig{Alias: "s", MaxConcurrent: 2}, c.Now)
		s1, err1 := l.acquire(10)
		_, err2 := l.acquire(10)
		_, err3 := l.acquire(10)
		if err1 != nil || err2 != nil || err3 == nil || err3.Code != codeRateLocal || err3.RetryAfter != concurrencyRetryAfter {
			t.Fatalf("got %v %v %v", err1, err2, err3)
		}
		s1(5)
		s1(5) // settling twice releases once
		if _, err := l.acquire(10); err != nil {
			t.Fatalf("slot not released: %v", err)
		}
		if _, err := l.acquire(10); err == nil {
			t.Fatal("a second settle released a second slot")
		}
	})
	t.Run("requests per minute", func(t *testing.T) {
		c := &fakeClock{now: t0}
		l := newLimiter(&modelConfig{Alias: "s", RequestsPerMinute: 2}, c.Now)
		for i := 0; i < 2; i++ {
			s, err := l.acquire(1)
			if err != nil {
				t.Fatal(err)
			}
			s(1)
			c.now = c.now.Add(10 * time.Second)
		}
		_, err := l.acquire(1)
		if err == nil || err.RetryAfter != 40*time.Second || !strings.Contains(err.Msg, "requests_per_minute is 2") {
			t.Fatalf("third call: %v", err)
		}
		c.now = c.now.Add(40 * time.Second)
		if _, err := l.acquire(1); err != nil {
			t.Fatalf("after the window: %v", err)
		}
	})
	t.Run("tokens per minute settle to usage", func(t *testing.T) {
		c := &fakeClock{now: t0}
		l := newLimiter(&modelConfig{Alias: "s", TokensPerMinute: 1000}, c.Now)
		s1, _ := l.acquire(800) // reserved 800, used 100
		s1(100)
		c.now = c.now.Add(5 * time.Second)
		s2, err := l.acquire(800)
		if err != nil {
			t.Fatalf("the settled call still counts its reservation: %v", err)
		}
		s2(-1) // usage unknown: the reservation stands
		c.now = c.now.Add(5 * time.Second)
		_, err = l.acquire(200)
		if err == nil || err.RetryAfter != 50*time.Second {
			t.Fatalf("over the tokens per minute: %v", err)
		}
		// A request the provider refused spent nothing.
		c.now = c.now.Add(time.Minute)
		s3, err := l.acquire(900)
		if err != nil {
			t.Fatal(err)
		}
		s3(0)
		if _, err := l.acquire(900); err != nil {
			t.Fatalf("a refused request still counts: %v", err)
		}
		// A call larger than the whole allowance runs alone.
		c.now = c.now.Add(time.Minute)
		if _, err := l.acquire(5000); err != nil {
			t.Fatalf("a large call in an empty window: %v", err)
		}
	})
}

func TestParseConfigGood(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-x"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := parseConfig(json.RawMessage(`{
		"env": ["ANTHROPIC_API_KEY"],
		"providers": {
			"local":  {"kind": "openai", "base_url": "http://127.0.0.1:8089/v1"},
			"claude": {"kind": "anthropic", "base_url": "https://api.anthropic.com", "api_key_env": "ANTHROPIC_API_KEY"}
		},
		"models": {
			"small": {"provider": "local", "model": "qwen3-4b", "input_cost": 100, "output_cost": 400, "max_tokens": 1024,
			          "max_concurrent": 4, "requests_per_minute": 60, "tokens_per_minute": 100000}
		}
	}`), getenv)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Models["small"]
	if c.Providers["claude"].apiKey != "sk-x" || m.Provider != "local" || m.Model != "qwen3-4b" || m.InputCost != 100 || m.OutputCost != 400 ||
		m.MaxTokens != 1024 || m.MaxConcurrent != 4 || m.RequestsPerMinute != 60 || m.TokensPerMinute != 100000 {
		t.Fatalf("parsed %+v %+v", c.Providers["claude"], m)
	}
	if c, err := parseConfig(nil, getenv); err != nil || len(c.Models) != 0 {
		t.Fatalf("no config: %v", err)
	}
	if !json.Valid([]byte(configSchema)) {
		t.Fatal("configSchema is not JSON")
	}
}

// The key is read from the variable api_key_env names, sent to the
// provider, and found in no error and no output, whatever the provider
// echoes back.
func TestKeyNeverLeaks(t *testing.T) {
	const key = "sk-weir-test-4f1c9e2b7d"
	t.Setenv("WEIR_TEST_LLM_KEY", key)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			echo := "your key " + key + " is wrong"
			srv := llmtest.New(
				llmtest.Step{Text: "hello"},
				llmtest.Step{Status: 401, ErrorMessage: echo},
				llmtest.Step{Status: 400, ErrorMessage: echo},
				llmtest.Step{Status: 500, ErrorMessage: echo},
				llmtest.Step{Status: 429, ErrorMessage: echo, RetryAfter: "1"},
			)
			srv.APIKey = key
			base := serve(t, srv, kind)
			cfg := fmt.Sprintf(`{"providers":{"p":{"kind":%q,"base_url":%q,"api_key_env":"WEIR_TEST_LLM_KEY"}},"models":{"s":{"provider":"p","model":"m","max_tokens":50}}}`, kind, base)
			tool := newPlugin(lookupEnv).tool()
			in := `{"model":"s","messages":[{"role":"user","content":"hi"}]}`
			res, err := sdktest.Call(context.Background(), tool, sdktest.Request{Input: in, Config: cfg})
			if err != nil {
				t.Fatalf("with the right key: %v", err)
			}
			if strings.Contains(string(res.Output), key) {
				t.Fatal("the key is in the output")
			}
			for i := 0; i < 4; i++ {
				_, err := sdktest.Call(context.Background(), tool, sdktest.Request{Input: in, Config: cfg})
				if err == nil {
					t.Fatalf("error step %d succeeded", i)
				}
				if strings.Contains(err.Error(), key) {
					t.Fatalf("the key is in the error: %v", err)
				}
			}
			// A wrong key is refused by the server; the refusal names neither.
			t.Setenv("WEIR_TEST_LLM_KEY", "sk-wrong-"+key)
			srv2 := llmtest.New(llmtest.Step{Text: "never"})
			srv2.APIKey = key
			base2 := serve(t, srv2, kind)
			cfg2 := strings.Replace(cfg, base, base2, 1)
			_, err = sdktest.Call(context.Background(), newPlugin(lookupEnv).tool(), sdktest.Request{Input: in, Config: cfg2})
			var se *sdktest.Error
			if !errors.As(err, &se) || se.Kind != sdktest.KindPermanent || se.Code != codeAuth || strings.Contains(err.Error(), key) {
				t.Fatalf("wrong key: %v", err)
			}
			t.Setenv("WEIR_TEST_LLM_KEY", key)
		})
	}
}

// TestProviderRulesCatchRefusedSchemas: the conformance check refuses
// what each provider refuses, so that a request it passes is one the
// provider would take (the check can fail).
func TestProviderRulesCatchRefusedSchemas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		api, schema, want string
	}{
		{kindOpenAI, `{"type":"object"}`, "object schema missing properties"},
		{kindOpenAI, `{"type":"object","properties":{"o":{"type":"object"}}}`, "In context=(properties.o), object schema missing properties"},
		{kindOpenAI, `{"type":"object","properties":{},"anyOf":[{}]}`, "at the top level"},
		{kindOpenAI, `{"type":"array","items":{}}`, `schema must be a JSON Schema of 'type: "object"'`},
		{kindAnthropic, `{"type":"object","oneOf":[{}]}`, "input_schema does not support oneOf"},
		{kindAnthropic, `{"type":"object"}`, ""},
		{kindOpenAI, `{"type":"object","properties":{},"additionalProperties":false}`, ""},
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(tc.schema), &m); err != nil {
			t.Fatal(err)
		}
		got := providerRulesRefuse(tc.api, m)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.api, tc.schema, got, tc.want)
		}
		// What the plugin sends of the same schema passes.
		if tc.api == kindOpenAI && strings.Contains(tc.schema, `"array"`) {
			continue // refused before sending (TestNonObjectToolSchemaRefused)
		}
		norm, _, err := normalise(rulesByKind[tc.api], json.RawMessage(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		if why := providerRulesRefuse(tc.api, norm); why != "" {
			t.Errorf("%s %s normalised to %v: still refused: %s", tc.api, tc.schema, norm, why)
		}
	}
}

// wireCall makes one llm.chat call in process, with the config cfg (its
// %s the server's base URL for kind) and the key WEIR_TEST_KEY=key, and
// returns the one request the server saw.
func wireCall(t *testing.T, kind, cfg, key string) llmtest.Request {
	t.Helper()
	srv := llmtest.New(llmtest.Step{Text: "ok"})
	base := serve(t, srv, kind)
	getenv := func(k string) (string, bool) { return key, k == "WEIR_TEST_KEY" && key != "" }
	in := `{"model":"s","messages":[{"role":"user","content":"hi"}]}`
	if _, err := sdktest.Call(context.Background(), newPlugin(getenv).tool(), sdktest.Request{Input: in, Config: fmt.Sprintf(cfg, base)}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	return reqs[0]
}

// TestTokenLimitField: a turn's output limit goes in the field the
// model's token_limit_field names, by default the provider kind's own
// (OpenAI: max_completion_tokens, whatever the host; Anthropic:
// max_tokens), and never in both.
func TestTokenLimitField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, kind, field, want string
	}{
		{"openai default", kindOpenAI, "", fieldMaxCompletionTokens},
		{"openai max_tokens", kindOpenAI, `,"token_limit_field":"max_tokens"`, fieldMaxTokens},
		{"openai explicit", kindOpenAI, `,"token_limit_field":"max_completion_tokens"`, fieldMaxCompletionTokens},
		{"anthropic default", kindAnthropic, "", fieldMaxTokens},
		{"responses default", kindOpenAIResponses, "", fieldMaxOutputTokens},
		{"responses explicit", kindOpenAIResponses, `,"token_limit_field":"max_output_tokens"`, fieldMaxOutputTokens},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := `{"providers":{"p":{"kind":"` + tc.kind + `","base_url":"%s"}},"models":{"s":{"provider":"p","model":"m","max_tokens":77` + tc.field + `}}}`
			r := wireCall(t, tc.kind, cfg, "")
			var body map[string]any
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{fieldMaxTokens, fieldMaxCompletionTokens, fieldMaxOutputTokens} {
				if want := map[bool]any{true: 77.0, false: nil}[f == tc.want]; body[f] != want {
					t.Fatalf("want only %s = 77: %s", tc.want, r.Body)
				}
			}
			if err := conforms(t, r); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAnthropicAuthOnTheWire: the key goes out as the Messages API
// documents it, x-api-key with anthropic-version 2023-06-01, unless the
// provider's auth says bearer (a gateway's contract); never both, and the
// SDK's own newest version is not sent.
func TestAnthropicAuthOnTheWire(t *testing.T) {
	t.Parallel()
	const key = "sk-ant-wire-test"
	for _, tc := range []struct {
		name, extra         string
		xAPIKey, auth, vers string
	}{
		{"default", "", key, "", "2023-06-01"},
		{"x-api-key", `,"auth":"x-api-key"`, key, "", "2023-06-01"},
		{"bearer", `,"auth":"bearer"`, "", "Bearer " + key, "2023-06-01"},
		{"version", `,"anthropic_version":"2024-01-15"`, key, "", "2024-01-15"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := `{"providers":{"p":{"kind":"anthropic","base_url":"%s","api_key_env":"WEIR_TEST_KEY"` + tc.extra + `}},"models":{"s":{"provider":"p","model":"m","max_tokens":5}}}`
			r := wireCall(t, kindAnthropic, cfg, key)
			if got := r.Header.Get("X-Api-Key"); got != tc.xAPIKey {
				t.Errorf("x-api-key %q, want %q", got, tc.xAPIKey)
			}
			if got := r.Header.Get("Authorization"); got != tc.auth {
				t.Errorf("Authorization %q, want %q", got, tc.auth)
			}
			if got := r.Header.Values("Anthropic-Version"); len(got) != 1 || got[0] != tc.vers {
				t.Errorf("anthropic-version %q, want %q", got, tc.vers)
			}
		})
	}
	// An OpenAI provider sends its key as Bearer, as before.
	r := wireCall(t, kindOpenAI, `{"providers":{"p":{"kind":"openai","base_url":"%s","api_key_env":"WEIR_TEST_KEY"}},"models":{"s":{"provider":"p","model":"m","max_tokens":5}}}`, key)
	if r.Header.Get("Authorization") != "Bearer "+key || r.Header.Get("X-Api-Key") != "" {
		t.Errorf("openai headers %v", r.Header)
	}
}

// TestProviderSettingsRefused: the new settings refuse what they cannot
// mean, naming the key.
func TestProviderSettingsRefused(t *testing.T) {
	t.Parallel()
	getenv := func(string) (string, bool) { return "", false }
	for cfg, want := range map[string]string{
		`{"providers":{"p":{"kind":"openai","auth":"x-api-key"}}}`:                                                                                        `providers.p.auth: "x-api-key" is the Messages API's header`,
		`{"providers":{"p":{"kind":"anthropic","auth":"basic"}}}`:                                                                                         `providers.p.auth: unknown "basic"`,
		`{"providers":{"p":{"kind":"openai","anthropic_version":"2023-06-01"}}}`:                                                                          `providers.p.anthropic_version: only an anthropic provider`,
		`{"providers":{"p":{"kind":"anthropic","anthropic_version":"latest"}}}`:                                                                           `providers.p.anthropic_version: "latest" is not a version date`,
		`{"providers":{"p":{"kind":"anthropic"}},"models":{"s":{"provider":"p","model":"m","max_tokens":1,"token_limit_field":"max_completion_tokens"}}}`: `models.s.token_limit_field: "max_completion_tokens" is not a field of an anthropic provider (max_tokens)`,
		`{"providers":{"p":{"kind":"openai"}},"models":{"s":{"provider":"p","model":"m","max_tokens":1,"token_limit_field":"limit"}}}`:                    `models.s.token_limit_field: "limit" is not a field of an openai provider (max_completion_tokens or max_tokens)`,
	} {
		_, err := parseConfig(json.RawMessage(cfg), getenv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}

// TestOverloadBackoff: the schedule of an overloaded provider's retries
// is in seconds, doubling per attempt up to a minute, with at most half
// again of jitter.
func TestOverloadBackoff(t *testing.T) {
	t.Parallel()
	none := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n - 1 }
	for attempt, want := range map[int]time.Duration{0: 2 * time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second,
		5: 32 * time.Second, 6: time.Minute, 40: time.Minute} {
		if got := overloadBackoff(attempt, none); got != want {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
		if got := overloadBackoff(attempt, most); got != want+want/2-1 {
			t.Errorf("attempt %d with most jitter: %v, want %v", attempt, got, want+want/2-1)
		}
	}
}

// TestOverloadRetryAfterOnTheWire: a provider that answers 529 or 429
// without Retry-After gets the overload schedule for the call's attempt
// in the tool error's RetryAfter, which the engine's retry honours; one
// that names a Retry-After gets exactly that; a 500 leaves the wait to
// the engine. The message names the status once, without a stray space.
// The SDKs make one try each (their own retries are off).
func TestOverloadRetryAfterOnTheWire(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		for _, tc := range []struct {
			name    string
			step    llmtest.Step
			attempt int
			want    time.Duration
			says    string
		}{
			{"529 attempt 1", llmtest.Step{Status: 529, ErrorMessage: "Overloaded"}, 1, 2*time.Second + 7, "answered 529 Overloaded: Overloaded"},
			{"529 attempt 3", llmtest.Step{Status: 529, ErrorMessage: "Overloaded"}, 3, 8*time.Second + 7, "answered 529 Overloaded"},
			{"429 attempt 2", llmtest.Step{Status: 429}, 2, 4*time.Second + 7, "answered 429 Too Many Requests"},
			{"503 attempt 1", llmtest.Step{Status: 503}, 1, 2*time.Second + 7, "answered 503 Service Unavailable"},
			{"529 retry-after", llmtest.Step{Status: 529, RetryAfter: "13"}, 3, 13 * time.Second, "529 Overloaded"},
			{"500", llmtest.Step{Status: 500}, 3, 0, "answered 500 Internal Server Error"},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := llmtest.New(tc.step)
				base := serve(t, srv, kind)
				p := newPlugin(lookupEnv)
				p.jitter = func(n int64) int64 { return 7 } // a fixed spread: 7ns
				cfg := fmt.Sprintf(`{"providers":{"p":{"kind":%q,"base_url":%q}},"models":{"s":{"provider":"p","model":"m","max_tokens":50}}}`, kind, base)
				_, err := sdktest.Call(context.Background(), p.tool(), sdktest.Request{Input: `{"model":"s","messages":[{"role":"user","content":"hi"}]}`, Config: cfg, Attempt: tc.attempt})
				var se *sdktest.Error
				if !errors.As(err, &se) || se.Kind != sdktest.KindRetryable {
					t.Fatalf("error %v, want retryable", err)
				}
				if se.RetryAfter != tc.want {
					t.Errorf("retry after %v, want %v", se.RetryAfter, tc.want)
				}
				if !strings.Contains(se.Message, tc.says) || strings.Contains(se.Message, " :") {
					t.Errorf("message %q, want it to say %q", se.Message, tc.says)
				}
				if n := len(srv.Requests()); n != 1 {
					t.Errorf("%d requests for one try", n)
				}
			})
		}
	}
}

// TestResponsesFailureInsideStream: a response.failed or error event of
// the Responses API is classified by its code, as an HTTP error would be.
func TestResponsesFailureInsideStream(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]struct {
		code      string
		retryable bool
	}{
		"rate_limit_exceeded":     {codeRate, true},
		"server_error":            {codeUnavailable, true},
		"vector_store_timeout":    {codeUnavailable, true},
		"":                        {codeUnavailable, true},
		"context_length_exceeded": {codeContext, false},
		"invalid_prompt":          {codeBadRequest, false},
	} {
		got := classify(&responsesFailure{code: code, message: "m"}, "p", t0)
		if got.Code != want.code || got.Retryable != want.retryable {
			t.Errorf("%q: %s retryable %v, want %s %v", code, got.Code, got.Retryable, want.code, want.retryable)
		}
	}
}

// TestResponsesTokenFloor: the Responses API takes max_output_tokens of
// 16 or more: a model configured below is refused with its key, and a
// turn asking for less is refused before any request.
func TestResponsesTokenFloor(t *testing.T) {
	t.Parallel()
	getenv := func(string) (string, bool) { return "", false }
	_, err := parseConfig(json.RawMessage(`{"providers":{"p":{"kind":"openai-responses"}},"models":{"s":{"provider":"p","model":"m","max_tokens":8}}}`), getenv)
	if err == nil || !strings.Contains(err.Error(), "models.s.max_tokens: 8 is outside 16..") {
		t.Fatalf("config: %v", err)
	}
	srv := llmtest.New(llmtest.Step{Text: "never"})
	cfg := fmt.Sprintf(`{"providers":{"p":{"kind":"openai-responses","base_url":%q}},"models":{"s":{"provider":"p","model":"m","max_tokens":64}}}`, serve(t, srv, kindOpenAIResponses))
	_, err = sdktest.Call(context.Background(), newPlugin(getenv).tool(), sdktest.Request{Input: `{"model":"s","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, Config: cfg})
	var se *sdktest.Error
	if !errors.As(err, &se) || se.Code != codeBadRequest || !strings.Contains(se.Message, "below the 16") {
		t.Fatalf("turn: %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests", n)
	}
}

// A caller header is sent only with a value a header can carry whole.
func TestCallerHeadersBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("n", maxCallerHeader+1)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	state := "congo=" + strings.Repeat("t", 300)
	for _, c := range []struct {
		run, node, trace, state string
		want                    map[string]string
	}{
		{"r-1", "plan", "", "", map[string]string{headerRun: "r-1", headerNode: "plan"}},
		{"", "plan", "", "", map[string]string{headerNode: "plan"}},
		{"r-1", "a\r\nX-Evil: 1", "", "", map[string]string{headerRun: "r-1"}},
		{"r-1", "agent—é", "", "", map[string]string{headerRun: "r-1"}},
		{long, strings.Repeat("n", maxCallerHeader), "", "", map[string]string{headerNode: strings.Repeat("n", maxCallerHeader)}},
		{"r-1", "plan", tp, state, map[string]string{headerRun: "r-1", headerNode: "plan", headerTrace: tp, headerState: state}},
		{"r-1", "", tp + "\r\nX-Evil: 1", state + strings.Repeat("t", maxTraceState), map[string]string{headerRun: "r-1"}},
	} {
		got := (&turnRequest{run: c.run, node: c.node, traceparent: c.trace, tracestate: c.state}).callerHeaders()
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("run %.20q node %.20q trace %.20q: headers %v, want %v", c.run, c.node, c.trace, got, c.want)
		}
	}
}
