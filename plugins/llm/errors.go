package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	oaisse "github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/chat"
)

// The stable codes of a failed model call. They cross into run events and
// the model's view of a failed turn, so they never change meaning.
const (
	// codeRate: the provider answered 429; retryable after RetryAfter.
	codeRate = "E_MODEL_RATE"
	// codeRateLocal: a per-model limit of this plugin's config refused the
	// call before it was made; retryable after RetryAfter.
	codeRateLocal = "E_MODEL_RATE_LOCAL"
	// codeUnavailable: 5xx, timeout, lost connection or a stream cut
	// short; retryable.
	codeUnavailable = "E_MODEL_UNAVAILABLE"
	// codeAuth: 401/403, or an account that cannot be billed; permanent.
	codeAuth = "E_MODEL_AUTH"
	// codeNotFound: 404, usually an unknown model id; permanent.
	codeNotFound = "E_MODEL_NOT_FOUND"
	// codeContext: the prompt does not fit the model's context; permanent.
	codeContext = "E_MODEL_CONTEXT"
	// codeBadRequest: any other refusal of the request, including an
	// unknown model alias or max_tokens above the model's; permanent.
	codeBadRequest = "E_MODEL_BAD_REQUEST"
	// codeMalformed: the provider's answer could not be read as a turn
	// (not JSON, tool arguments that are not an object); retryable, as
	// the next answer may be well formed.
	codeMalformed = "E_MODEL_MALFORMED"
	// codeConfig: the plugin's config is refused; permanent until the
	// operator fixes it.
	codeConfig = "E_MODEL_CONFIG"
)

// maxRetryAfter bounds a Retry-After the plugin passes on: a provider
// asking for longer is asked again after this.
const maxRetryAfter = time.Hour

// maxProviderMessage bounds how much of a provider's error text an error
// quotes.
const maxProviderMessage = 300

// modelError is a failed model call with its stable code. It reaches the
// engine as an sdk.Error: the code and the retry-after in their own fields
// of the plugin protocol's tool error, the kind from Retryable.
type modelError struct {
	Code       string
	Retryable  bool
	RetryAfter time.Duration
	Msg        string
	// overload: the provider said it is overloaded or rate limited
	// (429, 503, 529): a retry waits for its Retry-After, or else for
	// overloadBackoff, never the engine's sub-second base.
	overload bool
	// used is what the provider reported the failed turn used before it
	// failed (a stream cut off after its start): billed, though no
	// answer came.
	used chat.Usage
}

func (e *modelError) Error() string {
	s := e.Code + ": " + e.Msg
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// toolError is what Run returns for e.
func (e *modelError) toolError() error {
	out := &sdk.Error{Kind: sdk.KindPermanent, Code: e.Code, Message: e.Msg, Err: e, InputTokens: e.used.InputTokens, OutputTokens: e.used.OutputTokens}
	if e.Retryable {
		out.Kind, out.RetryAfter = sdk.KindRetryable, e.RetryAfter
	}
	return out
}

func failf(code string, retryable bool, format string, args ...any) *modelError {
	return &modelError{Code: code, Retryable: retryable, Msg: fmt.Sprintf(format, args...)}
}

// malformedError marks an answer the plugin could not read as a turn.
type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }

// cutShortError marks a stream that ended before the turn did.
type cutShortError struct{ msg string }

func (e *cutShortError) Error() string { return e.msg }

// classify turns what a provider SDK returned into a modelError: the one
// place that decides which failures are worth another try. where names
// the provider for the message; now reads the clock for an HTTP-date
// Retry-After. The caller handles the call's own cancellation first.
func classify(err error, where string, now time.Time) *modelError {
	var me *modelError
	if errors.As(err, &me) {
		return me
	}
	var (
		oe  *openai.Error
		ae  *anthropic.Error
		ose *oaisse.StreamError
		rf  *responsesFailure
		mal *malformedError
		cut *cutShortError
	)
	switch {
	case errors.As(err, &oe):
		code, retry := statusCode(oe.StatusCode, oe.Code+" "+oe.Type, oe.Message)
		return &modelError{Code: code, Retryable: retry, RetryAfter: retryAfter(oe.Response, now), overload: isOverload(oe.StatusCode),
			Msg: fmt.Sprintf("%s answered %s%s", where, statusLine(oe.StatusCode), quote(code, oe.Message))}
	case errors.As(err, &ae):
		status := ae.StatusCode
		if status == 0 || status == http.StatusOK {
			// An error event inside a stream that had started well.
			status = anthropicTypeStatus(string(ae.Type()))
		}
		code, retry := statusCode(status, string(ae.Type()), ae.Message)
		return &modelError{Code: code, Retryable: retry, RetryAfter: retryAfter(ae.Response, now), overload: isOverload(status),
			Msg: fmt.Sprintf("%s answered %s%s", where, statusLine(status), quote(code, ae.Message))}
	case errors.As(err, &ose):
		// An error object inside an OpenAI stream.
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(ose.Event.Data, &body)
		kind := fmt.Sprint(body.Error.Code) + " " + body.Error.Type
		status := http.StatusInternalServerError
		if strings.Contains(kind, "rate_limit") {
			status = http.StatusTooManyRequests
		}
		code, retry := statusCode(status, kind, body.Error.Message)
		return &modelError{Code: code, Retryable: retry, overload: isOverload(status), Msg: fmt.Sprintf("%s sent an error inside its stream%s", where, quote(code, body.Error.Message))}
	case errors.As(err, &rf):
		// A response.failed or error event of the Responses API.
		status := http.StatusBadRequest
		switch {
		case strings.Contains(rf.code, "rate_limit"):
			status = http.StatusTooManyRequests
		case rf.code == "server_error" || strings.Contains(rf.code, "timeout") || rf.code == "":
			status = http.StatusInternalServerError
		}
		code, retry := statusCode(status, rf.code, rf.message)
		return &modelError{Code: code, Retryable: retry, overload: isOverload(status),
			Msg: fmt.Sprintf("%s sent an error inside its stream%s", where, quote(code, escape.Cut(rf.code+": "+rf.message, maxProviderMessage)))}
	case errors.As(err, &mal):
		return &modelError{Code: codeMalformed, Retryable: true, Msg: fmt.Sprintf("%s: %s", where, mal.msg)}
	case errors.As(err, &cut):
		return &modelError{Code: codeUnavailable, Retryable: true, Msg: fmt.Sprintf("%s: %s", where, cut.msg)}
	case isJSONError(err):
		return &modelError{Code: codeMalformed, Retryable: true, Msg: fmt.Sprintf("%s answered something that is not a model turn: %v", where, err)}
	case isTransportError(err):
		return &modelError{Code: codeUnavailable, Retryable: true, Msg: fmt.Sprintf("%s could not be reached or dropped the connection: %v", where, err)}
	}
	return &modelError{Code: codeUnavailable, Retryable: true, Msg: fmt.Sprintf("%s: %v", where, err)}
}

// statusOverloaded is the status Anthropic answers when it is overloaded;
// net/http has no name for it.
const statusOverloaded = 529

// statusLine is a status with its name, "529 Overloaded", or the bare
// number for a status without one.
func statusLine(status int) string {
	text := http.StatusText(status)
	if status == statusOverloaded {
		text = "Overloaded"
	}
	if text == "" {
		return strconv.Itoa(status)
	}
	return strconv.Itoa(status) + " " + text
}

// isOverload tells the statuses of a provider that asks to be called
// less: rate limited, unavailable, overloaded.
func isOverload(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == statusOverloaded
}

// The schedule of retries of an overloaded provider that names no
// Retry-After: overloadBackoffBase doubled per attempt, up to
// overloadBackoffMax, plus up to half again of random jitter so that the
// agents a provider refused together do not come back together. The
// engine caps it at its retry_max.
const (
	overloadBackoffBase = 2 * time.Second
	overloadBackoffMax  = time.Minute
)

// overloadBackoff is the wait before the next try after attempt (from 1)
// met an overloaded provider; jitter(n) is uniform in [0, n).
func overloadBackoff(attempt int, jitter func(n int64) int64) time.Duration {
	d := overloadBackoffBase << min(max(attempt-1, 0), 10)
	d = min(d, overloadBackoffMax)
	if half := int64(d / 2); half > 0 {
		d += time.Duration(jitter(half))
	}
	return d
}

// statusCode maps an HTTP status (and the provider's error code, type and
// message, for the context-length case) onto a code and whether another
// try may succeed.
func statusCode(status int, kind, message string) (string, bool) {
	switch {
	case status == http.StatusTooManyRequests:
		return codeRate, true
	case status == http.StatusRequestTimeout || status >= 500:
		return codeUnavailable, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusPaymentRequired:
		return codeAuth, false
	case status == http.StatusNotFound:
		return codeNotFound, false
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		if isContextLength(kind, message) {
			return codeContext, false
		}
		return codeBadRequest, false
	}
	return codeBadRequest, false
}

// isContextLength recognises the providers' ways of saying the prompt is
// longer than the model's context window.
func isContextLength(kind, message string) bool {
	if strings.Contains(kind, "context_length_exceeded") {
		return true
	}
	m := strings.ToLower(message)
	for _, s := range []string{"context length", "context_length", "context window", "prompt is too long", "maximum context"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// anthropicTypeStatus is the status an Anthropic error type stands for,
// for errors that arrive inside a stream.
func anthropicTypeStatus(t string) int {
	switch t {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return statusOverloaded
	}
	return http.StatusInternalServerError
}

// quote appends the provider's message, except for auth failures: a
// provider may echo (part of) the key it refused.
func quote(code, msg string) string {
	if code == codeAuth || msg == "" {
		return ""
	}
	if len(msg) > maxProviderMessage {
		msg = msg[:maxProviderMessage] + "..."
	}
	return ": " + msg
}

// retryAfter reads Retry-After-Ms or Retry-After (seconds or an HTTP
// date) from a response; 0 when absent or unreadable.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	if resp == nil {
		return 0
	}
	return parseRetryAfter(resp.Header, now)
}

func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			d = time.Duration(math.Min(ms, float64(maxRetryAfter/time.Millisecond))) * time.Millisecond
		}
	}
	if v := h.Get("Retry-After"); d == 0 && v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 && !math.IsInf(s, 0) {
				d = time.Duration(math.Min(s, maxRetryAfter.Seconds()) * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil && t.After(now) {
			d = t.Sub(now)
		}
	}
	return min(d, maxRetryAfter)
}

func isJSONError(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te) || strings.Contains(err.Error(), "invalid character") || strings.Contains(err.Error(), "unexpected end of JSON")
}

func isTransportError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded)
}

// redact removes every key from s: no error, log line or output of the
// plugin carries one.
func redact(s string, keys []string) string {
	for _, k := range keys {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return s
}
