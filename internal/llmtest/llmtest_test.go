package llmtest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
