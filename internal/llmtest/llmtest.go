// Package llmtest is a scripted model server for offline tests and demos.
//
// One Server speaks, on a loopback listener, the wire formats of the
// provider APIs weir's llm plugin calls: OpenAI Chat Completions
// (POST /v1/chat/completions), OpenAI Responses (POST /v1/responses) and
// Anthropic Messages (POST /v1/messages), each with and without SSE
// streaming. It plays a script of answers — text,
// tool calls, errors with their status and Retry-After, malformed or cut
// streams — and counts the requests it received and the tokens it billed,
// so that a crash test can check that weir never pays twice for a turn it
// journaled. The scripted-llm command serves a script from a JSON file.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Script is a list of answers, as read from a JSON file.
type Script struct {
	Steps []Step `json:"steps"`
	// Loop starts the script over when every step was played, for a
	// demo that runs more turns than the script lists.
	Loop bool `json:"loop,omitempty"`
}

// Step is one scripted answer: a turn of the model, or an error.
type Step struct {
	// The match keys reserve a step for the requests that fit every key
	// set, so that concurrent agents each get their own answers; a step
	// with none fits any request. A request takes the first unplayed step
	// that fits it, in the script's order.
	//
	// Match is a substring of the request's raw JSON body (as encoded:
	// a quote in the prompt is \" there).
	Match string `json:"match,omitempty"`
	// MatchLastUser is a substring of the text of the last message a
	// user wrote; tool results, which Anthropic's format carries in user
	// messages, are not a user's text.
	MatchLastUser string `json:"match_last_user,omitempty"`
	// MatchSystem is a substring of the system prompt (every system
	// message, joined): where a flow's author puts a marker such as
	// "[researcher]" that aims a step at one agent.
	MatchSystem string `json:"match_system,omitempty"`
	// Node is the id of the agent node asking, exactly, as weir's llm
	// plugin sends it in the X-Weir-Node header. Sub-agents of one
	// fan-out share a node id: tell them apart by match_last_user.
	Node string `json:"node,omitempty"`

	// Text is the model's text answer.
	Text string `json:"text,omitempty"`
	// ToolCalls are the tool calls the model asks for, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// StopReason overrides the stop reason ("end_turn", "tool_use",
	// "max_tokens"); by default tool_use when there are tool calls,
	// end_turn otherwise.
	StopReason string `json:"stop_reason,omitempty"`
	// Usage is what the turn bills; by default a quarter of the request's
	// bytes in, and one token per streamed delta out.
	Usage *Usage `json:"usage,omitempty"`
	// NoUsage leaves usage out of the answer, as some OpenAI-compatible
	// servers do; the tokens are still counted as billed.
	NoUsage bool `json:"no_usage,omitempty"`

	// Status, when set, answers this HTTP status with the provider's
	// error body instead of a turn.
	Status int `json:"status,omitempty"`
	// RetryAfter is sent as the Retry-After header of an error.
	RetryAfter string `json:"retry_after,omitempty"`
	// ErrorCode is the provider's error code or type; the neutral
	// "context_length_exceeded" becomes each provider's own way of
	// saying the prompt is too long.
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`

	// Malformed sends an event that is not JSON after the first delta
	// of a stream (or a body that is not JSON without streaming).
	Malformed bool `json:"malformed,omitempty"`
	// CutShort ends the stream after its first delta, before the turn
	// ends.
	CutShort bool `json:"cut_short,omitempty"`
	// Hold, when set, pauses a stream after its first delta until the
	// channel is closed, so that a test can watch a turn in progress.
	Hold <-chan struct{} `json:"-"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	// ID defaults to a generated id.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is the call's input, a JSON object; empty means {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// RawArguments, when set, is sent verbatim instead of Arguments, to
	// script arguments that are not JSON.
	RawArguments string `json:"raw_arguments,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Request is one request the server received.
type Request struct {
	// API is "openai", "openai-responses" or "anthropic".
	API    string
	Header http.Header
	Body   json.RawMessage
	// Step is the index of the step played, or -1 when none was left
	// (or when a Respond function answered).
	Step int
	// At is when the server read the request.
	At time.Time
}

// Server plays a script. Its methods are safe for concurrent use.
type Server struct {
	// APIKey, when set, is the key every request must carry
	// (Authorization: Bearer KEY, or x-api-key for Anthropic); others get
	// 401.
	APIKey string
	// Respond, when set, answers every request from its raw JSON body
	// instead of the script: a stateless model whose answer depends only
	// on the conversation, for many agents at once whose turns interleave
	// in any order (the soak's). Set it before Start.
	Respond func(api string, body []byte) Step
	// RequestsPerMinute, when set, is a provider's rate limit as a
	// sliding window of the requests it accepted: one more within a
	// minute is answered 429 with a Retry-After (Refused counts them).
	// Set it before Start.
	RequestsPerMinute int

	mu       sync.Mutex
	steps    []Step
	played   []bool
	loop     bool
	requests []Request
	billed   Usage
	turns    int
	seq      int
	accepted []time.Time // within the last minute, for RequestsPerMinute
	refused  int

	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// New returns a server that plays steps once each, in order.
func New(steps ...Step) *Server {
	return NewScript(Script{Steps: steps})
}

// NewScript returns a server that plays s.
func NewScript(s Script) *Server {
	return &Server{steps: s.Steps, played: make([]bool, len(s.Steps)), loop: s.Loop}
}

// LoadScript reads a script from a JSON file, refusing unknown fields.
func LoadScript(path string) (Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return Script{}, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(s.Steps) == 0 {
		return Script{}, fmt.Errorf("%s: the script has no steps", path)
	}
	for i, st := range s.Steps {
		for _, c := range st.ToolCalls {
			if c.Name == "" {
				return Script{}, fmt.Errorf("%s: step %d: a tool call has no name", path, i)
			}
			if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
				return Script{}, fmt.Errorf("%s: step %d: arguments of %s are not JSON", path, i, c.Name)
			}
		}
	}
	return s, nil
}

// Start listens on addr, which must be a loopback address ("127.0.0.1:0"
// picks a free port), and serves until Close.
func (s *Server) Start(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("llmtest serves on loopback only, not %q", host)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.handle(w, r, apiOpenAI) })
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.handle(w, r, apiAnthropic) })
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) { s.handle(w, r, apiResponses) })
	s.ln = ln
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return nil
}

// T is what StartT needs of a test (a *testing.T or *testing.B),
// without this package, which the scripted-llm command serves from,
// importing testing.
type T interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// StartT starts the server on a free loopback port for the test t, and
// closes it when t ends.
func (s *Server) StartT(t T) {
	t.Helper()
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	err := s.srv.Close()
	<-s.done
	return err
}

// URL is the server's root, e.g. http://127.0.0.1:8089. It is the base
// URL of the Anthropic API.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// OpenAIBaseURL is the base URL of the OpenAI-compatible API: URL + "/v1".
func (s *Server) OpenAIBaseURL() string { return s.URL() + "/v1" }

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Billed returns the tokens billed so far: every turn the server
// answered, complete or not.
func (s *Server) Billed() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.billed
}

// Turns counts the turns answered (errors excluded).
func (s *Server) Turns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns
}

// Remaining counts the steps not played yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.played {
		if !p {
			n++
		}
	}
	return n
}

const (
	apiOpenAI    = "openai"
	apiResponses = "openai-responses"
	apiAnthropic = "anthropic"
)

// maxBody bounds a request body the server reads.
const maxBody = 16 << 20

// take picks the step for a request and records it.
func (s *Server) take(api string, h http.Header, body []byte) (Step, int) {
	if s.Respond != nil {
		st := s.Respond(api, body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests = append(s.requests, Request{API: api, Header: h.Clone(), Body: append(json.RawMessage(nil), body...), Step: -1, At: time.Now()})
		s.seq++
		return st, s.seq
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := readRequest(api, h, body)
	pick := func() int {
		for i, st := range s.steps {
			if !s.played[i] && st.fits(seen) {
				return i
			}
		}
		return -1
	}
	i := pick()
	if i < 0 && s.loop && len(s.steps) > 0 {
		clear(s.played)
		i = pick()
	}
	s.requests = append(s.requests, Request{API: api, Header: h.Clone(), Body: append(json.RawMessage(nil), body...), Step: i, At: time.Now()})
	if i < 0 {
		return Step{}, -1
	}
	s.played[i] = true
	s.seq++
	return s.steps[i], s.seq
}

// overLimit counts a request against RequestsPerMinute: over says it is
// refused, and wait when the oldest accepted one leaves the minute.
func (s *Server) overLimit() (wait time.Duration, over bool) {
	if s.RequestsPerMinute <= 0 {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for len(s.accepted) > 0 && now.Sub(s.accepted[0]) >= time.Minute {
		s.accepted = s.accepted[1:]
	}
	if len(s.accepted) >= s.RequestsPerMinute {
		s.refused++
		return time.Minute - now.Sub(s.accepted[0]), true
	}
	s.accepted = append(s.accepted, now)
	return 0, false
}

// Refused is how many requests RequestsPerMinute refused.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *Server) bill(u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billed.InputTokens += u.InputTokens
	s.billed.OutputTokens += u.OutputTokens
	s.turns++
}

// wireRequest is the part of either API's request the server reads.
type wireRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, api string) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, api, Step{Status: http.StatusBadRequest, ErrorMessage: err.Error()})
		return
	}
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, api, Step{Status: http.StatusBadRequest, ErrorMessage: "request body is not JSON: " + err.Error()})
		return
	}
	if s.APIKey != "" && !hasKey(r, api, s.APIKey) {
		s.mu.Lock()
		s.requests = append(s.requests, Request{API: api, Header: r.Header.Clone(), Body: append(json.RawMessage(nil), body...), Step: -1, At: time.Now()})
		s.mu.Unlock()
		writeError(w, api, Step{Status: http.StatusUnauthorized})
		return
	}
	if wait, over := s.overLimit(); over {
		writeError(w, api, Step{Status: http.StatusTooManyRequests, RetryAfter: fmt.Sprint(int(wait.Seconds()) + 1), ErrorMessage: "rate limit: requests_per_minute"})
		return
	}
	step, seq := s.take(api, r.Header, body)
	if seq < 0 {
		writeError(w, api, Step{Status: http.StatusInternalServerError, ErrorMessage: "llmtest: no scripted step left for this request"})
		return
	}
	if step.Status != 0 {
		writeError(w, api, step)
		return
	}
	t := newTurn(step, seq, req.Model, int64(len(body)))
	s.bill(t.usage)
	if !req.Stream {
		if step.Malformed {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id": "broken", "choices": [`))
			return
		}
		writeJSON(w, http.StatusOK, t.whole(api))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w, ctx: r.Context().Done()}
	if f, ok := w.(http.Flusher); ok {
		sse.flush = f.Flush
	}
	switch api {
	case apiOpenAI:
		t.streamOpenAI(sse, req.StreamOptions.IncludeUsage)
	case apiResponses:
		t.streamResponses(sse)
	default:
		t.streamAnthropic(sse)
	}
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}

func hasKey(r *http.Request, api, key string) bool {
	if r.Header.Get("Authorization") == "Bearer "+key {
		return true
	}
	return api == apiAnthropic && r.Header.Get("X-Api-Key") == key
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers step's error status in api's error format.
func writeError(w http.ResponseWriter, api string, step Step) {
	if step.RetryAfter != "" {
		w.Header().Set("Retry-After", step.RetryAfter)
	}
	msg := step.ErrorMessage
	code := step.ErrorCode
	if api != apiAnthropic { // both OpenAI APIs answer errors alike
		typ := "invalid_request_error"
		switch {
		case step.Status == http.StatusTooManyRequests:
			typ = "rate_limit_exceeded"
			if code == "" {
				code = "rate_limit_exceeded"
			}
		case step.Status == http.StatusUnauthorized:
			typ, code = "invalid_request_error", "invalid_api_key"
		case step.Status >= 500:
			typ = "server_error"
		}
		if msg == "" {
			msg = http.StatusText(step.Status)
			if code == "context_length_exceeded" {
				msg = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens."
			}
		}
		var c any
		if code != "" {
			c = code
		}
		writeJSON(w, step.Status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
		return
	}
	typ := code
	if typ == "" || typ == "context_length_exceeded" {
		typ = anthropicErrorType(step.Status)
	}
	if msg == "" {
		msg = http.StatusText(step.Status)
		if code == "context_length_exceeded" {
			msg = "prompt is too long: 250000 tokens > 200000 maximum"
		}
	}
	w.Header().Set("request-id", "req_llmtest")
	writeJSON(w, step.Status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}
