package llmtest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, s *Server) *Server {
	t.Helper()
	s.StartT(t)
	return s
}

// The answers without streaming read back through the official SDKs, as
// a direct call of the bench does.
func TestWholeAnswersReadByTheSDKs(t *testing.T) {
	t.Parallel()
	s := start(t, New(
		Step{Text: "hello there", Usage: &Usage{InputTokens: 10, OutputTokens: 2}},
		Step{ToolCalls: []ToolCall{{ID: "t1", Name: "notes__put", Arguments: json.RawMessage(`{"key":"k"}`)}}, Usage: &Usage{InputTokens: 20, OutputTokens: 5}},
	))
	oc := openai.NewClient(ooption.WithBaseURL(s.OpenAIBaseURL()), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	r, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Choices[0].Message.Content != "hello there" || r.Choices[0].FinishReason != "stop" || r.Usage.PromptTokens != 10 || r.Usage.CompletionTokens != 2 {
		t.Fatalf("openai answer %+v", r)
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(s.URL()), aoption.WithAPIKey("x"), aoption.WithMaxRetries(0))
	m, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "notes__put" || string(m.Content[0].Input) != `{"key":"k"}` ||
		m.StopReason != anthropic.StopReasonToolUse || m.Usage.OutputTokens != 5 {
		t.Fatalf("anthropic answer %+v", m)
	}
	if b := s.Billed(); b != (Usage{InputTokens: 30, OutputTokens: 7}) || s.Turns() != 2 || s.Remaining() != 0 {
		t.Fatalf("billed %+v over %d turns, %d left", b, s.Turns(), s.Remaining())
	}
	if got := s.Requests(); len(got) != 2 || got[0].API != "openai" || got[1].API != "anthropic" {
		t.Fatalf("requests %+v", got)
	}
}

func TestMatchLoopAndExhaustion(t *testing.T) {
	t.Parallel()
	s := start(t, NewScript(Script{Steps: []Step{{Match: "topic B", Text: "about B"}, {Match: "topic A", Text: "about A"}}}))
	oc := openai.NewClient(ooption.WithBaseURL(s.OpenAIBaseURL()), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	ask := func(q string) (string, error) {
		r, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}})
		if err != nil {
			return "", err
		}
		return r.Choices[0].Message.Content, nil
	}
	if a, err := ask("tell me about topic A"); err != nil || a != "about A" {
		t.Fatalf("%q %v", a, err)
	}
	if _, err := ask("tell me about topic A"); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("an exhausted script answered %v", err)
	}
	if s.Requests()[1].Step != -1 {
		t.Fatal("an unplayed request is not marked")
	}

	l := start(t, NewScript(Script{Steps: []Step{{Text: "again"}}, Loop: true}))
	oc = openai.NewClient(ooption.WithBaseURL(l.OpenAIBaseURL()), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	for i := 0; i < 3; i++ {
		if a, err := ask("x"); err != nil || a != "again" {
			t.Fatalf("loop %d: %q %v", i, a, err)
		}
	}
}

func TestAPIKeyRequired(t *testing.T) {
	t.Parallel()
	s := New(Step{Text: "ok"})
	s.APIKey = "right"
	start(t, s)
	oc := openai.NewClient(ooption.WithBaseURL(s.OpenAIBaseURL()), ooption.WithAPIKey("wrong"), ooption.WithMaxRetries(0))
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("q")}})
	if err == nil || !strings.Contains(err.Error(), "401") || s.Remaining() != 1 {
		t.Fatalf("wrong key: %v, %d steps left", err, s.Remaining())
	}
}

// RequestsPerMinute refuses the request past the limit within a minute
// with a 429 and plays no step for it.
func TestRequestsPerMinute(t *testing.T) {
	t.Parallel()
	s := New(Step{Text: "one"}, Step{Text: "two"}, Step{Text: "three"})
	s.RequestsPerMinute = 2
	start(t, s)
	body := `{"model":"m","messages":[{"role":"user","content":"q"}]}`
	for _, want := range []string{"one", "two", "429 Too Many Requests"} {
		if got := post(t, s, apiOpenAI, "", body); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if s.Refused() != 1 || s.Remaining() != 1 {
		t.Fatalf("%d refused, %d steps left", s.Refused(), s.Remaining())
	}
}

func TestLoadScriptAndLoopbackOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s, err := LoadScript(write("good.json", `{"steps":[{"text":"hi"},{"tool_calls":[{"name":"a__b","arguments":{"x":1}}]},{"status":429,"retry_after":"2"}],"loop":true}`))
	if err != nil || len(s.Steps) != 3 || !s.Loop || s.Steps[2].Status != 429 {
		t.Fatalf("%+v %v", s, err)
	}
	for name, body := range map[string]string{
		"unknown.json": `{"steps":[{"txt":"hi"}]}`,
		"empty.json":   `{"steps":[]}`,
		"noname.json":  `{"steps":[{"tool_calls":[{"arguments":{}}]}]}`,
	} {
		if _, err := LoadScript(write(name, body)); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if err := New().Start("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("a non-loopback address: %v", err)
	}
}

// A Respond function answers every request from its body, in place of the
// script, and each request is recorded with the time it was read.
func TestRespondAnswersFromTheBody(t *testing.T) {
	t.Parallel()
	s := NewScript(Script{})
	s.Respond = func(api string, body []byte) Step {
		if strings.Contains(string(body), "ping") {
			return Step{Text: "pong from " + api}
		}
		return Step{Status: http.StatusBadRequest, ErrorMessage: "say ping"}
	}
	start(t, s)
	oc := openai.NewClient(ooption.WithBaseURL(s.OpenAIBaseURL()), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	ask := func(q string) (string, error) {
		r, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}})
		if err != nil {
			return "", err
		}
		return r.Choices[0].Message.Content, nil
	}
	before := time.Now()
	for range 3 {
		if a, err := ask("ping"); err != nil || a != "pong from openai" {
			t.Fatalf("%q %v", a, err)
		}
	}
	if _, err := ask("hello"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("the responder's error answered %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || s.Turns() != 3 {
		t.Fatalf("%d requests, %d turns billed; want 4 and 3", len(reqs), s.Turns())
	}
	for i, r := range reqs {
		if r.At.Before(before) || (i > 0 && r.At.Before(reqs[i-1].At)) {
			t.Fatalf("request %d read at %v, before %v or its predecessor", i, r.At, before)
		}
	}
}

// post sends body to the server's endpoint of api, with the node header
// when node is set, and returns the answer's text or the status.
func post(t *testing.T, s *Server, api, node, body string) string {
	t.Helper()
	url := map[string]string{apiOpenAI: s.OpenAIBaseURL() + "/chat/completions", apiResponses: s.OpenAIBaseURL() + "/responses", apiAnthropic: s.URL() + "/v1/messages"}[api]
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if node != "" {
		req.Header.Set(NodeHeader, node)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.Status
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Choices) > 0 {
		return out.Choices[0].Message.Content
	}
	if len(out.Content) > 0 {
		return out.Content[0].Text
	}
	for _, o := range out.Output {
		if len(o.Content) > 0 {
			return o.Content[0].Text
		}
	}
	return ""
}

// Each match key aims a step at the requests it names, in every wire
// formats: the last user message (not a tool result, not an earlier
// prompt), the system prompt, the node header, and the raw body.
func TestMatchKeys(t *testing.T) {
	t.Parallel()
	bodies := map[string]struct{ first, later string }{
		// A first turn, and a later one: a tool result after the prompt.
		apiOpenAI: {
			first: `{"model":"m","messages":[{"role":"system","content":"[critic] Be sharp."},{"role":"user","content":"Question: what is a lease"}]}`,
			later: `{"model":"m","messages":[{"role":"system","content":"[critic] Be sharp."},{"role":"user","content":"Question: what is a lease"},` +
				`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"notes__put","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"Question: what is a cohort"}]}`,
		},
		apiAnthropic: {
			first: `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"[critic] Be sharp."}],"messages":[{"role":"user","content":[{"type":"text","text":"Question: what is a lease"}]}]}`,
			later: `{"model":"m","max_tokens":10,"system":"[critic] Be sharp.","messages":[{"role":"user","content":"Question: what is a lease"},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"notes__put","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"Question: what is a cohort"}]}]}`,
		},
		apiResponses: {
			first: `{"model":"m","instructions":"[critic] Be sharp.","input":[{"role":"user","content":"Question: what is a lease"}]}`,
			later: `{"model":"m","instructions":"[critic] Be sharp.","input":[{"role":"user","content":[{"type":"input_text","text":"Question: what is a lease"}]},` +
				`{"type":"function_call","call_id":"c1","name":"notes__put","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"Question: what is a cohort"}]}`,
		},
	}
	for _, api := range []string{apiOpenAI, apiResponses, apiAnthropic} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			b := bodies[api]
			cases := []struct {
				name string
				step Step
				node string
				body string
				fits bool
			}{
				{"last user fits the prompt", Step{MatchLastUser: "what is a lease"}, "", b.first, true},
				{"last user skips a tool result", Step{MatchLastUser: "what is a lease"}, "", b.later, true},
				{"a tool result is not a user's text", Step{MatchLastUser: "what is a cohort"}, "", b.later, false},
				{"the system prompt is not a user's text", Step{MatchLastUser: "[critic]"}, "", b.first, false},
				{"system fits a marker", Step{MatchSystem: "[critic]"}, "", b.later, true},
				{"system is not the prompt", Step{MatchSystem: "what is a lease"}, "", b.first, false},
				{"node fits its header", Step{Node: "critic"}, "critic", b.first, true},
				{"node is exact", Step{Node: "critic"}, "critic_2", b.first, false},
				{"node needs the header", Step{Node: "critic"}, "", b.first, false},
				{"match is the raw body", Step{Match: `"role":"tool"`}, "", b.later, api == apiOpenAI},
				{"every key set must fit", Step{Node: "critic", MatchLastUser: "what is a wait"}, "critic", b.first, false},
				{"keys together", Step{Node: "critic", MatchSystem: "[critic]", MatchLastUser: "lease"}, "critic", b.later, true},
			}
			for _, c := range cases {
				c.step.Text = "aimed"
				s := start(t, New(c.step))
				got := post(t, s, api, c.node, c.body)
				if (got == "aimed") != c.fits {
					t.Errorf("%s: answered %q, want fits=%v", c.name, got, c.fits)
				}
			}
		})
	}
}

// The first unplayed step that fits wins: two sub-agents of one node each
// get their own two turns, whatever order their requests come in.
func TestFirstUnplayedFittingStepWins(t *testing.T) {
	t.Parallel()
	s := start(t, New(
		Step{Node: "research", MatchLastUser: "lease", Text: "lease 1"},
		Step{Node: "research", MatchLastUser: "lease", Text: "lease 2"},
		Step{Node: "research", MatchLastUser: "cohort", Text: "cohort 1"},
		Step{Node: "research", MatchLastUser: "cohort", Text: "cohort 2"},
		Step{Text: "anyone"},
	))
	ask := func(q string) string {
		return post(t, s, apiOpenAI, "research", `{"model":"m","messages":[{"role":"user","content":"`+q+`"}]}`)
	}
	for _, want := range [][2]string{{"cohort", "cohort 1"}, {"lease", "lease 1"}, {"cohort", "cohort 2"}, {"lease", "lease 2"}, {"lease", "anyone"}} {
		if got := ask(want[0]); got != want[1] {
			t.Fatalf("asked about %s: %q, want %q", want[0], got, want[1])
		}
	}
	if got := ask("lease"); !strings.Contains(got, "500") {
		t.Fatalf("an exhausted script answered %q", got)
	}
}

// ScriptFormat, which scripted-llm -h prints, names every key a script
// may hold.
func TestScriptFormatNamesEveryKey(t *testing.T) {
	t.Parallel()
	for _, typ := range []reflect.Type{reflect.TypeOf(Script{}), reflect.TypeOf(Step{}), reflect.TypeOf(ToolCall{}), reflect.TypeOf(Usage{})} {
		for i := 0; i < typ.NumField(); i++ {
			key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if key == "" || key == "-" {
				continue
			}
			if !strings.Contains(ScriptFormat, `"`+key+`"`) {
				t.Errorf("ScriptFormat does not name %s's key %q", typ.Name(), key)
			}
		}
	}
}
