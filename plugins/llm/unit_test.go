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
			if err := srv.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			base := srv.OpenAIBaseURL()
			if kind == kindAnthropic {
				base = srv.URL()
			}
			cfg := fmt.Sprintf(`{"providers":{"p":{"kind":%q,"base_url":%q,"api_key_env":"WEIR_TEST_LLM_KEY"}},"models":{"s":{"provider":"p","model":"m","max_tokens":5}}}`, kind, base)
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
			if err := srv2.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			defer srv2.Close()
			base2 := srv2.OpenAIBaseURL()
			if kind == kindAnthropic {
				base2 = srv2.URL()
			}
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

// A caller header is sent only with a value a header can carry whole.
func TestCallerHeadersBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("n", maxCallerHeader+1)
	for _, c := range []struct {
		run, node string
		want      map[string]string
	}{
		{"r-1", "plan", map[string]string{headerRun: "r-1", headerNode: "plan"}},
		{"", "plan", map[string]string{headerNode: "plan"}},
		{"r-1", "a\r\nX-Evil: 1", map[string]string{headerRun: "r-1"}},
		{"r-1", "agent—é", map[string]string{headerRun: "r-1"}},
		{long, strings.Repeat("n", maxCallerHeader), map[string]string{headerNode: strings.Repeat("n", maxCallerHeader)}},
	} {
		got := (&turnRequest{run: c.run, node: c.node}).callerHeaders()
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("run %.20q node %.20q: headers %v, want %v", c.run, c.node, got, c.want)
		}
	}
}
